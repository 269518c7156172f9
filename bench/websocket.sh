#!/usr/bin/env bash
# WebSocket tunnels: tollgate versus nginx (1 worker each) in front of the
# same echo server (bench/ws_echo, 1 thread). bench/ws_load (1 thread) opens
# 64 tunnels; each sends a 64-byte binary message, waits for its echo and
# repeats: messages/s and round-trip p50/p99 over 5 s after a 1 s warm-up,
# in alternating rounds, medians. Beside them, the CPU time each proxy
# process spent per message over the same window (utime + stime from
# /proc/PID/stat): load generator, echo server and proxy share the machine's
# cores, so messages/s is partly the other two's; CPU per message is the
# proxy's own cost. The echo server alone ("upstream": ws_load straight to
# ws_echo) shows how far it is from being the bottleneck.
#
# Options:
#   --message-rule  also tollgate with a per-user `per = "message"` rule that
#                   never limits (users named by X-User-Id, one per tunnel);
#                   a build that refuses the key, or does not apply it (a
#                   probe at 1 message per minute), prints "skipped: ...".
#   --syscalls      also count each proxy's system calls per message
#                   (perf stat on the syscall tracepoints of the proxy
#                   process during one more run).
#   --instructions  also count each proxy's user-space instructions per
#                   message: one more instance of each under callgrind,
#                   counting during one ws_load window (deterministic,
#                   unlike the times; the kernel's share is not in it).
# Usage: bench/websocket.sh [rounds] [--message-rule] [--syscalls] [--instructions]
#   (env: WS_CONNECTIONS=64, WS_SIZE=64, WS_DURATION=5, WS_WARMUP=1,
#    WS_MAX_OTHERS=0.25 and WS_RETRIES=3: a round during which other
#    processes used more than that many cores is run again, so many times;
#    WS_BIN_DIR=$BUILD_DIR/bench: where ws_echo and ws_load are)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=5 message_rule=0 syscalls=0 instructions=0
for arg in "$@"; do
  case $arg in
    --message-rule) message_rule=1 ;;
    --syscalls) syscalls=1 ;;
    --instructions) instructions=1 ;;
    [0-9]*) rounds=$arg ;;
    *) echo "usage: bench/websocket.sh [rounds] [--message-rule] [--syscalls] [--instructions]" >&2; exit 2 ;;
  esac
done
WS_BIN_DIR=${WS_BIN_DIR:-$BUILD_DIR/bench}
connections=${WS_CONNECTIONS:-64} size=${WS_SIZE:-64}
duration=${WS_DURATION:-5} warmup=${WS_WARMUP:-1}

# nginx's WebSocket configuration (as its documentation gives it), added to
# lib.sh's proxy location. The empty Connection that start_nginx sets there
# for upstream keep-alive is not sent (nginx drops header fields set to an
# empty value), so the upstream gets `Connection: upgrade`.
NGINX_WEBSOCKET='proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade"; proxy_read_timeout 3600s; proxy_send_timeout 3600s;'

# A per-user message-rate rule that never limits: 1M messages/s per user.
MESSAGE_RULE='[identity]
trusted_proxies = ["127.0.0.1/32"]
user_header = "X-User-Id"
[[rules]]
name = "messages-per-user"
key = "user"
per = "message"
algorithm = "token_bucket"
limit = 1000000
window = "1s"
burst = 1000000'

declare -A port pid
port[upstream]=$(free_port)
"$WS_BIN_DIR/ws_echo" --listen "127.0.0.1:${port[upstream]}" &
PIDS+=($!); echo_pid=$!
wait_port "${port[upstream]}"
port[nginx]=$(free_port); start_nginx "${port[nginx]}" "${port[upstream]}" "$NGINX_WEBSOCKET"
pid[nginx]=$(nginx_worker_pid "${port[nginx]}")
port[tollgate]=$(free_port); start_tollgate "${port[tollgate]}" "${port[upstream]}"
pid[tollgate]=${PIDS[-1]}
targets="upstream nginx tollgate"

message_status="not run (\`--message-rule\`)"
if [ "$message_rule" = 1 ]; then
  # A build without `per` refuses the key, and one that takes it without
  # applying it to tunnels would be measured without the rule: either way
  # the scenario is skipped. The probe: one tunnel through the same rule at
  # 1 message per minute, whose second message must close it with 1008.
  cat > "$WORK/check.toml" <<TOML
[[listeners]]
address = "127.0.0.1:$(free_port)"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:${port[upstream]}"]
[[routes]]
path_prefix = "/"
upstream = "api"
$MESSAGE_RULE
TOML
  if ! "$TOLLGATE" --check-config "$WORK/check.toml" >"$WORK/check.out" 2>&1; then
    message_status="skipped: per=message not supported by this build"
    echo "$message_status ($(grep -m1 -i 'per' "$WORK/check.out" || head -1 "$WORK/check.out"))" >&2
  else
    probe_port=$(free_port)
    start_tollgate "$probe_port" "${port[upstream]}" \
      "$(sed 's/^limit = .*/limit = 1/; s/^burst = .*/burst = 1/; s/^window = .*/window = "60s"/' <<<"$MESSAGE_RULE")"
    probe=$("$WS_BIN_DIR/ws_load" --target "127.0.0.1:$probe_port" --connections 1 --warmup 0.2 \
      --duration 0.5 --user-header X-User-Id || true)
    kill "${PIDS[-1]}"
    if [[ $probe == *"close_codes=1008:1"* ]]; then
      port[tollgate_msg]=$(free_port)
      start_tollgate "${port[tollgate_msg]}" "${port[upstream]}" "$MESSAGE_RULE"
      pid[tollgate_msg]=${PIDS[-1]}
      targets="$targets tollgate_msg"
      message_status=run
    else
      message_status="skipped: per=message is accepted but not applied to tunnels by this build (at 1 message per minute, a tunnel was not closed with 1008: $(grep -o 'close_codes=[^ ]*' <<<"$probe"))"
      echo "$message_status" >&2
    fi
  fi
fi

# One ws_load run against target $1 (port[$1], and pid[$1] when set): prints
# its line. Tunnels to a tollgate with the message rule name their users.
run_ws_load() {  # target [ws_load options...]
  local t=$1; shift
  local pids=(--pid "upstream=$echo_pid")
  if [ -n "${pid[$t]:-}" ]; then pids+=(--pid "proxy=${pid[$t]}"); fi
  local user_header=()
  case $t in *tollgate_msg) user_header=(--user-header X-User-Id) ;; esac
  timeout $((duration + warmup + 30)) "$WS_BIN_DIR/ws_load" --target "127.0.0.1:${port[$t]}" \
    --connections "$connections" --size "$size" --warmup "$warmup" --duration "$duration" \
    "${pids[@]}" "${user_header[@]}" "$@"
}

# Rounds: each target once per round, the order reversed every other round.
# $WORK/T gets a line per round: msgs/s p50_us p99_us proxy_us upstream_us
# self_us proxy_user_us proxy_sys_us proxy_cores upstream_cores closed
# others_cores (the CPU the rest of the machine used meanwhile: noise). A
# round in which other processes used more than WS_MAX_OTHERS cores during
# any target's run is run again, up to WS_RETRIES times (then kept, and
# named in the report).
max_others=${WS_MAX_OTHERS:-0.25} retries=${WS_RETRIES:-3}
ws_round() {  # round target
  local line f
  line=$(run_ws_load "$2") || { echo "round $1 $2: ws_load failed: $line" >&2; return 1; }
  echo "round $1 $2: $line" >&2
  for f in msgs_per_s p50_us p99_us proxy_us upstream_us self_us proxy_user_us proxy_sys_us \
           proxy_cores upstream_cores closed; do
    printf '%s ' "$(ws_field "$line" "$f")"
  done
  ws_others "$line"
}
quiet_rounds "$rounds" "$targets" ws_round "$max_others" "$retries"

# System calls per message of each proxy at (nearly) full speed: perf stat
# counts the syscall tracepoints of the proxy process (every thread) during
# one more ws_load run without warm-up, divided by that run's messages (the
# handshakes and closes of its tunnels are in the counts: ~0.01/msg).
# context-switches: the times the process went to sleep (epoll_wait found
# nothing ready).
SYSCALLS="recvfrom recvmsg read readv sendto sendmsg write writev epoll_wait epoll_pwait epoll_ctl"
declare -A counts perf_rate
if [ "$syscalls" = 1 ]; then
  events="raw_syscalls:sys_enter,context-switches"
  for c in $SYSCALLS; do events+=",syscalls:sys_enter_$c"; done
  for t in $targets; do
    [ "$t" = upstream ] && continue
    perf stat -x, -e "$events" -p "${pid[$t]}" -o "$WORK/$t.perf" &
    counter=$!
    sleep 0.5
    line=$(run_ws_load "$t" --warmup 0)
    kill -INT "$counter"; wait "$counter" || true
    messages=$(ws_field "$line" messages)
    perf_rate[$t]=$(ws_field "$line" msgs_per_s)
    # perf stat -x, rows: count,unit,event,...; "other": every call not named.
    counts[$t]=$(awk -F, -v n="$messages" '
      $3 == "raw_syscalls:sys_enter" { total = $1; next }
      $3 == "context-switches" { switches = $1; next }
      $3 ~ /^syscalls:sys_enter_/ && $1 > 0 {
        sub("syscalls:sys_enter_", "", $3); named += $1; printf "%s %.3f\n", $3, $1 / n
      }
      END { printf "other %.3f\ntotal %.3f\nswitches %.3f\n", (total - named) / n, total / n, switches / n }
    ' "$WORK/$t.perf" | sort -k2 -rn)
    echo "$t under perf stat: $line; $(echo "${counts[$t]}" | tr '\n' ' ')" >&2
  done
fi

# User-space instructions per message of each proxy: another instance of
# each runs under callgrind with counting off (nginx in one process, so
# that valgrind follows its worker); ws_load switches counting on when its
# window opens and off when it closes, and the count is divided by the
# window's messages.
declare -A ir_per_message
if [ "$instructions" = 1 ]; then
  for t in $targets; do
    [ "$t" = upstream ] && continue
    port[cg_$t]=$(free_port)
    if [ "$t" = nginx ]; then
      NGINX_WRAP=$(callgrind_wrap "$t") NGINX_MAIN=" master_process off;" \
        start_nginx "${port[cg_$t]}" "${port[upstream]}" "$NGINX_WEBSOCKET"
    else
      TOLLGATE_WRAP=$(callgrind_wrap "$t") start_tollgate "${port[cg_$t]}" "${port[upstream]}" \
        "$([ "$t" = tollgate_msg ] && echo "$MESSAGE_RULE")"
    fi
    cg_pid=${PIDS[-1]}
    line=$(run_ws_load "cg_$t" --warmup 2 \
      --at-start "callgrind_control -z $cg_pid >/dev/null && callgrind_control -i on $cg_pid >/dev/null" \
      --at-end "callgrind_control -i off $cg_pid >/dev/null && callgrind_control -d $cg_pid >/dev/null")
    sleep 1  # the dump is written
    ir=$(callgrind_total "$t")
    ir_per_message[$t]=$(awk -v ir="$ir" -v n="$(ws_field "$line" messages)" 'BEGIN { printf "%.0f", ir / n }')
    echo "$t under callgrind: $line; ${ir_per_message[$t]} instructions/msg" >&2
  done
fi

med() { col "$1" "$2"; }
report=$WORK/report.md
{
  echo "## WebSocket tunnels: tollgate vs nginx (bench/websocket.sh)"
  echo
  echo "\`bench/websocket.sh $*\` on $(nproc) cores, $(date -u +%Y-%m-%d): \`bench/ws_load\` (Beast client, 1 thread) holds $connections tunnels, each sending a $size-byte binary message (masked) and waiting for its echo, then the next; ${warmup} s warm-up, ${duration} s counted; $rounds alternating rounds, medians."
  echo "nginx $(nginx -v 2>&1 | sed 's/.*\///'): 1 worker, lib.sh's proxy location (\`proxy_http_version 1.1\`, the client's Host and X-Forwarded-For/-Proto/-Host forwarded as tollgate does) with \`proxy_set_header Upgrade \$http_upgrade; proxy_set_header Connection \"upgrade\"; proxy_read_timeout 3600s; proxy_send_timeout 3600s\`; tollgate: \`threads = 1\`, defaults (\`websocket = true\`, metrics on); both with access logs off, in front of \`bench/ws_echo\` (Beast server, 1 thread)."
  echo "Load generator, echo server and proxy share the $(nproc) cores: messages/s depends on all three. *Proxy CPU µs/msg* is the proxy process's utime + stime over the counted window (/proc/PID/stat) divided by the messages: its own cost, the noise-robust figure. *Upstream* is ws_load straight to ws_echo (no proxy)."
  echo
  echo "| target | msgs/s | p50 µs | p99 µs | proxy CPU µs/msg (user + sys) | proxy cores busy | echo CPU µs/msg | echo cores busy | ws_load CPU µs/msg |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for t in $targets; do
    if [ "$t" = upstream ]; then proxy="–"; cores="–"
    else proxy="$(med "$t" 4) ($(med "$t" 7) + $(med "$t" 8))"; cores=$(med "$t" 9); fi
    echo "| $t | $(med "$t" 1) | $(med "$t" 2) | $(med "$t" 3) | $proxy | $cores | $(med "$t" 5) | $(med "$t" 10) | $(med "$t" 6) |"
  done
  echo
  echo "**tollgate ÷ nginx: msgs/s $(ratio "$(med tollgate 1)" "$(med nginx 1)")× (goal ≥ 1.10×), p99 $(ratio "$(med tollgate 3)" "$(med nginx 3)")×, proxy CPU per message $(ratio "$(med tollgate 4)" "$(med nginx 4)")× (lower is better).**"
  echo
  echo "Round by round (the two ran back to back in each round; tollgate ÷ nginx): msgs/s $(round_ratios nginx tollgate 1 higher); p99 $(round_ratios nginx tollgate 3 lower); CPU/msg $(round_ratios nginx tollgate 4 lower)."
  echo
  echo "The rounds, in the order they ran (*others*: CPU the rest of the machine used meanwhile, in cores, from /proc/stat less the three processes; a round where it passed $max_others cores in any run was run again, up to $retries times: $reruns reruns$([ -n "$noisy_rounds" ] && echo "; still noisy, kept: round$noisy_rounds")):"
  echo
  echo "| round | target | msgs/s | p50 µs | p99 µs | proxy CPU µs/msg | echo CPU µs/msg | others, cores |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|"
  while read -r r t; do
    awk -v r="$r" -v t="$t" 'NR == r {
      printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r, t, $1, $2, $3, t == "upstream" ? "–" : $4, $5, $12
    }' "$WORK/$t"
  done < "$WORK/rounds"
  echo
  if [ "$message_status" = run ]; then
    echo "With a per-user \`per = \"message\"\` rule (token_bucket, 1000000/s per user, users from \`X-User-Id\`, one per tunnel; never limits): **tollgate_msg ÷ nginx: msgs/s $(ratio "$(med tollgate_msg 1)" "$(med nginx 1)")× (goal ≥ 1.00×), p99 $(ratio "$(med tollgate_msg 3)" "$(med nginx 3)")×, proxy CPU per message $(ratio "$(med tollgate_msg 4)" "$(med nginx 4)")×**; round by round msgs/s $(round_ratios nginx tollgate_msg 1 higher); against tollgate without the rule: msgs/s $(ratio "$(med tollgate_msg 1)" "$(med tollgate 1)")×, CPU/msg $(ratio "$(med tollgate_msg 4)" "$(med tollgate 4)")×. Tunnels closed during the runs: $(awk '{ s += $11 } END { print s + 0 }' "$WORK/tollgate_msg")."
  else
    echo "With a per-user \`per = \"message\"\` rule (goal ≥ 1.00× nginx's msgs/s): $message_status."
  fi
  if [ "$syscalls" = 1 ]; then
    echo
    echo "System calls per message at full speed (\`--syscalls\`: \`perf stat\` on the syscall tracepoints of the proxy process during one more run without warm-up; a message is one round trip, $size bytes client → proxy → echo and back, so a relay that reads and writes each direction once makes 2 receives and 2 sends; context switches: the times the proxy went to sleep in epoll_wait):"
    echo
    echo "| proxy | msgs/s under perf | syscalls/msg | by call | context switches/msg |"
    echo "|---|---:|---:|---|---:|"
    for t in $targets; do
      [ "$t" = upstream ] && continue
      by_call=$(echo "${counts[$t]}" | awk '$1 != "total" && $1 != "switches" && $2 >= 0.005 { printf "%s%s %s", sep, $1, $2; sep = ", " }')
      total=$(echo "${counts[$t]}" | awk '$1 == "total" { print $2 }')
      switches=$(echo "${counts[$t]}" | awk '$1 == "switches" { print $2 }')
      echo "| $t | ${perf_rate[$t]} | $total | $by_call | $switches |"
    done
  fi
  if [ "$instructions" = 1 ]; then
    echo
    echo "User-space instructions per message (\`--instructions\`: callgrind on another instance of each proxy, counting during one ${duration} s ws_load window after a 2 s warm-up; deterministic, kernel excluded):"
    echo
    echo "| proxy | instructions/msg | ÷ nginx |"
    echo "|---|---:|---:|"
    for t in $targets; do
      [ "$t" = upstream ] && continue
      echo "| $t | ${ir_per_message[$t]} | $(ratio "${ir_per_message[$t]}" "${ir_per_message[nginx]}")× |"
    done
  fi
} > "$report"
cat "$report"
write_results websocket "$report"
