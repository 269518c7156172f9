#!/usr/bin/env bash
# Token budgets (docs/token-budgets.md), three figures in one run:
#  1. What settling costs: wrk against the echo upstream's /_test/usage/7 (a
#     JSON body whose usage says 7 tokens) through tollgate with a
#     token_bucket rule that settles from it (settle = { json =
#     "usage.total_tokens" }) and through the same rule with a fixed cost,
#     alternating rounds (goal: settling ≥ 0.9× the fixed cost's req/s),
#     with each tollgate's CPU time per request from /proc (its own
#     accounting: what the noise of this shared machine cannot move much).
#  2. Time to the first event of a streamed chat completion
#     (bench/sse_bench: a C++ streaming upstream and the C++ client that
#     times it, so that no Python runs on the timed path) through tollgate with
#     cost = "openai" and through nginx with proxy_buffering off (as an SSE
#     proxy is configured), alternating (goal: tollgate ≤ 1.1× nginx): on
#     one kept-alive connection (as SDK clients send), and with a
#     connection per request; and through tollgate without a rule, which
#     tells the budget's own part from the proxy's.
#  3. Tokens admitted ÷ budget: 64 clients of one team (bench/cost_load.py)
#     against a fixed_window budget of BUDGET tokens, each request allowed
#     64 output tokens, through tollgate with cost = "openai" (reserve the
#     upper bound, settle to the usage) and with cost = 1 settled to the
#     usage: a check at admission and the real charge afterwards, as
#     Envoy's apply_on_stream_done, Kong's AI rate limiting and APISIX's
#     ai-rate-limiting charge (the anchors' way, measured on tollgate).
# Usage: bench/cost.sh [rounds]   (env: BUDGET, TTFB_REQUESTS, WRK_*)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}
budget=${BUDGET:-20000}
ttfb_requests=${TTFB_REQUESTS:-200}

rule() {  # name "cost keys" limit algorithm
  printf '[[rules]]\nname = "%s"\nkey = "header:X-Team"\nalgorithm = "%s"\nlimit = %s\nwindow = "1h"\n%s\n' \
    "$1" "$4" "$3" "$2"
}

declare -A port pid
# 1. Settling against a fixed cost, same rule otherwise.
echo_port=$(free_port); start_echo "$echo_port"
port[fixed]=$(free_port)
start_tollgate "${port[fixed]}" "$echo_port" "$(rule fixed 'cost = 10' 100000000 token_bucket)"
pid[fixed]=${PIDS[-1]}
port[settle]=$(free_port)
start_tollgate "${port[settle]}" "$echo_port" \
  "$(rule settle $'cost = 10\nsettle = { json = "usage.total_tokens" }' 100000000 token_bucket)"
pid[settle]=${PIDS[-1]}
lua=$WORK/team.lua
echo 'wrk.headers["X-Team"] = "bench"' > "$lua"
declare -A wrk_script=([fixed]=$lua [settle]=$lua)
BENCH_PATH=/_test/usage/7 run_rounds "$rounds" fixed settle
unset wrk_script

# 2. Time to the first event, tollgate against nginx, in front of
# bench/sse_bench's streaming upstream and timed by its client.
sse_bench=$BUILD_DIR/bench/sse_bench
sse_port=$(free_port)
"$sse_bench" serve "$sse_port" &
PIDS+=($!)
wait_port "$sse_port"
port[nginx_sse]=$(free_port)
start_nginx "${port[nginx_sse]}" "$sse_port" "proxy_buffering off;"
port[tollgate_sse]=$(free_port)
start_tollgate "${port[tollgate_sse]}" "$sse_port" \
  "$(rule sse $'cost = "openai"\nmax_output_tokens = 64' 100000000 token_bucket)"
port[plain_sse]=$(free_port)
start_tollgate "${port[plain_sse]}" "$sse_port"
for t in nginx_sse tollgate_sse plain_sse; do : > "$WORK/$t"; done
for round in $(seq "$rounds"); do
  order="nginx_sse tollgate_sse plain_sse"
  if [ $((round % 2)) -eq 0 ]; then order="plain_sse tollgate_sse nginx_sse"; fi
  for t in $order; do
    kept=$("$sse_bench" ttfb "${port[$t]}" "$ttfb_requests")
    fresh=$("$sse_bench" ttfb "${port[$t]}" "$ttfb_requests" --new-connections)
    echo "round $round $t: kept-alive $kept, new connections $fresh" >&2
    awk '{ gsub(/[a-z0-9_]+=/, ""); print }' <<<"$kept $fresh" >> "$WORK/$t"
  done
done

# 3. Tokens admitted against the budget, 64 clients at once.
python3 "$BENCH_ROOT/tests/gateway/fake_llm.py" 2>"$WORK/llm.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q port "$WORK/llm.err" 2>/dev/null && break; sleep 0.05; done
llm_port=$(sed -n 's/port //p' "$WORK/llm.err")
declare -A admitted
for t in reserve after; do
  keys=$'cost = "openai"\nmax_output_tokens = 64'
  if [ "$t" = after ]; then keys=$'cost = 1\nsettle = { json = "usage.total_tokens" }'; fi
  p=$(free_port)
  start_tollgate "$p" "$llm_port" "$(rule "$t" "$keys" "$budget" fixed_window)"
  admitted[$t]=$(python3 "$BENCH_ROOT/bench/cost_load.py" "http://127.0.0.1:$p/v1/chat/completions" \
    64 "${COST_REQUESTS:-20}" 64)
  echo "$t: ${admitted[$t]}" >&2
done
tokens_of() { sed -n 's/.*tokens=\([0-9]*\).*/\1/p' <<<"${admitted[$1]}"; }

report=$WORK/report.md
{
  echo "## Token budgets (bench/cost.sh)"
  echo
  echo "\`bench/cost.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), at $(git -C "$BENCH_ROOT" rev-parse --short HEAD). tollgate \`threads = 1\`, nginx 1 worker."
  echo
  echo "**1. Settling from a JSON body** (wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s}, the echo upstream's /_test/usage/7, a token_bucket rule with cost = 10, with and without \`settle = { json = \"usage.total_tokens\" }\`; $rounds alternating rounds, medians):"
  echo
  echo "| target | req/s | p50 ms | p99 ms | CPU µs per request |"
  echo "|---|---:|---:|---:|---:|"
  for t in fixed settle; do
    echo "| $t | $(col "$t" 1) | $(col "$t" 2) | $(col "$t" 3) | $(col "$t" 6) |"
  done
  echo
  echo "settle ÷ fixed: req/s **$(ratio "$(col settle 1)" "$(col fixed 1)")×** (goal ≥ 0.90×; round by round $(round_ratios fixed settle 1 higher)), CPU per request $(ratio "$(col settle 6)" "$(col fixed 6)")× (round by round $(round_ratios fixed settle 6 lower))."
  echo
  echo "**2. Time to the first event of a stream** (\`bench/sse_bench ttfb\`, $ttfb_requests requests a round, each read to its end, against \`bench/sse_bench serve\`: C++ on both ends; tollgate with cost = \"openai\" (tollgate_sse) and without any rule (plain_sse), nginx with \`proxy_buffering off\`):"
  echo
  echo "| target | kept-alive p50 ms | p90 ms | new connections p50 ms | p90 ms |"
  echo "|---|---:|---:|---:|---:|"
  for t in nginx_sse tollgate_sse plain_sse; do
    echo "| $t | $(col "$t" 1) | $(col "$t" 2) | $(col "$t" 3) | $(col "$t" 4) |"
  done
  echo
  echo "tollgate ÷ nginx, p50 kept-alive: **$(ratio "$(col tollgate_sse 1)" "$(col nginx_sse 1)")×** (goal ≤ 1.10×; round by round $(round_ratios nginx_sse tollgate_sse 1 lower)); with a connection per request **$(ratio "$(col tollgate_sse 3)" "$(col nginx_sse 3)")×** (round by round $(round_ratios nginx_sse tollgate_sse 3 lower)). The budget's own part, tollgate with the rule ÷ without (plain_sse): kept-alive $(ratio "$(col tollgate_sse 1)" "$(col plain_sse 1)")× (round by round $(round_ratios plain_sse tollgate_sse 1 lower)), new connections $(ratio "$(col tollgate_sse 3)" "$(col plain_sse 3)")×."
  echo
  echo "**3. Tokens admitted ÷ budget** (bench/cost_load.py: 64 clients of one team, ${COST_REQUESTS:-20} requests each, max_tokens 64, fixed_window budget of $budget tokens an hour):"
  echo
  echo "| charging | tokens admitted | ÷ budget | requests admitted / refused |"
  echo "|---|---:|---:|---:|"
  for t in reserve after; do
    name="reserve the upper bound, settle (cost = \"openai\")"
    [ "$t" = after ] && name="after the fact (cost = 1, settled to the usage)"
    echo "| $name | $(tokens_of "$t") | $(ratio "$(tokens_of "$t")" "$budget") | $(sed -n 's/.*admitted=\([0-9]*\) refused=\([0-9]*\).*/\1 \/ \2/p' <<<"${admitted[$t]}") |"
  done
} > "$report"
cat "$report"
write_results cost "$report"
