#!/usr/bin/env bash
# Memory per idle connection: tollgate versus nginx (and HAProxy for
# HTTP/1.1 and HTTPS), one worker each, in front of the same upstream.
# For each kind of connection and each proxy, a fresh proxy is started and
# bench/idle_clients.py opens N connections through it, makes one exchange
# on each and leaves them idle: the proxy process's RSS growth ÷ N (VmRSS of
# /proc/PID/status; nginx: its worker), read after 2.5 s of idleness (time
# for tollgate's idle sweep to park HTTP/1.1 connections), is the memory
# one idle connection costs. After 3 s of idleness, one more exchange on
# (up to) 1,000 of them is timed ("first") and at once another ("warm"):
# the latency that giving buffers back on idleness may add. Every connection is then used
# once more (all must still be served). Rounds alternate the order of the
# proxies; medians.
#
# Kinds: http1 (keep-alive), https (TLS 1.3), h2c (prior knowledge), h2
# (TLS, ALPN), ws (WebSocket tunnel, one 32-byte message each way).
# For http1 also the floor: bench/idle_floor.cc, a server on Asio's reactor
# holding only a socket, an idle timer and a wait per connection, with
# completion handlers (asio-callback) or one coroutine per connection as
# tollgate has (asio-coroutine); for h2c the same with an nghttp2 session
# per connection (asio-h2): the floor on nghttp2.
# Usage: bench/idle_memory.sh [rounds]
#   (env: IDLE_KINDS="http1 https h2c h2 ws"; IDLE_N_HTTP1=8000,
#    IDLE_N_HTTPS=4000, IDLE_N_H2C=4000, IDLE_N_H2=4000, IDLE_N_WS=4000:
#    connections per kind, bounded by the descriptor limit, which is
#    printed; WS_BIN_DIR=$BUILD_DIR/bench: where ws_echo is)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-3}
kinds=${IDLE_KINDS:-http1 https h2c h2 ws}
WS_BIN_DIR=${WS_BIN_DIR:-$BUILD_DIR/bench}
CLIENT="/usr/bin/python3 $(dirname "$0")/idle_clients.py"
ulimit -n "$(ulimit -Hn)"
nofile=$(ulimit -n)
export NGINX_NOFILE=$((nofile)) NGINX_WORKER_CONNECTIONS=$((nofile - 100))

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
cat "$WORK/cert.pem" "$WORK/key.pem" > "$WORK/combined.pem"

count_of() {  # kind
  case $1 in
    http1) echo "${IDLE_N_HTTP1:-8000}" ;;
    https) echo "${IDLE_N_HTTPS:-4000}" ;;
    h2c) echo "${IDLE_N_H2C:-4000}" ;;
    h2) echo "${IDLE_N_H2:-4000}" ;;
    ws) echo "${IDLE_N_WS:-4000}" ;;
  esac
}

proxies_of() {  # kind
  case $1 in
    http1) echo "tollgate nginx haproxy asio-callback asio-coroutine" ;;
    https) echo "tollgate nginx haproxy" ;;
    h2c) echo "tollgate nginx asio-h2" ;;
    *) echo "tollgate nginx" ;;
  esac
}

# HAProxy 2.6, one thread, keep-alive on both sides, on port $1 in front of
# $2; TLS when $3 is "tls".
start_haproxy() {  # port upstream [tls]
  local port=$1 upstream=$2 bind_extra=""
  if [ "${3:-}" = tls ]; then bind_extra="ssl crt $WORK/combined.pem ssl-min-ver TLSv1.3"; fi
  cat > "$WORK/haproxy-$port.cfg" <<HAPROXY
global
  nbthread 1
  maxconn $((nofile / 2 - 100))
defaults
  mode http
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  timeout http-keep-alive 300s
  option http-keep-alive
frontend edge
  bind 127.0.0.1:$port $bind_extra
  default_backend api
backend api
  http-reuse always
  server upstream 127.0.0.1:$upstream
HAPROXY
  haproxy -db -f "$WORK/haproxy-$port.cfg" 2>/dev/null &
  PIDS+=($!)
  wait_port "$port"
}

# Starts proxy $1 for kind $2 in front of $3 on a free port; sets
# proxy_port and proxy_pid.
start_proxy() {  # proxy kind upstream
  local proxy=$1 kind=$2 upstream=$3 tls=""
  proxy_port=$(free_port)
  case $kind in https | h2) tls=tls ;; esac
  case $proxy in
    tollgate)
      local listener=""
      [ "$tls" = tls ] && listener="tls = { cert = \"$WORK/cert.pem\", key = \"$WORK/key.pem\" }"
      [ "$kind" = h2c ] && listener="http2 = true"
      # Long idle timeouts: the connections must outlive the measurement.
      TOLLGATE_LISTENER="$listener" start_tollgate "$proxy_port" "$upstream" \
        "$(printf '[timeouts]\nclient_idle = "300s"\n')"
      proxy_pid=${PIDS[-1]}
      ;;
    nginx)
      local listen="" server="keepalive_timeout 300s; keepalive_requests 100000;"
      [ "$tls" = tls ] && listen=ssl server+=" ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem; ssl_protocols TLSv1.3;"
      [ "$kind" = h2 ] && listen="ssl http2"
      [ "$kind" = h2c ] && listen=http2
      local location=""
      [ "$kind" = ws ] && location='proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade"; proxy_read_timeout 3600s; proxy_send_timeout 3600s;'
      NGINX_LISTEN="$listen" NGINX_SERVER="$server" start_nginx "$proxy_port" "$upstream" "$location"
      proxy_pid=$(nginx_worker_pid "$proxy_port")
      ;;
    haproxy)
      start_haproxy "$proxy_port" "$upstream" "$tls"
      proxy_pid=${PIDS[-1]}
      ;;
    asio-callback | asio-coroutine | asio-h2)
      # Not a proxy: the floor (bench/idle_floor.cc), a server that answers
      # by itself holding as little per connection as Asio allows.
      "$BUILD_DIR/bench/idle_floor" --listen "127.0.0.1:$proxy_port" --mode "${proxy#asio-}" &
      PIDS+=($!)
      wait_port "$proxy_port"
      proxy_pid=${PIDS[-1]}
      ;;
  esac
}

# Stops every process started since $1 (an index into PIDS).
stop_since() {  # index
  local i
  for ((i = $1; i < ${#PIDS[@]}; i++)); do kill "${PIDS[$i]}" 2>/dev/null || true; done
  for ((i = $1; i < ${#PIDS[@]}; i++)); do wait "${PIDS[$i]}" 2>/dev/null || true; done
  PIDS=("${PIDS[@]:0:$1}")
}

# One measurement: kind $1 through proxy $2; prints idle_clients' line.
measure() {  # kind proxy
  local kind=$1 proxy=$2 mark=${#PIDS[@]} upstream line
  upstream=$(free_port)
  if [ "$kind" = ws ]; then
    "$WS_BIN_DIR/ws_echo" --listen "127.0.0.1:$upstream" &
    PIDS+=($!)
    wait_port "$upstream"
  else
    start_echo "$upstream"
  fi
  start_proxy "$proxy" "$kind" "$upstream"
  local client_kind=$kind
  line=$($CLIENT --kind "$client_kind" --port "$proxy_port" --pid "$proxy_pid" --count "$(count_of "$kind")" \
         --settle 2.5 --idle 3) || {
    stop_since "$mark"; return 1; }
  stop_since "$mark"
  echo "$line"
}

field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

declare -A results
for kind in $kinds; do
  for round in $(seq "$rounds"); do
    order=$(proxies_of "$kind")
    if [ $((round % 2)) -eq 0 ]; then order=$(tr ' ' '\n' <<<"$order" | tac | tr '\n' ' '); fi
    for proxy in $order; do
      line=$(measure "$kind" "$proxy")
      echo "round $round $kind $proxy: $line" >&2
      results[$kind.$proxy]+="$line"$'\n'
    done
  done
done

stat_of() {  # kind proxy field
  printf '%s' "${results[$1.$2]}" | while read -r line; do [ -n "$line" ] && field "$line" "$3"; done | median
}

report=$WORK/report.md
{
  echo "## Memory per idle connection (bench/idle_memory.sh)"
  echo
  echo "\`bench/idle_memory.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d); descriptor limit $nofile; one worker each (tollgate \`threads = 1\`, nginx $(nginx -v 2>&1 | sed 's/.*\///') \`worker_processes 1\`, HAProxy $(haproxy -v 2>/dev/null | awk 'NR == 1 { print $3 }') \`nbthread 1\`); $rounds rounds, medians. Bytes per connection: the proxy process's RSS growth ÷ connections, read once all have been idle 2.5 s (tollgate parks an HTTP/1.1 connection idle for one 1 s sweep interval). First / warm: p99 of one exchange on up to 1,000 connections after 3 s of idleness, then at once again."
  echo
  echo "| kind | connections | proxy | bytes/connection | ÷ nginx | first p99 ms | warm p99 ms | first ÷ warm |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|"
  for kind in $kinds; do
    nginx_bytes=$(stat_of "$kind" nginx bytes_per_connection)
    for proxy in $(proxies_of "$kind"); do
      bytes=$(stat_of "$kind" "$proxy" bytes_per_connection)
      first=$(stat_of "$kind" "$proxy" first_p99_ms)
      warm=$(stat_of "$kind" "$proxy" warm_p99_ms)
      echo "| $kind | $(count_of "$kind") | $proxy | $bytes | $(ratio "$bytes" "$nginx_bytes")× | $first | $warm | $(ratio "$first" "$warm")× |"
    done
  done
} > "$report"
cat "$report"
write_results idle_memory "$report"
