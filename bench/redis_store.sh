#!/usr/bin/env bash
# The Redis store's own throughput: decisions/s of one RedisStore connection
# keeping 64 decisions in flight on 64 keys taken in turn (no two in flight
# share a key, so each is its own EVALSHA), versus redis-benchmark sending
# the very same EVALSHA (same script, keys and arguments: -r 64 fills in
# the key's number) with the same pipelining (-c 1 -P 64). Both share this
# machine with the one redis-server. Also reported: the same RedisStore on
# one hot key, where concurrent decisions share script calls (coalescing).
# Usage: bench/redis_store.sh [rounds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}
decisions=${DECISIONS:-300000}
depth=${DEPTH:-64}
bench=$BUILD_DIR/bench/redis_store_bench

port=$(free_port); start_redis "$port"
command=$("$bench" --command)
: > "$WORK/store"; : > "$WORK/anchor"; : > "$WORK/hot"
for round in $(seq "$rounds"); do
  store=$("$bench" "$port" "$depth" "$decisions" "$depth" 2>/dev/null)
  # shellcheck disable=SC2086
  anchor=$(eval redis-benchmark -p "$port" -c 1 -P "$depth" -n "$decisions" -r "$depth" -q $command 2>/dev/null |
           tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  hot=$("$bench" "$port" "$depth" "$decisions" 1 2>/dev/null)
  echo "round $round: RedisStore $store/s, redis-benchmark $anchor/s, RedisStore on one hot key $hot/s" >&2
  echo "$store" >> "$WORK/store"; echo "$anchor" >> "$WORK/anchor"; echo "$hot" >> "$WORK/hot"
done
s=$(median < "$WORK/store"); a=$(median < "$WORK/anchor"); h=$(median < "$WORK/hot")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
report=$WORK/report.md
{
  echo "## Redis store decisions/s vs redis-benchmark (bench/redis_store.sh)"
  echo
  echo "\`bench/redis_store.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), $rounds rounds of $decisions decisions, medians. One connection, $depth decisions in flight, token_bucket on $depth keys taken in turn (one EVALSHA per decision), \`time = \"server\"\`; redis-benchmark runs the same EVALSHA on the same keys with \`-c 1 -P $depth -r $depth\`. Last column: the same RedisStore on one hot key, whose concurrent decisions share script calls (up to 32 per call)."
  echo
  echo "| RedisStore decisions/s | redis-benchmark EVALSHA/s | ratio (goal ≥ 0.8×) | one hot key, coalesced: decisions/s (÷ redis-benchmark) |"
  echo "|---:|---:|---:|---:|"
  echo "| $s | $a | $(ratio "$s" "$a")× | $h ($(ratio "$h" "$a")×) |"
} > "$report"
cat "$report"
write_results redis_store "$report"
