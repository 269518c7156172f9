#!/usr/bin/env bash
# deploy/bash-completion/tollgate: what it offers at a few points of the
# command line, and that its options are the binary's own (each one it
# offers is parsed by gateway/main.cc, gateway/tools/ctl.cc or
# gateway/tools/replay_upstream.cc, and each option main.cc and
# replay_upstream.cc parse is offered).
# usage: completion_test.sh SOURCE_DIR
set -euo pipefail
src=$1
source "$src/deploy/bash-completion/tollgate"
failed=0

# Completes the words given, the last being the one under the cursor.
offers() {
  COMP_WORDS=(tollgate "$@")
  COMP_CWORD=$(($# ))
  COMPREPLY=()
  _tollgate
  echo "${COMPREPLY[*]:-}"
}
expect() {
  local want=$1
  shift
  local got
  got=$(offers "$@")
  if [ "$got" != "$want" ]; then
    echo "FAIL: tollgate $* -> \"$got\", expected \"$want\""
    failed=1
  fi
}

expect "replay" re
expect "--config --check-config" --c
expect "echo-upstream" e
expect "replay" help re
expect "token_bucket two_bucket" replay --algorithm t
expect "local redis" replay --store ''
expect "exact lease" replay --sync ''
expect "--sub-windows --store --sync --service-time" replay --s
expect "envoy-ratelimit" import ''
expect "--listen" echo-upstream --l
expect "override" ctl ov
expect "set" ctl override s
expect "--limit" ctl override set --l
expect "--ips-from" ctl block --ips
expect "--id" ctl unblock ''
expect "" replay --limit ''

# Every option offered is parsed by the binary (main.cc compares "--name";
# ctl.cc takes the value of "name").
for option in $(grep -o -- '--[a-z][a-z-]*' "$src/deploy/bash-completion/tollgate" | sort -u); do
  if ! grep -q -e "\"$option\"" -e "\"${option#--}\"" "$src/gateway/main.cc" \
    "$src/gateway/tools/ctl.cc" "$src/gateway/tools/replay_upstream.cc"; then
    echo "FAIL: the completion offers $option, which tollgate does not parse"
    failed=1
  fi
done
# Every option main.cc and replay_upstream.cc parse is offered.
for option in $(grep -ho -- '"--[a-z][a-z-]*"' "$src/gateway/main.cc" \
  "$src/gateway/tools/replay_upstream.cc" | tr -d '"' | sort -u); do
  if ! grep -q -- "$option\b" "$src/deploy/bash-completion/tollgate"; then
    echo "FAIL: tollgate parses $option, which the completion does not offer"
    failed=1
  fi
done
exit $failed
