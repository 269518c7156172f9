// `tollgate ctl`: the admin API's command-line client
// (docs/admin-api.md): rules, keys, reset, block, unblock, blocks, override (set, list,
// remove). Prints tables for people, or the server's JSON with --json.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tollgate::gateway {

// `args`: what follows "ctl". Returns the exit code: 0; 1 with the
// server's error (or when the admin listener cannot be reached); 2 for a
// usage error.
int RunCtl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

inline constexpr char kCtlUsage[] = R"(usage: tollgate ctl [--admin URL] [--token-env NAME] [--json] COMMAND ...
  rules                                     the rules in force
  keys  --rule NAME KEY...                  a key's state, window by window
  reset --rule NAME KEY...                  reset a key
  block (--ip CIDR | --user U | --header NAME=VALUE | --ips-from FILE) --ttl DURATION [--status N]
                                            FILE: one address or network a line (# comments)
  unblock --id ID                           remove a block (its id as `blocks` lists it)
  blocks                                    the blocks in force
  override set --rule NAME KEY... --limit N --window DURATION [--burst N]... --ttl DURATION
                                            give a key other limits for a while
  override list [--rule NAME]               the overrides in force
  override remove --rule NAME KEY...        remove a key's override
KEY: the rule's key parts: --ip A, --user U, --role R, --route R, --header NAME=VALUE,
--descriptor K=V,K=V (an RLS descriptor's entries)
--limit/--window: one pair per window; the k-th --window and --burst (a bucket's,
optional) go with the k-th --limit.
--admin: the admin listener (default http://127.0.0.1:9090); --token-env: the
environment variable holding the admin token (default TOLLGATE_ADMIN_TOKEN).
)";

}  // namespace tollgate::gateway
