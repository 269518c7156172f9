#!/usr/bin/env bash
# The decision service ([decision]), two measurements:
#
# 1. Envoy RLS: ShouldRateLimit calls per second answered by tollgate with
#    one thread, h2load (-c16 -m32 -t1) POSTing one RateLimitRequest framed
#    as a gRPC message (encoded by protoc from the project's .proto files in
#    gateway/decision/proto: domain "bench", one descriptor with entries
#    remote_address and path), on the local store and on the Redis store
#    (a redis-server on a free port), in alternating rounds, medians. The
#    rule matches that descriptor with a limit no call reaches (token
#    bucket, 1000000/s, burst 1000000), so every answer is OK. Before the
#    rounds one call to each is checked with nghttp: grpc-status 0 and,
#    decoded by protoc, overall_code OK. Beside calls/s, tollgate's CPU
#    time per call over h2load's counted window (/proc/PID/stat): h2load
#    and tollgate (and redis-server) share the cores, so calls/s is partly
#    theirs; CPU per call is tollgate's own cost.
#    Goal: >= 100k calls/s on the local store (envoyproxy/
#    ratelimit reports 9.1 µs of its own work per call, ~110k/s).
#
# 2. The cost of asking a service: nginx (1 worker) with `auth_request` to
#    tollgate's /check (1 thread, the per-IP token bucket that lets every
#    request through, docs/decision-service.md's nginx configuration) versus nginx with
#    `limit_req` alone (the same limit: lib.sh's pass rule of
#    bench/ratelimit.sh), and tollgate proxying with that rule itself, all
#    in front of the same echo upstream, wrk -t1 -c64 in alternating
#    rounds: req/s, p50, p99 and the CPU time per request of the serving
#    processes (nginx's worker, plus tollgate for auth_request).
#
# Options:
#   --instructions  also count tollgate's user-space instructions per
#                   ShouldRateLimit call (local store): one more instance
#                   under callgrind, counting during one h2load run of
#                   H2LOAD_CG_REQUESTS (20000) calls (deterministic).
# Usage: bench/decision.sh [rounds] [--instructions]
#   (env: BUILD_DIR, default build/; H2LOAD_SECONDS, default 5;
#    WRK_DURATION, default 5s)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds_and_instructions decision.sh "$@"
seconds=${H2LOAD_SECONDS:-5}

proto_dir=$BENCH_ROOT/gateway/decision/proto
rls_proto=envoy/service/ratelimit/v3/rls.proto
request_text='domain: "bench" descriptors { entries { key: "remote_address" value: "10.0.0.1" } entries { key: "path" value: "/api/items" } }'

# The serialized RateLimitRequest, framed as one gRPC message.
protoc --encode=envoy.service.ratelimit.v3.RateLimitRequest -I "$proto_dir" "$rls_proto" \
  <<<"$request_text" > "$WORK/request.pb"
size=$(stat -c %s "$WORK/request.pb")
request=$WORK/request.grpc
grpc_frame < "$WORK/request.pb" > "$request"

# The RLS rule: the bench descriptor, keyed on its entries, never reached.
RLS_RULE='[[rules]]
name = "rls"
match = { domain = "bench", descriptor = { remote_address = "*", path = "*" } }
key = "descriptor"
algorithm = "token_bucket"
limit = 1000000
window = "1s"
burst = 1000000'

echo_port=$(free_port); start_echo "$echo_port"
redis_port=$(free_port); start_redis "$redis_port"

# tollgate (lib.sh's start_tollgate, in front of the echo upstream) with a
# [decision] listener on port $1 (more keys of it in $2), then the TOML $3.
# Sets pid[$4] and admin[$4].
declare -A port pid admin url
start_decision() {  # decision_port decision_keys extra name
  local proxy_port
  proxy_port=$(free_port)
  start_tollgate "$proxy_port" "$echo_port" "[decision]
address = \"127.0.0.1:$1\"
$2
$3"
  pid[$4]=${PIDS[-1]}
  admin[$4]=$(awk -F'"' '/^\[admin\]/ { a = 1 } a && /^address/ { split($2, p, ":"); print p[2]; exit }' \
    "$WORK/tollgate-$proxy_port.toml")
  wait_port "$1"
}

for t in rls_local rls_redis; do
  port[$t]=$(free_port)
  url[$t]="http://127.0.0.1:${port[$t]}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
done
start_decision "${port[rls_local]}" "" "$RLS_RULE" rls_local
start_decision "${port[rls_redis]}" "" "$(redis_store_section "$redis_port")
$RLS_RULE" rls_redis

grpc_headers=(-H 'content-type: application/grpc' -H 'te: trailers')

# One call through $1 with nghttp: prints "grpc-status overall_code".
check_call() {
  local status overall
  status=$(nghttp -nv "${grpc_headers[@]}" -d "$request" "$1" 2>&1 |
    awk '/ grpc-status: / { status = $NF } END { print status }')
  nghttp "${grpc_headers[@]}" -d "$request" "$1" > "$WORK/reply.grpc"
  overall=$(tail -c +6 "$WORK/reply.grpc" |
    protoc --decode=envoy.service.ratelimit.v3.RateLimitResponse -I "$proto_dir" "$rls_proto" |
    awk '/^overall_code:/ { print $2 }')
  echo "${status:-none} ${overall:-none}"
}
for t in rls_local rls_redis; do
  answer=$(check_call "${url[$t]}")
  if [ "$answer" != "0 OK" ]; then
    echo "$t: a call ended with grpc-status and overall_code '$answer', not '0 OK':" >&2
    tail -c +6 "$WORK/reply.grpc" |
      protoc --decode=envoy.service.ratelimit.v3.RateLimitResponse -I "$proto_dir" "$rls_proto" >&2 || true
    exit 1
  fi
done
sample_answer=$(tail -c +6 "$WORK/reply.grpc" |
  protoc --decode=envoy.service.ratelimit.v3.RateLimitResponse -I "$proto_dir" "$rls_proto")

# The calls of tollgate $1 that were not allowed (decisions other than
# "allowed" of its rules) and its ShouldRateLimit calls, from /metrics.
decisions() {
  curl -sS "http://127.0.0.1:${admin[$1]}/metrics" | awk '
    /^tollgate_ratelimit_decisions_total/ && !/decision="allowed"/ { other += $NF }
    /^tollgate_decision_requests_total/ && /protocol="rls"/ { calls += $NF }
    END { printf "%d %d\n", other, calls }'
}

for t in rls_local rls_redis; do : > "$WORK/$t"; done
for round in $(seq "$rounds"); do
  order="rls_local rls_redis"
  if [ $((round % 2)) -eq 0 ]; then order="rls_redis rls_local"; fi
  for t in $order; do
    result=$(H2LOAD_PID=${pid[$t]} run_h2load "${url[$t]}" "${grpc_headers[@]}" -d "$request")
    echo "round $round $t: $result (calls/s p50_ms p99_ms non2xx cpu_us/call user_us sys_us)" >&2
    echo "$result" >> "$WORK/$t"
  done
done
declare -A not_allowed calls
for t in rls_local rls_redis; do read -r not_allowed[$t] calls[$t] <<<"$(decisions "$t")"; done

# Redis commands per call: one more run on the Redis store.
# The calls are counted by tollgate (its metric, warm-up included, as
# redis-server's counts are).
redis-cli -p "$redis_port" config resetstat >/dev/null
calls_before=$(decisions rls_redis | awk '{ print $2 }')
run_h2load "${url[rls_redis]}" "${grpc_headers[@]}" -d "$request" >/dev/null
redis_calls=$(( $(decisions rls_redis | awk '{ print $2 }') - calls_before ))
redis_stats=$(redis-cli -p "$redis_port" info commandstats | tr -d '\r')
evalsha=$(sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p' <<<"$redis_stats")
evalsha_usec=$(sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p' <<<"$redis_stats")

# User-space instructions per call (local store) under callgrind.
declare -A ir
if [ "$instructions" = 1 ]; then
  port[cg]=$(free_port)
  TOLLGATE_WRAP=$(callgrind_wrap rls_local) start_decision "${port[cg]}" "" "$RLS_RULE" cg
  result=$(h2load_instructions rls_local "${pid[cg]}" \
    "http://127.0.0.1:${port[cg]}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" \
    "${grpc_headers[@]}" -d "$request")
  echo "tollgate under callgrind: $result (instructions/call calls succeeded)" >&2
  ir[rls_local]=${result%% *}
  ir_calls=$(awk '{ print $2 " calls done, " $3 " succeeded" }' <<<"$result")
fi

# --- 2. nginx auth_request to /check vs nginx limit_req ---

port[check]=$(free_port)
start_decision "${port[check]}" "deny_status = 403" "[identity]
trusted_proxies = [\"127.0.0.1/32\"]
$PASS_ALL_RULE" check
# docs/decision-service.md's nginx configuration for /check (decision_gateway_test's),
# with lib.sh's proxy_pass to the upstream.
NGINX_AUTH_SERVER="location = /.tollgate-check {
      internal;
      proxy_pass http://tollgate_decision/check;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_pass_request_body off;
      proxy_set_header Content-Length \"\";
      proxy_set_header X-Original-Method \$request_method;
      proxy_set_header X-Original-URI \$request_uri;
      proxy_set_header X-Original-Host \$host;
      proxy_set_header X-Real-IP \$remote_addr;
      proxy_set_header X-Forwarded-For \"\";
    }
    location @limited {
      add_header Retry-After \$tollgate_retry_after always;
      add_header RateLimit-Policy \$tollgate_policy always;
      add_header RateLimit \$tollgate_ratelimit always;
      default_type application/json;
      return 429 '{\"error\":\"rate_limited\"}\n';
    }"
NGINX_AUTH_LOCATION="auth_request /.tollgate-check;
      auth_request_set \$tollgate_policy \$upstream_http_ratelimit_policy;
      auth_request_set \$tollgate_ratelimit \$upstream_http_ratelimit;
      auth_request_set \$tollgate_retry_after \$upstream_http_retry_after;
      add_header RateLimit-Policy \$tollgate_policy always;
      add_header RateLimit \$tollgate_ratelimit always;
      error_page 403 = @limited;"
# Keep-alive connections to tollgate: 64, as many as wrk's connections
# (lib.sh's upstream has 64 too), and 16, fewer than the checks in flight, with which nginx
# closes the connections beyond 16 after each check while more are in
# flight, and connects again.
for keepalive in 64 16; do
  t=nginx_auth; if [ "$keepalive" = 16 ]; then t=nginx_auth16; fi
  port[$t]=$(free_port)
  NGINX_SERVER=$NGINX_AUTH_SERVER start_nginx "${port[$t]}" "$echo_port" \
    "$NGINX_AUTH_LOCATION" \
    "upstream tollgate_decision { server 127.0.0.1:${port[check]}; keepalive $keepalive; }"
  pid[$t]=$(nginx_worker_pid "${port[$t]}")
done
port[nginx_limit_req]=$(free_port)
start_nginx "${port[nginx_limit_req]}" "$echo_port" "limit_req zone=ip burst=1000000 nodelay;" \
  "$(nginx_limit_zone 1000000)"
pid[nginx_limit_req]=$(nginx_worker_pid "${port[nginx_limit_req]}")
port[tollgate_proxy]=$(free_port)
start_tollgate "${port[tollgate_proxy]}" "$echo_port" "$PASS_ALL_RULE"
pid[tollgate_proxy]=${PIDS[-1]}

for t in nginx_auth nginx_auth16 nginx_limit_req tollgate_proxy; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${port[$t]}/api/hello")
  if [ "$code" != 200 ]; then echo "$t: GET /api/hello answered $code, not 200" >&2; exit 1; fi
done

# utime + stime (clock ticks) of the processes $@.
cpu_ticks() {
  local p stat total=0
  for p in "$@"; do
    if [ "$p" = 0 ]; then continue; fi
    read -r stat < "/proc/$p/stat"
    stat=${stat##*) }
    total=$((total + $(awk '{ print $12 + $13 }' <<<"$stat")))
  done
  echo "$total"
}
# The process that serves target $1 (nginx: its worker) and the
# decision service it asks (none: 0).
serving_pid() { echo "${pid[$1]}"; }
asked_pid() { case $1 in nginx_auth*) echo "${pid[check]}" ;; *) echo 0 ;; esac; }

# tollgate's /check asked by wrk itself (the headers nginx sets), for the
# service's own cost per check.
cat > "$WORK/check.lua" <<'LUA'
wrk.headers["X-Original-Method"] = "GET"
wrk.headers["X-Original-URI"] = "/api/hello"
wrk.headers["X-Real-IP"] = "127.0.0.1"
LUA
url[check_direct]="http://127.0.0.1:${port[check]}/check"
pid[check_direct]=${pid[check]}
http_targets="nginx_limit_req nginx_auth nginx_auth16 tollgate_proxy check_direct"
declare -A label=([nginx_limit_req]="nginx limit_req" [nginx_auth]="nginx auth_request → tollgate /check, keepalive 64"
                  [nginx_auth16]="nginx auth_request → tollgate /check, keepalive 16"
                  [tollgate_proxy]="tollgate proxy (same rule)"
                  [check_direct]="wrk → tollgate /check (no nginx, no upstream)")
for t in $http_targets; do : > "$WORK/$t"; done
for round in $(seq "$rounds"); do
  order=$http_targets
  if [ $((round % 2)) -eq 0 ]; then order=$(echo "$http_targets" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for t in $order; do
    before=$(cpu_ticks "$(serving_pid "$t")"); asked_before=$(cpu_ticks "$(asked_pid "$t")")
    if [ "$t" = check_direct ]; then
      result=$(run_wrk "${url[$t]}" "$WORK/check.lua")
    else
      result=$(run_wrk "http://127.0.0.1:${port[$t]}/api/hello")
    fi
    after=$(cpu_ticks "$(serving_pid "$t")"); asked_after=$(cpu_ticks "$(asked_pid "$t")")
    cpu=$(awk -v a=$((after - before)) -v b=$((asked_after - asked_before)) -v hz="$(getconf CLK_TCK)" \
      -v n="${result##* }" 'BEGIN { f = 1e6 / hz / n; printf "%.2f %.2f %.2f", (a + b) * f, a * f, b * f }')
    result="$result $cpu"
    echo "round $round $t: $result (req/s p50_ms p99_ms non2xx requests cpu_us/request: all proxy service)" >&2
    echo "$result" >> "$WORK/$t"
  done
done
checks=$(curl -sS "http://127.0.0.1:${admin[check]}/metrics" |
  awk '/^tollgate_decision_requests_total/ && /protocol="http"/ { n += $NF } END { print n + 0 }')

report=$WORK/report.md
{
  echo "## Decision service: Envoy RLS calls/s, nginx auth_request vs limit_req (bench/decision.sh)"
  echo
  echo "\`bench/decision.sh $rounds$([ "$instructions" = 1 ] && echo " --instructions")\` on $(nproc) cores, $(date -u +%Y-%m-%d), load average at its end $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine moves calls/s and req/s much more than the CPU figures)."
  echo
  echo "### ShouldRateLimit over gRPC (HTTP/2 cleartext)"
  echo
  echo "tollgate with \`[server] threads = 1\` and a \`[decision]\` listener; h2load -c16 -m32 -t1 for ${seconds} s after 1 s of warm-up, $rounds alternating rounds, medians; p50/p99 from h2load's per-request log. Each call POSTs one RateLimitRequest (${size} bytes, \`protoc --encode\` of \`$request_text\`) framed as a gRPC message (content-type application/grpc, te: trailers). The rule (\`match = { domain = \"bench\", descriptor = { remote_address = \"*\", path = \"*\" } }\`, \`key = \"descriptor\"\`, token bucket 1000000/s, burst 1000000, RateLimit fields on) allows every call: checked before the rounds with nghttp (grpc-status 0) and \`protoc --decode\` (\`overall_code: OK\`). One hot key: h2load sends the same body every time."
  echo "*CPU µs/call*: tollgate's utime + stime over h2load's counted window (/proc/PID/stat) divided by the calls completed in it: its own cost, which h2load and redis-server on the same $(nproc) cores change little. *1 s ÷ CPU/call*: the calls per second that one thread kept busy on a core of its own would answer at that cost."
  echo
  echo "| store | calls/s | p50 ms | p99 ms | non-2xx | tollgate CPU µs/call (user + sys) | 1 s ÷ CPU/call |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for t in rls_local rls_redis; do
    echo "| ${t#rls_} | $(col "$t" 1) | $(col "$t" 2) | $(col "$t" 3) | $(col "$t" 4) | $(col "$t" 5) ($(col "$t" 6) + $(col "$t" 7)) | $(awk -v c="$(col "$t" 5)" 'BEGIN { printf "%.0f", 1e6 / c }') |"
  done
  echo
  echo "Redis ÷ local, round by round: calls/s $(round_ratios rls_local rls_redis 1 higher); CPU/call $(round_ratios rls_local rls_redis 5 lower)."
  echo "Decisions other than \"allowed\" (tollgate_ratelimit_decisions_total): local ${not_allowed[rls_local]}, Redis ${not_allowed[rls_redis]}, of ${calls[rls_local]} and ${calls[rls_redis]} ShouldRateLimit calls (tollgate_decision_requests_total{protocol=\"rls\"})."
  echo "Redis store (defaults: pool 1, time = server; redis-server on the same cores): one more h2load run: $evalsha EVALSHA for $redis_calls calls = $(ratio "$evalsha" "$redis_calls") per call (redis-server $evalsha_usec µs each, INFO commandstats); concurrent calls on the one hot key share script calls."
  echo
  echo "**Goal ≥ 100000 calls/s on the local store: $(awk -v r="$(col rls_local 1)" 'BEGIN { print (r >= 100000 ? "met" : "not met") }') ($(col rls_local 1) calls/s).** envoyproxy/ratelimit's 9.1 µs of its own work per call (its PR #163) compares with the CPU µs/call column (tollgate's user + kernel time, HTTP/2 and TCP included)."
  echo
  if [ "$instructions" = 1 ]; then
    echo "User-space instructions per ShouldRateLimit call (\`--instructions\`: another tollgate, local store, under callgrind, counting during one h2load -c16 -m32 -t1 run of ${H2LOAD_CG_REQUESTS:-20000} calls after $(( ${H2LOAD_CG_REQUESTS:-20000} / 4 )) to warm up, $ir_calls; deterministic, kernel excluded): **${ir[rls_local]}**."
    echo
  fi
  echo "The answer each call gets (protoc --decode):"
  echo
  echo '```'
  echo "$sample_answer"
  echo '```'
  echo
  echo "### The cost of asking a service: nginx auth_request → tollgate /check vs nginx limit_req"
  echo
  echo "wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s} GET /api/hello, $rounds alternating rounds, medians; all in front of the same echo upstream (\`tollgate echo-upstream\`, 1 thread), nginx $(nginx -v 2>&1 | sed 's/.*\///') with 1 worker and upstream keep-alive, access logs off."
  echo "- *nginx limit_req*: \`limit_req_zone \$binary_remote_addr rate=1000000r/s\` + \`limit_req burst=1000000 nodelay\` (bench/ratelimit.sh's pass scenario);"
  echo "- *nginx auth_request*: docs/decision-service.md's configuration (\`auth_request /.tollgate-check\` with its \`auth_request_set\`/\`add_header\` lines, an internal location that \`proxy_pass\`es to tollgate's /check over HTTP/1.1 keep-alive connections, with X-Original-URI/-Method/-Host and X-Real-IP, X-Forwarded-For emptied; the upstream's \`keepalive\` 64 = wrk's connections, or 16, with which nginx closes the connections beyond 16 after each check while more are in flight and connects anew), tollgate with \`threads = 1\`, \`[decision] deny_status = 403\`, \`[identity] trusted_proxies = [\"127.0.0.1/32\"]\` and the same per-IP limit (token bucket 1000000/s, headers off); $checks checks answered in the run;"
  echo "- *tollgate proxy*: tollgate with that rule proxying itself (no nginx), for reference;"
  echo "- *wrk → tollgate /check*: wrk asking the same tollgate's /check with the headers nginx sends (X-Original-Method, X-Original-URI, X-Real-IP): the service alone."
  echo
  echo "*CPU µs/request*: utime + stime (/proc/PID/stat) of the serving processes over each wrk run, per request completed: the proxy (nginx's worker, or tollgate) and, for auth_request, the tollgate it asks. wrk, the echo upstream and the proxies share the $(nproc) cores."
  echo
  echo "| setup | req/s | p50 ms | p99 ms | non-2xx | CPU µs/request: all (proxy + decision service) | req/s ÷ limit_req | p99 ÷ limit_req |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for t in $http_targets; do
    echo "| ${label[$t]} | $(col "$t" 1) | $(col "$t" 2) | $(col "$t" 3) | $(col "$t" 4) | $(col "$t" 6) ($(col "$t" 7) + $(col "$t" 8)) | $(ratio "$(col "$t" 1)" "$(col nginx_limit_req 1)")× | $(ratio "$(col "$t" 3)" "$(col nginx_limit_req 3)")× |"
  done
  echo
  echo "Asking tollgate instead of limit_req: $(awk -v a="$(col nginx_auth 6)" -v b="$(col nginx_limit_req 6)" 'BEGIN { printf "%+.2f", a - b }') µs of CPU per request with keepalive 64 (nginx's worker $(awk -v a="$(col nginx_auth 7)" -v b="$(col nginx_limit_req 7)" 'BEGIN { printf "%+.2f", a - b }') µs for the subrequest, tollgate $(col nginx_auth 8) µs for the check)."
  echo
  echo "Round by round against nginx limit_req (back to back in each round): auth_request (keepalive 64) req/s $(round_ratios nginx_limit_req nginx_auth 1 higher); p99 $(round_ratios nginx_limit_req nginx_auth 3 lower). keepalive 16 ÷ 64: req/s $(round_ratios nginx_auth nginx_auth16 1 higher)."
  echo
} > "$report"
cat "$report"
write_results decision "$report"
