#!/usr/bin/env bash
# The Redis store's own throughput: decisions/s of one RedisStore connection
# keeping 64 decisions in flight, versus redis-benchmark sending the very
# same EVALSHA (same script, key and arguments) with the same pipelining
# (-c 1 -P 64). Both share this machine with the one redis-server.
# Usage: bench/redis_store.sh [rounds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}
decisions=${DECISIONS:-300000}
depth=${DEPTH:-64}
bench=$BUILD_DIR/bench/redis_store_bench

port=$(free_port); start_redis "$port"
command=$("$bench" --command)
: > "$WORK/store"; : > "$WORK/anchor"
for round in $(seq "$rounds"); do
  store=$("$bench" "$port" "$depth" "$decisions")
  # shellcheck disable=SC2086
  anchor=$(eval redis-benchmark -p "$port" -c 1 -P "$depth" -n "$decisions" -q $command 2>/dev/null |
           tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  echo "round $round: RedisStore $store/s, redis-benchmark $anchor/s" >&2
  echo "$store" >> "$WORK/store"; echo "$anchor" >> "$WORK/anchor"
done
s=$(median < "$WORK/store"); a=$(median < "$WORK/anchor")
report=$WORK/report.md
{
  echo "## Redis store decisions/s vs redis-benchmark (bench/redis_store.sh)"
  echo
  echo "\`bench/redis_store.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), $rounds rounds of $decisions decisions, medians. One connection, $depth decisions in flight, token_bucket on one hot key, \`time = \"server\"\`; redis-benchmark runs the same EVALSHA with \`-c 1 -P $depth\`."
  echo
  echo "| RedisStore decisions/s | redis-benchmark EVALSHA/s | ratio (goal ≥ 0.8×) |"
  echo "|---:|---:|---:|"
  echo "| $s | $a | $(awk -v a="$s" -v b="$a" 'BEGIN { printf "%.2f", a / b }')× |"
} > "$report"
cat "$report"
write_results redis_store "$report"
