#!/usr/bin/env bash
# The Redis store's own throughput: decisions/s of one RedisStore connection
# keeping 64 decisions in flight on 64 keys taken in turn, with `batch = 1`
# (each decision its own EVALSHA), versus redis-benchmark sending the very
# same EVALSHA (same script, keys and arguments: -r 64 fills in the key's
# number) with the same pipelining (-c 1 -P 64). Both share this machine
# with the one redis-server. Also reported: the same RedisStore with the
# default batch = 64 (decisions of one turn share script calls), on the 64
# keys and on one hot key.
# Usage: bench/redis_store.sh [rounds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}
decisions=${DECISIONS:-300000}
depth=${DEPTH:-64}
bench=$BUILD_DIR/bench/redis_store_bench

port=$(free_port); start_redis "$port"
command=$("$bench" --command)
: > "$WORK/store"; : > "$WORK/anchor"; : > "$WORK/batched"; : > "$WORK/hot"
for round in $(seq "$rounds"); do
  store=$("$bench" "$port" "$depth" "$decisions" "$depth" 1 2>/dev/null)
  # shellcheck disable=SC2086
  anchor=$(eval redis-benchmark -p "$port" -c 1 -P "$depth" -n "$decisions" -r "$depth" -q $command 2>/dev/null |
           tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  batched=$("$bench" "$port" "$depth" "$decisions" "$depth" 64 2>/dev/null)
  hot=$("$bench" "$port" "$depth" "$decisions" 1 64 2>/dev/null)
  echo "round $round: RedisStore $store/s, redis-benchmark $anchor/s; batched: $batched/s, one hot key $hot/s" >&2
  echo "$store" >> "$WORK/store"; echo "$anchor" >> "$WORK/anchor"
  echo "$batched" >> "$WORK/batched"; echo "$hot" >> "$WORK/hot"
done
s=$(median < "$WORK/store"); a=$(median < "$WORK/anchor")
b=$(median < "$WORK/batched"); h=$(median < "$WORK/hot")
report=$WORK/report.md
{
  echo "## Redis store decisions/s vs redis-benchmark (bench/redis_store.sh)"
  echo
  echo "\`bench/redis_store.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), $rounds rounds of $decisions decisions, medians. One connection, $depth decisions in flight, token_bucket on $depth keys taken in turn, \`time = \"server\"\`, \`batch = 1\` (one EVALSHA per decision); redis-benchmark runs the same EVALSHA on the same keys with \`-c 1 -P $depth -r $depth\`. Last two columns: the same RedisStore with the default \`batch = 64\`, where the decisions of one turn share script calls, on the $depth keys and on one hot key."
  echo
  echo "| RedisStore decisions/s | redis-benchmark EVALSHA/s | ratio (goal ≥ 0.8×) | batched, $depth keys: decisions/s (÷ redis-benchmark) | batched, one hot key |"
  echo "|---:|---:|---:|---:|---:|"
  echo "| $s | $a | $(ratio "$s" "$a")× | $b ($(ratio "$b" "$a")×) | $h ($(ratio "$h" "$a")×) |"
} > "$report"
cat "$report"
write_results redis_store "$report"
