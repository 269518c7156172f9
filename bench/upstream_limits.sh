#!/usr/bin/env bash
# Protecting an upstream that has its own limit (the echo upstream's partner
# API, /_test/limited/..., which answers X-RateLimit-* headers and 429s):
#  1. the cost of the learned-limit check: tollgate with learn_limits in
#     front of a partner limit it never reaches, versus a plain per-IP
#     token bucket that passes everything, same path, same wrk load, one
#     worker each, alternating rounds (goal: within 5%);
#  2. the same two on the Redis store (the learned check is then a script
#     in Redis, like the token bucket's decision);
#  3. wrk against a partner limit of 500 per second through tollgate: how
#     many requests reached the partner beyond its limit (goal: 0 after
#     the first learning response).
# Usage: bench/upstream_limits.sh [rounds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}
learn='learn_limits = true
learn_bucket = "/_test/limited/{name}"
learn_max_delay = "5s"'

echo_port=$(free_port); start_echo "$echo_port"
declare -A port
port[learned]=$(free_port); TOLLGATE_UPSTREAM_OPTIONS=$learn start_tollgate "${port[learned]}" "$echo_port"
port[token_bucket]=$(free_port); start_tollgate "${port[token_bucket]}" "$echo_port" "$PASS_ALL_RULE"
open_path="/_test/limited/open?limit=1000000000&window=1000"
# One request teaches tollgate the partner's limit; until the partner's
# window ends, that first bucket (started at the default limit of 1) is
# empty and others would wait: a one-off cost, not the check's.
redis_port=$(free_port); start_redis "$redis_port"
on_redis="[store]
kind = \"redis\"
[store.redis]
url = \"redis://127.0.0.1:$redis_port\""
port[learned_redis]=$(free_port)
TOLLGATE_UPSTREAM_OPTIONS=$learn start_tollgate "${port[learned_redis]}" "$echo_port" "$on_redis"
port[token_bucket_redis]=$(free_port)
start_tollgate "${port[token_bucket_redis]}" "$echo_port" "$PASS_ALL_RULE
$on_redis"
curl -s -o /dev/null "http://127.0.0.1:${port[learned]}$open_path"
curl -s -o /dev/null "http://127.0.0.1:${port[learned_redis]}$open_path"
sleep 1.1
BENCH_PATH=$open_path run_rounds "$rounds" learned token_bucket learned_redis token_bucket_redis

# The partner's limit, reached: 500 per 1000 ms.
limited=$(run_wrk "http://127.0.0.1:${port[learned]}/_test/limited/tight?limit=500&window=1000")
stats=$(curl -s "http://127.0.0.1:$echo_port/_test/partner-stats")
served=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tight"]["served"])' "$stats")
refused=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tight"]["refused"])' "$stats")
most=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tight"]["max_in_window"])' "$stats")

report=$WORK/report.md
{
  echo "## Upstream protection: learned limits (bench/upstream_limits.sh)"
  echo
  echo "\`bench/upstream_limits.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s}, $rounds alternating rounds, medians; one worker each; both in front of the same partner path."
  echo
  echo "| tollgate in front of the partner | req/s | p50 ms | p99 ms |"
  echo "|---|---:|---:|---:|"
  echo "| learn_limits (limit never reached) | $(col learned 1) | $(col learned 2) | $(col learned 3) |"
  echo "| plain token_bucket rule | $(col token_bucket 1) | $(col token_bucket 2) | $(col token_bucket 3) |"
  echo "| learn_limits, Redis store | $(col learned_redis 1) | $(col learned_redis 2) | $(col learned_redis 3) |"
  echo "| plain token_bucket rule, Redis store | $(col token_bucket_redis 1) | $(col token_bucket_redis 2) | $(col token_bucket_redis 3) |"
  echo
  echo "learned ÷ token bucket, local store: $(awk -v a="$(col learned 1)" -v b="$(col token_bucket 1)" 'BEGIN { printf "%.3f", a / b }')× req/s, p50 latency $(awk -v a="$(col learned 2)" -v b="$(col token_bucket 2)" 'BEGIN { printf "%.3f", a / b }')× (goal: within 5%)."
  echo
  echo "learned ÷ token bucket, Redis store: $(awk -v a="$(col learned_redis 1)" -v b="$(col token_bucket_redis 1)" 'BEGIN { printf "%.3f", a / b }')× req/s, p50 latency $(awk -v a="$(col learned_redis 2)" -v b="$(col token_bucket_redis 2)" 'BEGIN { printf "%.3f", a / b }')× (one check script plus one fire-and-forget learn script per request, against the token bucket's decision script, whose calls the decisions of one turn share)."
  echo
  echo "Partner limit of 500 per second, wrk for ${WRK_DURATION:-5s} with ${WRK_CONNECTIONS:-64} connections through tollgate: the partner served $served requests and refused $refused (goal: 0 beyond the first learning answer); the most it served in one window: $most (its limit: 500). Client view: $(awk '{ print $1 " req/s, " $4 " non-2xx (tollgate held requests up to learn_max_delay, then answered 429)" }' <<<"$limited")."
} > "$report"
cat "$report"
write_results upstream_limits "$report"
