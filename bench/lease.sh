#!/usr/bin/env bash
# Leased quotas (sync = "lease", docs/redis.md, "Leased quotas"): one hot `global`
# token bucket that lets everything through, through tollgate with
# sync = "lease", with sync = "exact" (a script call per decision) and on
# the local store, same wrk load, one worker each, alternating rounds; then
# for each Redis-backed target one more run measuring the Redis commands per
# request (INFO commandstats) and redis-server's CPU seconds per million
# requests (INFO cpu). Also the per-key cost: a rule keyed by a header that
# takes 100000 values in turn (bench/distinct_keys.lua: every key cold),
# lease vs exact.
# Usage: bench/lease.sh [rounds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-3}

redis_port=$(free_port); start_redis "$redis_port"
echo_port=$(free_port); start_echo "$echo_port"
redis_store() { redis_store_section "$redis_port"; }
# A token bucket of 10 million a second on key $1 ("global" unless given)
# with sync $2 (none: the local store's rule).
rule() {  # key [sync]
  token_bucket_rule 10000000 10000000 "$1"
  if [ -n "${2:-}" ]; then echo "sync = \"$2\""; fi
}
declare -A port wrk_script
port[local]=$(free_port); start_tollgate "${port[local]}" "$echo_port" "$(rule global)"
port[exact]=$(free_port); start_tollgate "${port[exact]}" "$echo_port" "$(redis_store)
$(rule global exact)"
port[lease]=$(free_port); start_tollgate "${port[lease]}" "$echo_port" "$(redis_store)
$(rule global lease)"
for t in exact_keys lease_keys; do wrk_script[$t]=$BENCH_ROOT/bench/distinct_keys.lua; done
port[exact_keys]=$(free_port); start_tollgate "${port[exact_keys]}" "$echo_port" "$(redis_store)
$(rule header:X-Key exact)"
port[lease_keys]=$(free_port); start_tollgate "${port[lease_keys]}" "$echo_port" "$(redis_store)
$(rule header:X-Key lease)"

targets="local exact lease exact_keys lease_keys"
run_rounds "$rounds" $targets

# redis-server's CPU seconds (user + system) so far.
redis_cpu() {
  redis-cli -p "$redis_port" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.3f", s }'
}

# One more wrk run through target $1: "<script calls per request> <Redis
# commands per request> <redis-server CPU s per million requests>".
redis_cost() {
  local counted requests before after stats
  redis-cli -p "$redis_port" config resetstat >/dev/null
  before=$(redis_cpu)
  counted=$(run_wrk "http://127.0.0.1:${port[$1]}/api/hello" "${wrk_script[$1]:-}")
  after=$(redis_cpu)
  requests=$(echo "$counted" | awk '{ print $5 }')
  stats=$(redis-cli -p "$redis_port" info commandstats | tr -d '\r')
  echo "$stats" | awk -F'[:=,]' -v n="$requests" -v cpu="$(awk -v a="$after" -v b="$before" 'BEGIN { print a - b }')" '
    /^cmdstat_/ && $1 != "cmdstat_config|resetstat" && $1 != "cmdstat_info" {
      all += $3; if ($1 == "cmdstat_evalsha") evalsha = $3
    }
    END { printf "%.5f %.5f %.2f\n", evalsha / n, all / n, cpu / n * 1e6 }'
}
declare -A cost
for t in exact lease exact_keys lease_keys; do cost[$t]=$(redis_cost "$t"); done
field() { echo "${cost[$1]}" | awk -v c="$2" '{ print $c }'; }

report=$WORK/report.md
{
  echo "## Leased quotas: sync = \"lease\" vs \"exact\" vs the local store (bench/lease.sh)"
  echo
  echo "\`bench/lease.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s}, $rounds alternating rounds, medians; one tollgate worker each and one redis-server, all on the same cores. Rule: \`token_bucket\`, 10 million a second (nothing is limited), \`headers = \"none\"\`; \`lease_ttl\` and \`lease_max\` at their defaults (1 s, a tenth of the limit)."
  echo
  echo "| target | req/s | p99 ms | ÷ local req/s | EVALSHA per request | Redis commands per request | redis-server CPU s per million requests |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  echo "| local store, one \`global\` key | $(col local 1) | $(col local 3) | 1.00× | 0 | 0 | — |"
  for t in exact lease; do
    echo "| Redis, \`sync = \"$t\"\`, one \`global\` key | $(col $t 1) | $(col $t 3) | $(ratio "$(col $t 1)" "$(col local 1)")× | $(field $t 1) | $(field $t 2) | $(field $t 3) |"
  done
  for t in exact lease; do
    echo "| Redis, \`sync = \"$t\"\`, 100000 cold keys in turn | $(col ${t}_keys 1) | $(col ${t}_keys 3) | — | $(field ${t}_keys 1) | $(field ${t}_keys 2) | $(field ${t}_keys 3) |"
  done
  echo
  echo "Round by round (tollgate ÷ tollgate, back to back in each round):"
  echo "- lease ÷ local, req/s: $(round_ratios local lease 1 higher)."
  echo "- lease ÷ exact, req/s: $(round_ratios exact lease 1 higher)."
  echo "- cold keys, lease ÷ exact, req/s: $(round_ratios exact_keys lease_keys 1 higher)."
  echo
  echo "Goals: lease ≥ 0.97× the local store's req/s; Redis commands per request ≤ 0.01; on cold keys lease within 5% of exact."
} > "$report"
cat "$report"
write_results lease "$report"
