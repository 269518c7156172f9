#!/usr/bin/env bash
# Rate limiting per client IP: nginx `limit_req ... nodelay` versus tollgate's
# per-IP token bucket (same rate and burst), same wrk load, 1 worker each:
#   pass:  the limit is high, every request passes;
#   limit: the limit is low (100/s, burst 10), > 90% are answered 429.
# Also tollgate with the "pass" rule versus tollgate as a plain proxy: the
# cost of rate limiting itself; and the pass rule on the Redis store
# (a local redis-server) versus the local store, with the Redis commands
# each request costs (INFO commandstats): once on the per-IP rule (one hot
# key: concurrent decisions share script calls) and once on a rule keyed by
# a header that takes 100000 values in turn (bench/distinct_keys.lua: no two
# decisions in flight share a key), each against the local store with the
# same rule and load.
# Usage: bench/ratelimit.sh [rounds] [--admin-load]
#   --admin-load: instead, the cost of the admin API's blocks and overrides
#   on requests none of them applies to: tollgate with the pass rule and
#   10 000 blocks and 10 000 overrides loaded (bench/admin_load.py) against
#   the same gateway with none, written to RESULTS.md's ratelimit_admin
#   section.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
admin_load=false
args=()
for arg in "$@"; do
  if [ "$arg" = --admin-load ]; then admin_load=true; else args+=("$arg"); fi
done
rounds=${args[0]:-3}

if $admin_load; then
  # Both gateways have the admin token, so that they differ only in what
  # is loaded.
  TOLLGATE_ADMIN_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  export TOLLGATE_ADMIN_TOKEN
  export TOLLGATE_ADMIN_OPTIONS='token_env = "TOLLGATE_ADMIN_TOKEN"'
  echo_port=$(free_port); start_echo "$echo_port"
  declare -A port
  port[tollgate_pass]=$(free_port); start_tollgate "${port[tollgate_pass]}" "$echo_port" "$(token_bucket_rule 1000000 1000000)"
  port[tollgate_loaded]=$(free_port); start_tollgate "${port[tollgate_loaded]}" "$echo_port" "$(token_bucket_rule 1000000 1000000)"
  loaded_admin=$(awk '/^\[admin\]/ { a = 1 } a && /^address/ { gsub(/.*:|"/, ""); print; exit }' \
    "$WORK/tollgate-${port[tollgate_loaded]}.toml")
  load_started=$(date +%s)
  /usr/bin/python3 "$BENCH_ROOT/bench/admin_load.py" "$loaded_admin" 10000 10000 per-key
  load_seconds=$(( $(date +%s) - load_started ))
  load_before=$(cut -d" " -f1-3 /proc/loadavg)
  run_rounds "$rounds" tollgate_pass tollgate_loaded
  report=$WORK/report.md
  {
    echo "## Rate limiting with 10 000 blocks and 10 000 overrides (bench/ratelimit.sh --admin-load)"
    echo
    echo "\`bench/ratelimit.sh $rounds --admin-load\` on $(nproc) cores, $(date -u +%Y-%m-%d), load average before the rounds $load_before, wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s}, $rounds alternating rounds, medians; one worker each, the pass rule of bench/ratelimit.sh (\`token_bucket\` per IP, R = B = 1000000, nothing limited)."
    echo "Loaded through the admin API into one of the two (bench/admin_load.py, ${load_seconds} s): 10 000 blocks (2 500 each of IPv4 /24 networks, IPv6 /48 networks, users, X-Api-Key values) and 10 000 overrides of the rule's keys (addresses in 198.18.0.0/15). None applies to the load (127.0.0.1, no user, no X-Api-Key), so every request is looked up in the IPv4 trie and in the rule's overrides."
    echo
    echo "| gateway | req/s | p50 ms | p99 ms |"
    echo "|---|---:|---:|---:|"
    echo "| none loaded | $(col tollgate_pass 1) | $(col tollgate_pass 2) | $(col tollgate_pass 3) |"
    echo "| 10 000 blocks + 10 000 overrides | $(col tollgate_loaded 1) | $(col tollgate_loaded 2) | $(col tollgate_loaded 3) |"
    echo
    echo "Loaded ÷ none, round by round (the two ran back to back in each round): req/s $(round_ratios tollgate_pass tollgate_loaded 1 higher); p99 $(round_ratios tollgate_pass tollgate_loaded 3 lower)."
    echo "Goal: unchanged within noise."
  } > "$report"
  cat "$report"
  write_results ratelimit_admin "$report"
  exit 0
fi


echo_port=$(free_port); start_echo "$echo_port"
declare -A port
port[nginx_pass]=$(free_port); start_nginx "${port[nginx_pass]}" "$echo_port" "limit_req zone=ip burst=1000000 nodelay;" "$(nginx_limit_zone 1000000)"
port[nginx_limit]=$(free_port); start_nginx "${port[nginx_limit]}" "$echo_port" "limit_req zone=ip burst=10 nodelay;" "$(nginx_limit_zone 100)"
port[tollgate_pass]=$(free_port); start_tollgate "${port[tollgate_pass]}" "$echo_port" "$(token_bucket_rule 1000000 1000000)"
port[tollgate_limit]=$(free_port); start_tollgate "${port[tollgate_limit]}" "$echo_port" "$(token_bucket_rule 100 10)"
port[tollgate_plain]=$(free_port); start_tollgate "${port[tollgate_plain]}" "$echo_port"
redis_port=$(free_port); start_redis "$redis_port"
redis_store() { redis_store_section "$redis_port"; }
port[tollgate_redis]=$(free_port); start_tollgate "${port[tollgate_redis]}" "$echo_port" "$(redis_store)
$(token_bucket_rule 1000000 1000000)"
declare -A wrk_script
for t in tollgate_keys tollgate_redis_keys; do wrk_script[$t]=$BENCH_ROOT/bench/distinct_keys.lua; done
port[tollgate_keys]=$(free_port); start_tollgate "${port[tollgate_keys]}" "$echo_port" "$(token_bucket_rule 1000000 1000000 header:X-Key)"
port[tollgate_redis_keys]=$(free_port); start_tollgate "${port[tollgate_redis_keys]}" "$echo_port" "$(redis_store)
$(token_bucket_rule 1000000 1000000 header:X-Key)"

targets="nginx_pass tollgate_pass tollgate_plain tollgate_redis tollgate_keys tollgate_redis_keys nginx_limit tollgate_limit"
run_rounds "$rounds" $targets


# The Redis commands per request through Redis-backed target $1, one more
# wrk run: a sentence for the report.
redis_commands() {
  local counted requests stats evalsha usec per_command
  redis-cli -p "$redis_port" config resetstat >/dev/null
  counted=$(run_wrk "http://127.0.0.1:${port[$1]}/api/hello" "${wrk_script[$1]:-}")
  requests=$(echo "$counted" | awk '{ print $5 }')
  stats=$(redis-cli -p "$redis_port" info commandstats | tr -d '\r')
  evalsha=$(echo "$stats" | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
  usec=$(echo "$stats" | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')
  per_command=$(echo "$stats" | sed -n 's/^cmdstat_\([a-z|]*\):calls=\([0-9]*\).*/\1 \2/p' |
    awk -v n="$requests" '$1 != "evalsha" && $1 != "config|resetstat" { printf "%s%s %.3f", sep, toupper($1), $2 / n; sep = ", " }')
  echo "$(awk -v a="$evalsha" -v b="$requests" 'BEGIN { printf "%.3f", a / b }') EVALSHA per request ($evalsha for $requests requests completed by wrk; INFO commandstats); run inside that script, per request: $per_command; redis-server time per EVALSHA: $usec µs (usec_per_call)"
}
hot_commands=$(redis_commands tollgate_redis)
distinct_commands=$(redis_commands tollgate_redis_keys)
report=$WORK/report.md
{
  echo "## Rate limiting: tollgate vs nginx limit_req (bench/ratelimit.sh)"
  echo
  echo "\`bench/ratelimit.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s}, $rounds alternating rounds, medians; one worker each, per-client-IP limit (all load from one IP)."
  echo "nginx: \`limit_req_zone \$binary_remote_addr rate=R\` + \`limit_req burst=B nodelay\` + \`limit_req_status 429\`, forwarding the client's Host and X-Forwarded-For/-Proto/-Host as tollgate does; tollgate: \`token_bucket\`, \`limit = R\`, \`window = \"1s\"\`, \`burst = B\`, \`headers = \"none\"\`."
  echo
  echo "| scenario | nginx req/s | tollgate req/s | ratio | nginx p99 ms | tollgate p99 ms | p99 ratio |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for s in pass limit; do
    n=nginx_$s; g=tollgate_$s
    echo "| $s | $(col $n 1) | $(col $g 1) | $(ratio "$(col $g 1)" "$(col $n 1)")× | $(col $n 3) | $(col $g 3) | $(ratio "$(col $g 3)" "$(col $n 3)")× |"
  done
  echo
  echo "Round by round (nginx and tollgate ran back to back in each round; tollgate ÷ nginx):"
  for s in pass limit; do
    echo "- $s: req/s $(round_ratios nginx_$s tollgate_$s 1 higher); p99 $(round_ratios nginx_$s tollgate_$s 3 lower)."
  done
  echo
  echo "pass: R = 1000000/s, B = 1000000 (nothing limited). limit: R = 100/s, B = 10 (non-2xx responses: nginx $(col nginx_limit 4), tollgate $(col tollgate_limit 4) per run)."
  echo
  echo "Cost of rate limiting: tollgate with the pass rule $(col tollgate_pass 1) req/s vs plain proxy $(col tollgate_plain 1) req/s = $(ratio "$(col tollgate_pass 1)" "$(col tollgate_plain 1)")× (goal ≥ 0.95×)."
  echo "Goals: tollgate ≥ 1.00× nginx req/s in both scenarios, p99 ≤ nginx's."
  echo
  echo "Redis store (pass rule, \`[store] kind = \"redis\"\`, defaults: pool 1, timeout 20ms, time = server; redis-server on the same 2 cores), goal ≥ 0.7× the local store's req/s and (at most) 1 EVALSHA per request:"
  echo
  echo "| rule key | local store req/s | Redis store req/s | Redis ÷ local | local p99 ms | Redis p99 ms | Redis commands |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  echo "| \`ip\` (one hot key: concurrent decisions share script calls) | $(col tollgate_pass 1) | $(col tollgate_redis 1) | $(ratio "$(col tollgate_redis 1)" "$(col tollgate_pass 1)")× | $(col tollgate_pass 3) | $(col tollgate_redis 3) | $hot_commands |"
  echo "| \`header:X-Key\`, 100000 values in turn (\`bench/distinct_keys.lua\`: no two decisions in flight share a key; those of one turn share calls) | $(col tollgate_keys 1) | $(col tollgate_redis_keys 1) | $(ratio "$(col tollgate_redis_keys 1)" "$(col tollgate_keys 1)")× | $(col tollgate_keys 3) | $(col tollgate_redis_keys 3) | $distinct_commands |"
} > "$report"
cat "$report"
write_results ratelimit "$report"
