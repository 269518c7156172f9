#!/usr/bin/env bash
# Deterministic side of bench/tls.sh: what one new TLS connection per
# request (wrk -t1 -c8 -H 'Connection: close', a resumed TLS 1.3 handshake
# each, as in tls.sh's newconn) costs tollgate and nginx in counts rather
# than times, so that a noisy machine cannot hide a difference:
#   strace:       system calls per request, strace -c -f on the proxy
#                 process (nginx: its worker) during a 4 s wrk run after a
#                 2 s warm-up, divided by the requests wrk completed
#   instructions: user-space instructions per request under callgrind
#                 (nginx with master_process off), counted during a
#                 CG_SECONDS (15) wrk run after a 2 s warm-up
# Same servers as tls.sh: one worker each, the same ECDSA P-256 certificate,
# nginx with ssl_protocols TLSv1.2 TLSv1.3 and a shared session cache, both
# in front of the echo upstream.
# TLS_COUNTS_KEEPALIVE=1: the same counts for kept-alive connections (wrk
# without Connection: close), so per request over TLS rather than per
# handshake. TLS_COUNTS_KEEP=DIR: the callgrind profiles are copied there.
# Usage: bench/tls_counts.sh [strace|instructions]   (default: both)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
modes=${1:-strace instructions}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
upstream=$(free_port); start_echo "$upstream"
nginx_server="ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem; ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m;"
tollgate_listener="tls = { cert = \"$WORK/cert.pem\", key = \"$WORK/key.pem\" }"

# Starts server $1 (nginx|tollgate) on port $2; prints the pid to watch.
start() {  # server port
  if [ "$1" = nginx ]; then
    NGINX_LISTEN=ssl NGINX_SERVER="$nginx_server" start_nginx "$2" "$upstream"
    if [ -n "${NGINX_MAIN:-}" ]; then echo "${PIDS[-1]}"; else nginx_worker_pid "$2"; fi
  else
    TOLLGATE_LISTENER="$tollgate_listener" start_tollgate "$2" "$upstream"
    echo "${PIDS[-1]}"
  fi
}
# wrk with a new connection per request (unless TLS_COUNTS_KEEPALIVE=1) to
# port $2 for $1; prints the requests completed.
close_header=(-H 'Connection: close')
[ "${TLS_COUNTS_KEEPALIVE:-0}" = 1 ] && close_header=()
newconn() {  # duration port
  wrk -t1 -c8 -d"$1" "${close_header[@]}" "https://127.0.0.1:$2/api/hello" |
    awk '/ requests in / { print $1 }'
}

for mode in $modes; do
  for t in nginx tollgate; do
    port=$(free_port)
    if [ "$mode" = strace ]; then
      start "$t" "$port" > "$WORK/pid"
      pid=$(tail -1 "$WORK/pid")
      newconn 2s "$port" >/dev/null
      strace -c -f -p "$pid" -o "$WORK/$t.strace" 2>/dev/null &
      tracer=$!
      sleep 0.5  # attached to every thread
      n=$(newconn 4s "$port")
      kill -INT "$tracer"; wait "$tracer" || true
      # strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
      awk -v n="$n" -v t="$t" '
        $NF == "total" || $1 ~ /^-/ || $1 == "%" { next }
        NF >= 5 { s += $4; by = by sprintf(" %s %.2f", $NF, $4 / n) }
        END { printf "%s syscalls: %d requests, %.2f calls/request:%s\n", t, n, s / n, by }
      ' "$WORK/$t.strace"
    else
      if [ "$t" = nginx ]; then
        NGINX_MAIN=" master_process off;" NGINX_WRAP=$(callgrind_wrap nginx) start "$t" "$port" > "$WORK/pid"
      else
        TOLLGATE_WRAP=$(callgrind_wrap tollgate) start "$t" "$port" > "$WORK/pid"
      fi
      pid=$(tail -1 "$WORK/pid")
      newconn 2s "$port" >/dev/null
      callgrind_control -i on "$pid" >/dev/null 2>&1
      n=$(newconn "${CG_SECONDS:-15}s" "$port")
      callgrind_control -i off "$pid" >/dev/null 2>&1
      kill "$pid"
      while read -r stat 2>/dev/null < "/proc/$pid/stat" && [[ $stat != *") Z "* ]]; do sleep 0.1; done
      sleep 1  # callgrind writes its profile
      [ -n "${TLS_COUNTS_KEEP:-}" ] && cp "$WORK/$t".cg* "$TLS_COUNTS_KEEP/"
      echo "$t instructions: $n requests, $(awk -v ir="$(callgrind_total "$t")" -v n="$n" 'BEGIN { printf "%.0f", ir / n }') instructions/request"
    fi
  done
done
