#!/usr/bin/env bash
# bench/ws_relay_probe.cc's relays (an nginx-like epoll loop and io_uring,
# see that file) and nginx, in front of the same bench/ws_echo, under
# bench/ws_load as bench/websocket.sh runs it (64 tunnels, 64-byte
# messages, 1 s warm-up, 5 s counted), in alternating rounds: messages/s and
# each relay's CPU per message (utime + stime from /proc over the counted
# window), medians and round-by-round ratios to the epoll relay. A round in
# which other processes used more than WS_MAX_OTHERS cores in any run is run
# again, up to WS_RETRIES times (then kept and named).
# Usage: bench/ws_relay_probe.sh [rounds=5]
#   (env: PROBE_MODES="epoll uring uring_ms": the relays, among epoll,
#    uring (DEFER_TASKRUN, POLL_FIRST after a receive that emptied the
#    socket), uring_nopf (without POLL_FIRST), uring_coop (COOP_TASKRUN),
#    uring_none (no setup flags), uring_ms (multishot receives);
#    WS_BIN_DIR=$BUILD_DIR/bench, WS_CONNECTIONS, WS_SIZE, WS_DURATION,
#    WS_WARMUP, WS_MAX_OTHERS=0.25, WS_RETRIES=2)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}
WS_BIN_DIR=${WS_BIN_DIR:-$BUILD_DIR/bench}
connections=${WS_CONNECTIONS:-64} size=${WS_SIZE:-64}
duration=${WS_DURATION:-5} warmup=${WS_WARMUP:-1}
max_others=${WS_MAX_OTHERS:-0.25} retries=${WS_RETRIES:-2}
modes=${PROBE_MODES:-epoll uring uring_ms}

probe=$WORK/ws_relay_probe
g++ -O2 -std=c++20 -o "$probe" "$BENCH_ROOT/bench/ws_relay_probe.cc" -luring

declare -A port pid
port[upstream]=$(free_port)
"$WS_BIN_DIR/ws_echo" --listen "127.0.0.1:${port[upstream]}" &
PIDS+=($!); echo_pid=$!
wait_port "${port[upstream]}"
port[nginx]=$(free_port)
start_nginx "${port[nginx]}" "${port[upstream]}" \
  'proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade"; proxy_read_timeout 3600s; proxy_send_timeout 3600s;'
pid[nginx]=$(nginx_worker_pid "${port[nginx]}")
for m in $modes; do
  port[$m]=$(free_port)
  case $m in
    epoll) args=(--mode epoll) ;;
    uring) args=(--mode uring --ring-flags defer) ;;
    uring_nopf) args=(--mode uring --ring-flags defer --no-poll-first) ;;
    uring_coop) args=(--mode uring --ring-flags coop) ;;
    uring_none) args=(--mode uring --ring-flags none) ;;
    uring_ms) args=(--mode uring --ring-flags defer --multishot) ;;
    *) echo "unknown mode $m" >&2; exit 2 ;;
  esac
  "$probe" --listen "${port[$m]}" --upstream "${port[upstream]}" "${args[@]}" &
  PIDS+=($!); pid[$m]=$!
  wait_port "${port[$m]}"
done
targets="nginx $modes"

# $WORK/T: msgs/s cpu_us user_us sys_us p99_us others_cores, a line per round.
probe_round() {  # round target
  local line
  line=$(timeout $((duration + warmup + 30)) "$WS_BIN_DIR/ws_load" --target "127.0.0.1:${port[$2]}" \
    --connections "$connections" --size "$size" --warmup "$warmup" --duration "$duration" \
    --pid "upstream=$echo_pid" --pid "proxy=${pid[$2]}") || { echo "round $1 $2: ws_load failed" >&2; return 1; }
  echo "round $1 $2: $line" >&2
  echo "$(ws_field "$line" msgs_per_s) $(ws_field "$line" proxy_us) $(ws_field "$line" proxy_user_us)" \
    "$(ws_field "$line" proxy_sys_us) $(ws_field "$line" p99_us) $(ws_others "$line")"
}
quiet_rounds "$rounds" "$targets" probe_round "$max_others" "$retries"

echo "\`bench/ws_relay_probe.sh $rounds\` ($(date -u '+%Y-%m-%d %H:%M'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $reruns reruns$([ -n "$noisy_rounds" ] && echo ", still noisy: round$noisy_rounds"))"
echo
echo "| relay | msgs/s | CPU µs/msg (user + sys) | p99 µs | msgs/s ÷ epoll, by round | CPU/msg ÷ epoll, by round |"
echo "|---|---:|---:|---:|---|---|"
for t in $targets; do
  echo "| $t | $(col "$t" 1) | $(col "$t" 2) ($(col "$t" 3) + $(col "$t" 4)) | $(col "$t" 5) | $(round_ratios epoll "$t" 1 higher | sed 's/, better.*//') | $(round_ratios epoll "$t" 2 lower | sed 's/, better.*//') |"
done
echo
echo "Rounds (round target msgs/s cpu_us user_us sys_us p99_us others_cores):"
while read -r r t; do echo "$r $t $(sed -n "${r}p" "$WORK/$t")"; done < "$WORK/rounds"
