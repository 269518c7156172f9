#!/usr/bin/env bash
# HTTP/2 clients through tollgate versus nginx (`listen ... http2`, proxy_pass
# with upstream keep-alive), one worker each, both in front of the bundled
# echo upstream over HTTP/1.1: h2load -c16 -m32 over cleartext h2c (prior
# knowledge) and over TLS (ALPN h2). h2load reports no percentiles: p50 and
# p99 come from its per-request log (--log-file). Beside them, the CPU time
# each proxy process (nginx: its worker) spent per request over h2load's
# counted window (utime + stime from /proc/PID/stat): h2load, the echo
# upstream and the proxy share the machine's cores, so req/s is partly the
# other two's and moves with whatever else runs; CPU per request is the
# proxy's own cost.
#
# Options:
#   --instructions  also count each proxy's user-space instructions per
#                   request over h2c: one more instance of each under
#                   callgrind, counting during one h2load run of
#                   H2LOAD_CG_REQUESTS (20000) requests (deterministic,
#                   unlike the times; the kernel's share is not in it).
# Usage: bench/http2.sh [rounds] [--instructions]   (env: H2LOAD_SECONDS, default 5)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds_and_instructions http2.sh "$@"
seconds=${H2LOAD_SECONDS:-5}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null

declare -A port url pid
port[upstream]=$(free_port); start_echo "${port[upstream]}"
# nginx closes an HTTP/2 connection after keepalive_requests (1000) streams,
# and h2load does not reconnect: no such cap, as tollgate has none.
unlimited="keepalive_requests 100000000;"
port[nginx_h2c]=$(free_port)
NGINX_LISTEN=http2 NGINX_SERVER=$unlimited start_nginx "${port[nginx_h2c]}" "${port[upstream]}"
pid[nginx_h2c]=$(nginx_worker_pid "${port[nginx_h2c]}")
port[tollgate_h2c]=$(free_port); start_tollgate "${port[tollgate_h2c]}" "${port[upstream]}"
pid[tollgate_h2c]=${PIDS[-1]}
port[nginx_tls]=$(free_port)
NGINX_LISTEN="ssl http2" \
  NGINX_SERVER="$unlimited ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem;" \
  start_nginx "${port[nginx_tls]}" "${port[upstream]}"
pid[nginx_tls]=$(nginx_worker_pid "${port[nginx_tls]}")
port[tollgate_tls]=$(free_port)
TOLLGATE_LISTENER="tls = { cert = \"$WORK/cert.pem\", key = \"$WORK/key.pem\" }" \
  start_tollgate "${port[tollgate_tls]}" "${port[upstream]}"
pid[tollgate_tls]=${PIDS[-1]}
for t in nginx_h2c tollgate_h2c; do url[$t]="http://127.0.0.1:${port[$t]}/api/hello"; done
for t in nginx_tls tollgate_tls; do url[$t]="https://127.0.0.1:${port[$t]}/api/hello"; done

for t in nginx_h2c tollgate_h2c nginx_tls tollgate_tls; do : > "$WORK/$t"; done
for round in $(seq "$rounds"); do
  for pair in "nginx_h2c tollgate_h2c" "nginx_tls tollgate_tls"; do
    order=$pair
    if [ $((round % 2)) -eq 0 ]; then order=$(echo "$pair" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for t in $order; do
      result=$(H2LOAD_PID=${pid[$t]} run_h2load "${url[$t]}")
      echo "round $round $t: $result (req/s p50_ms p99_ms non2xx cpu_us/req user_us sys_us)" >&2
      echo "$result" >> "$WORK/$t"
    done
  done
done

# User-space instructions per request over h2c: another nginx (in one
# process) and tollgate, each under callgrind (lib.sh's h2load_instructions).
declare -A ir
if [ "$instructions" = 1 ]; then
  for t in nginx_h2c tollgate_h2c; do
    port[cg_$t]=$(free_port)
    if [ "$t" = nginx_h2c ]; then
      NGINX_WRAP=$(callgrind_wrap "$t") NGINX_MAIN=" master_process off;" NGINX_LISTEN=http2 NGINX_SERVER=$unlimited \
        start_nginx "${port[cg_$t]}" "${port[upstream]}"
    else
      TOLLGATE_WRAP=$(callgrind_wrap "$t") start_tollgate "${port[cg_$t]}" "${port[upstream]}"
    fi
    result=$(h2load_instructions "$t" "${PIDS[-1]}" "http://127.0.0.1:${port[cg_$t]}/api/hello")
    echo "$t under callgrind: $result (instructions/request requests succeeded)" >&2
    ir[$t]=${result%% *}
  done
fi

report=$WORK/report.md
{
  echo "## HTTP/2 clients: tollgate vs nginx (bench/http2.sh)"
  echo
  echo "\`bench/http2.sh $rounds$([ "$instructions" = 1 ] && echo " --instructions")\` on $(nproc) cores, $(date -u +%Y-%m-%d), h2load -c16 -m32 -t1 for ${seconds} s after 1 s of warm-up, $rounds alternating rounds, medians; p50/p99 from h2load's per-request log."
  echo "nginx $(nginx -v 2>&1 | sed 's/.*\///'): 1 worker, \`listen ... http2\` (and \`ssl\`), \`keepalive_requests\` unbounded (h2load does not reconnect), \`proxy_pass\` + \`keepalive 64\`; tollgate: \`threads = 1\`, HTTP/2 on by default; both with access logs off, in front of \`tollgate echo-upstream\` (1 thread) over HTTP/1.1."
  echo "h2load, upstream and proxy share the $(nproc) cores: req/s depends on all three. *Proxy CPU µs/req* is the proxy process's (nginx: its worker's) utime + stime over h2load's counted window (/proc/PID/stat, read as h2load starts and ends it) divided by the requests h2load completed in it: its own cost, the noise-robust figure."
  echo
  echo "| target | req/s | p50 ms | p99 ms | non-2xx | proxy CPU µs/req (user + sys) |"
  echo "|---|---:|---:|---:|---:|---:|"
  for t in nginx_h2c tollgate_h2c nginx_tls tollgate_tls; do
    echo "| $t | $(col "$t" 1) | $(col "$t" 2) | $(col "$t" 3) | $(col "$t" 4) | $(col "$t" 5) ($(col "$t" 6) + $(col "$t" 7)) |"
  done
  echo
  for kind in h2c tls; do
    echo "**$kind, tollgate ÷ nginx: req/s $(ratio "$(col tollgate_$kind 1)" "$(col nginx_$kind 1)")×, p99 $(ratio "$(col tollgate_$kind 3)" "$(col nginx_$kind 3)")×, proxy CPU per request $(ratio "$(col tollgate_$kind 5)" "$(col nginx_$kind 5)")× (lower is better)** (goal: req/s ≥ 1.1×, p99 ≤ 1.00×); round by round: req/s $(round_ratios nginx_$kind tollgate_$kind 1 higher), p99 $(round_ratios nginx_$kind tollgate_$kind 3 lower), CPU/req $(round_ratios nginx_$kind tollgate_$kind 5 lower)."
    echo
  done
  if [ "$instructions" = 1 ]; then h2load_instructions_report request " over h2c" nginx_h2c tollgate_h2c; fi
} > "$report"
cat "$report"
write_results http2 "$report"
