#!/usr/bin/env bash
# gRPC proxying: tollgate (an upstream with protocol = "h2c") versus nginx
# (`grpc_pass` with upstream keep-alive), one worker each, in front of the
# same gRPC backend, unary calls from h2load (-c16 -m32 -t1) in alternating
# rounds, medians. Each call POSTs one length-prefixed gRPC message
# (content-type application/grpc, te: trailers) and gets one back with
# grpc-status 0 in its trailers.
#
# The backend is nginx too (1 worker, cleartext HTTP/2 with prior
# knowledge): a static 5-byte-payload gRPC message with `add_trailer
# grpc-status 0`, which grpcio's client takes as a successful call. It is
# far faster than a gRPC server (python grpcio manages a few thousand calls
# per second), so the proxies are the bottleneck; the "backend" target
# (h2load straight to it) shows how far.
#
# h2load counts HTTP statuses, and a failed gRPC call is an HTTP 200: every
# target is checked with nghttp for grpc-status 0 before the rounds, and
# tollgate's own count of calls that ended otherwise
# (tollgate_grpc_responses_total) is reported.
#
# Beside calls/s, the CPU time each proxy process (nginx: its worker) spent
# per call over h2load's counted window (utime + stime from /proc/PID/stat):
# h2load, the backend and the proxy share the machine's cores, so calls/s is
# partly the other two's; CPU per call is the proxy's own cost.
#
# Options:
#   --instructions  also count each proxy's user-space instructions per
#                   call: one more instance of each under callgrind,
#                   counting during one h2load run of H2LOAD_CG_REQUESTS
#                   (20000) calls (deterministic, unlike the times; the
#                   kernel's share is not in it).
# Usage: bench/grpc.sh [rounds] [--instructions]
#   (env: H2LOAD_SECONDS, default 5; GRPC_PAYLOAD, the request message's
#    payload in bytes, default 64)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds_and_instructions grpc.sh "$@"
seconds=${H2LOAD_SECONDS:-5}
payload=${GRPC_PAYLOAD:-64}

# One gRPC message of $payload bytes.
request=$WORK/request.grpc
head -c "$payload" /dev/zero | tr '\0' 'x' | grpc_frame > "$request"
mkdir -p "$WORK/www"
printf '\0\0\0\0\5hello' > "$WORK/www/reply"

# nginx with one worker listening on $1 (HTTP/2 cleartext, no cap on the
# streams of a connection: h2load does not reconnect), with the server-level
# directives $2 and the http-level ones $3.
start_nginx_h2c() {  # port server [http]
  local port=$1 server=$2 http_extra=${3:-}
  local dir=$WORK/nginx-$port
  mkdir -p "$dir"
  { nginx_conf_head "$dir"; cat <<NGINX; } > "$dir/nginx.conf"
  $http_extra
  server {
    listen 127.0.0.1:$port reuseport http2;
    keepalive_requests 100000000;
    $server
  }
}
NGINX
  run_nginx "$dir" "$port"
}

# The backend: static files answer GET only, so a POST's 405 is turned into
# the message itself (error_page =200); the trailer goes after the DATA.
# The mirror (a subrequest answered 204) makes it read the whole request
# first: answering before the request's DATA had arrived, it sent frames
# for the stream after the answer, which nginx's gRPC proxy (done with the
# stream) took as an error: "upstream sent frame for unknown stream", 502
# for about 1 call in 2,000.
BACKEND="location = /_mirror { internal; return 204; }
    location / {
      mirror /_mirror;
      mirror_request_body on;
      root $WORK/www;
      types { }
      default_type application/grpc;
      etag off;
      if_modified_since off;
      open_file_cache max=16;
      try_files /reply =500;
      error_page 405 =200 /reply;
      add_trailer grpc-status 0 always;
    }"

declare -A port url pid
port[backend]=$(free_port); start_nginx_h2c "${port[backend]}" "$BACKEND"
# nginx's gRPC proxy takes one upstream connection per call in flight (it
# does not multiplex): keep-alive for as many as h2load has in flight
# (16 x 32), so that it does not connect per call.
NGINX_GRPC_PROXY="location / { grpc_pass grpc://backend; }"
NGINX_GRPC_UPSTREAM="upstream backend { server 127.0.0.1:${port[backend]}; keepalive 512; keepalive_requests 100000000; }"
port[nginx]=$(free_port)
start_nginx_h2c "${port[nginx]}" "$NGINX_GRPC_PROXY" "$NGINX_GRPC_UPSTREAM"
pid[nginx]=$(nginx_worker_pid "${port[nginx]}")
port[tollgate]=$(free_port)
TOLLGATE_UPSTREAM_OPTIONS='protocol = "h2c"' start_tollgate "${port[tollgate]}" "${port[backend]}"
pid[tollgate]=${PIDS[-1]}
tollgate_admin=$(awk -F'"' '/^\[admin\]/ { admin = 1 } admin && /^address/ { split($2, a, ":"); print a[2]; exit }' \
  "$WORK/tollgate-${port[tollgate]}.toml")
targets="backend nginx tollgate"
for t in $targets; do url[$t]="http://127.0.0.1:${port[$t]}/tollgate.bench.Echo/Unary"; done

grpc_headers=(-H 'content-type: application/grpc' -H 'te: trailers')

# The grpc-status that one call through $1 ends with (empty: none).
grpc_status() {
  nghttp -nv "${grpc_headers[@]}" -d "$request" "$1" 2>&1 |
    awk '/ grpc-status: / { status = $NF } END { print status }'
}
for t in $targets; do
  status=$(grpc_status "${url[$t]}")
  if [ "$status" != 0 ]; then
    echo "$t: a call ended with grpc-status '${status}', not 0:" >&2
    nghttp -nv "${grpc_headers[@]}" -d "$request" "${url[$t]}" >&2 || true
    exit 1
  fi
done

# Calls tollgate answered with a gRPC status other than 0 so far.
tollgate_grpc_errors() {
  curl -sS "http://127.0.0.1:$tollgate_admin/metrics" |
    awk '/^tollgate_grpc_responses_total/ && !/grpc_status="0"/ { n += $NF } END { print n + 0 }'
}

for t in $targets; do : > "$WORK/$t"; done
for round in $(seq "$rounds"); do
  order="nginx tollgate"
  if [ $((round % 2)) -eq 0 ]; then order="tollgate nginx"; fi
  # The backend alone once a round, before the pair.
  for t in backend $order; do
    result=$(H2LOAD_PID=${pid[$t]:-} run_h2load "${url[$t]}" "${grpc_headers[@]}" -d "$request")
    echo "round $round $t: $result (calls/s p50_ms p99_ms non2xx [cpu_us/call user_us sys_us])" >&2
    echo "$result" >> "$WORK/$t"
  done
done
errors=$(tollgate_grpc_errors)

# User-space instructions per call: another nginx (in one process) and
# tollgate, each under callgrind (lib.sh's h2load_instructions).
declare -A ir
if [ "$instructions" = 1 ]; then
  for t in nginx tollgate; do
    port[cg_$t]=$(free_port)
    if [ "$t" = nginx ]; then
      NGINX_WRAP=$(callgrind_wrap "$t") NGINX_MAIN=" master_process off;" \
        start_nginx_h2c "${port[cg_$t]}" "$NGINX_GRPC_PROXY" "$NGINX_GRPC_UPSTREAM"
    else
      TOLLGATE_WRAP=$(callgrind_wrap "$t") TOLLGATE_UPSTREAM_OPTIONS='protocol = "h2c"' \
        start_tollgate "${port[cg_$t]}" "${port[backend]}"
    fi
    result=$(h2load_instructions "$t" "${PIDS[-1]}" "http://127.0.0.1:${port[cg_$t]}/tollgate.bench.Echo/Unary" \
      "${grpc_headers[@]}" -d "$request")
    echo "$t under callgrind: $result (instructions/call calls succeeded)" >&2
    ir[$t]=${result%% *}
  done
fi

report=$WORK/report.md
{
  echo "## gRPC proxying: tollgate vs nginx grpc_pass (bench/grpc.sh)"
  echo
  echo "\`bench/grpc.sh $rounds$([ "$instructions" = 1 ] && echo " --instructions")\` on $(nproc) cores, $(date -u +%Y-%m-%d), unary calls of one ${payload}-byte message (answered with a 5-byte one and \`grpc-status: 0\`): h2load -c16 -m32 -t1 for ${seconds} s after 1 s of warm-up, $rounds alternating rounds, medians; p50/p99 from h2load's per-request log."
  echo "nginx $(nginx -v 2>&1 | sed 's/.*\///'): 1 worker, \`listen ... http2\`, \`grpc_pass\` to an upstream with \`keepalive 512\` (its gRPC proxy takes a connection per call in flight); tollgate: \`threads = 1\`, the upstream with \`protocol = \"h2c\"\`; both with access logs off, in front of the same backend: nginx (1 worker) serving a static gRPC message over h2c. \"backend\": h2load straight to it."
  echo "h2load, backend and proxy share the $(nproc) cores: calls/s depends on all three. *Proxy CPU µs/call* is the proxy process's (nginx: its worker's) utime + stime over h2load's counted window (/proc/PID/stat, read as h2load starts and ends it) divided by the calls h2load completed in it: its own cost, the noise-robust figure."
  echo
  echo "| target | calls/s | p50 ms | p99 ms | non-2xx | proxy CPU µs/call (user + sys) |"
  echo "|---|---:|---:|---:|---:|---:|"
  for t in $targets; do
    if [ "$t" = backend ]; then cpu="–"; else cpu="$(col "$t" 5) ($(col "$t" 6) + $(col "$t" 7))"; fi
    echo "| $t | $(col "$t" 1) | $(col "$t" 2) | $(col "$t" 3) | $(col "$t" 4) | $cpu |"
  done
  echo
  echo "**tollgate ÷ nginx: calls/s $(ratio "$(col tollgate 1)" "$(col nginx 1)")×, p99 $(ratio "$(col tollgate 3)" "$(col nginx 3)")×, proxy CPU per call $(ratio "$(col tollgate 5)" "$(col nginx 5)")× (lower is better)**; round by round: calls/s $(round_ratios nginx tollgate 1 higher), p99 $(round_ratios nginx tollgate 3 lower), CPU/call $(round_ratios nginx tollgate 5 lower). Calls tollgate ended with a gRPC status other than 0: $errors."
  echo
  if [ "$instructions" = 1 ]; then h2load_instructions_report call "" nginx tollgate; fi
} > "$report"
cat "$report"
write_results grpc "$report"
