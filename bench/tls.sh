#!/usr/bin/env bash
# TLS at the edge, tollgate versus nginx (`listen ... ssl`, proxy_pass with
# upstream keep-alive), one worker each, the same ECDSA P-256 certificate,
# both in front of the bundled echo upstream over HTTP/1.1:
#   newconn:   a new TLS connection per request (wrk -H 'Connection: close');
#              wrk offers each connection's session on its next one, so
#              these are resumed handshakes as long as the server renews
#              TLS 1.3 tickets (both do)
#   full:      openssl s_time -new, STIME_CLIENTS (4) processes at once: a
#              full handshake (no session offered) and one request per
#              connection
#   resumed:   openssl s_time -reuse, likewise: one full handshake, then a
#              resumed one (TLS 1.3 tickets) and one request per connection
#   resumed_load: bench/tls_resume_load, one event-driven thread with
#              WRK_CONNECTIONS (64) connections, each a TLS 1.3 handshake
#              resuming its newest ticket and one request (Connection:
#              close): resumed handshakes from a client as light as wrk
#              (s_time's blocking processes spend more CPU per connection
#              than the server, on the same cores)
#   keepalive: wrk -c64 over kept-alive HTTPS connections
#   full12, resumed12: full and resumed with s_time -tls1_2 (TLS 1.2's
#              abbreviated handshake resumes without a key exchange)
#   resumed12_load: resumed_load with TLS 1.2
# Beside the rates, the CPU time each proxy process (nginx: its worker)
# spent per request (utime + stime from /proc/PID/stat around the run): the
# clients, the upstream and the proxy share the machine's cores, so rates
# are partly the others'; CPU per request is the proxy's own cost.
# Usage: bench/tls.sh [rounds]   (env: WRK_DURATION, default 5s; STIME_CLIENTS;
#   TLS_MODES: the modes to run, default all, in the order above)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export LC_NUMERIC=C  # `times` prints seconds with the locale's decimal point
rounds=${1:-5}
clients=${STIME_CLIENTS:-4}
seconds=${WRK_DURATION:-5s}
seconds=${seconds%s}
load=$(cut -d' ' -f1-3 /proc/loadavg)  # other work on the machine skews the rates

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null

declare -A port pid
port[upstream]=$(free_port); start_echo "${port[upstream]}"
# nginx as a TLS edge is usually given a session cache next to its (default)
# tickets; tollgate has both built in. nginx before 1.23.4 offers no TLS
# 1.3 unless told: it would then resume with TLS 1.2's abbreviated
# handshake (no key exchange at all) against tollgate's TLS 1.3
# resumption (an ECDHE each), not the same work.
port[nginx]=$(free_port)
NGINX_LISTEN=ssl \
  NGINX_SERVER="ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem; ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m;" \
  start_nginx "${port[nginx]}" "${port[upstream]}"
pid[nginx]=$(nginx_worker_pid "${port[nginx]}")
port[tollgate]=$(free_port)
TOLLGATE_LISTENER="tls = { cert = \"$WORK/cert.pem\", key = \"$WORK/key.pem\" }" \
  start_tollgate "${port[tollgate]}" "${port[upstream]}"
pid[tollgate]=${PIDS[-1]}

# "utime stime" of process $1, in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12, $13 }' "/proc/$1/stat"; }

# The command $2... (printing "rate requests [more]") run against proxy
# $1; prints its output with CPU µs per request appended: the clients'
# (user + system), then the proxy's user, system, and their sum last.
measured() {  # proxy command...
  local proxy=$1 before out
  shift
  before=$(cpu_ticks "${pid[$proxy]}")
  # `times` in the same subshell: the CPU of the clients it ran and reaped.
  # A client that failed fails the run (its figures would count failures).
  out=$("$@"; rc=$?; times; exit $rc) || return 1
  awk -v hz="$(getconf CLK_TCK)" -v before="$before" -v after="$(cpu_ticks "${pid[$proxy]}")" '
    function s(v) { split(v, p, "m"); return p[1] * 60 + p[2] }
    NR == 1 { result = $0; n = $2 }
    NR == 3 { clients = (s($1) + s($2)) * 1e6 / n }  # times: the shell, then its children
    END { split(before, b, " "); split(after, a, " "); f = 1e6 / hz / n
      printf "%s %.1f %.1f %.1f %.1f\n", result, clients, (a[1] - b[1]) * f, (a[2] - b[2]) * f, (a[1] - b[1] + a[2] - b[2]) * f }' <<<"$out"
}

# wrk over HTTPS to port $1, more wrk arguments after it. Prints
# "req_per_s requests p99_ms".
https_wrk() {  # port [wrk arguments]
  local target=$1 out
  shift
  out=$(wrk -t1 -c"${WRK_CONNECTIONS:-64}" -d"${seconds}s" --latency "$@" \
        "https://127.0.0.1:$target/api/hello")
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec/ { rps = $2 }
    /^ +99%/ { p99 = ms($2) }
    / requests in / { total = $1 }
    END { printf "%.0f %d %.3f\n", rps, total, p99 }
  ' <<<"$out"
}
newconn() { https_wrk "$1" -H "Connection: close"; }
keepalive() { https_wrk "$1"; }
full() { s_time "$1" -new; }
resumed() { s_time "$1" -reuse; }
resumed_load() {
  # No warm-up: the CPU figures span the whole command, as wrk's; the slots'
  # first (full) handshakes show in the resumed share.
  "$BUILD_DIR/bench/tls_resume_load" 127.0.0.1 "$1" "${WRK_CONNECTIONS:-64}" "$seconds" 0 "${@:2}"
}
resumed12_load() { resumed_load "$1" /api/hello tls1_2; }
full12() { s_time "$1" -new -tls1_2; }
resumed12() { s_time "$1" -reuse -tls1_2; }

# $clients openssl s_time at once for $seconds (-new or -reuse, and more
# s_time options, after the port); connections per second of wall time
# (s_time reports whole seconds only). Prints "conn_per_s connections
# resumed_share".
s_time() {  # port -new|-reuse [s_time options]
  local target=$1 i start end
  shift
  start=$(date +%s%N)
  for i in $(seq "$clients"); do
    openssl s_time -connect "127.0.0.1:$target" -www /api/hello "$@" -time "$seconds" \
      > "$WORK/s_time.$i" 2>&1 &
  done
  wait
  end=$(date +%s%N)
  # s_time prints 'r' for a resumed connection and '*' for a full one.
  cat "$WORK"/s_time.* | awk -v ns="$((end - start))" '
    / connections in .* real seconds/ { n += $1 }
    /^[r*]+$/ { r += gsub(/r/, ""); f += gsub(/\*/, "") }
    END { printf "%.0f %d %.3f\n", n * 1e9 / ns, n, r + f ? r / (r + f) : 0 }'
}

# What each side negotiates with a default client ("TLSv1.3, Cipher is ...").
for t in nginx tollgate; do
  declare "protocol_$t=$(openssl s_client -connect "127.0.0.1:${port[$t]}" </dev/null 2>/dev/null |
    sed -n 's/^New, \(.*\)$/\1/p' | head -1)"
  declare "protocol12_$t=$(openssl s_client -connect "127.0.0.1:${port[$t]}" -tls1_2 </dev/null 2>/dev/null |
    sed -n 's/^New, \(.*\)$/\1/p' | head -1)"
done

modes=${TLS_MODES:-"newconn full resumed resumed_load keepalive full12 resumed12 resumed12_load"}
for m in $modes; do for t in nginx tollgate; do : > "$WORK/${m}_$t"; done; done
for round in $(seq "$rounds"); do
  for m in $modes; do
    order="nginx tollgate"
    if [ $((round % 2)) -eq 0 ]; then order="tollgate nginx"; fi
    for t in $order; do
      result=$(measured "$t" "$m" "${port[$t]}") || { echo "$m against $t failed" >&2; exit 1; }
      echo "round $round $m $t: $result" >&2
      echo "$result" >> "$WORK/${m}_$t"
    done
  done
done

# The last columns of each result: CPU µs per request, user + system.
last() { awk '{ print $NF }' "$WORK/$1" | median; }
client_cpu() { awk '{ print $(NF - 3) }' "$WORK/$1" | median; }
split_cpu() { echo "$(awk '{ print $(NF - 2) }' "$WORK/$1" | median) + $(awk '{ print $(NF - 1) }' "$WORK/$1" | median)"; }
admin_port=$(awk -F'"' '/^\[admin\]/ { getline; split($2, a, ":"); print a[2] }' \
  "$WORK/tollgate-${port[tollgate]}.toml")
handshakes=$(curl -s "127.0.0.1:$admin_port/metrics" | awk '/^tollgate_tls_handshakes_total/ {
  sub(/.*result="/, ""); sub(/"}/, ""); printf "%s%s", sep, $0; sep = ", " }')

report=$WORK/report.md
{
  echo "## TLS handshakes: tollgate vs nginx (bench/tls.sh)"
  echo
  echo "\`bench/tls.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), $rounds alternating rounds of ${seconds} s per mode, medians; the same ECDSA P-256 certificate, negotiated with openssl s_client: nginx $protocol_nginx, tollgate $protocol_tollgate."
  echo "nginx $(nginx -v 2>&1 | sed 's/.*\///'): 1 worker, \`listen ... ssl\`, \`ssl_protocols TLSv1.2 TLSv1.3\` (1.22 offers TLS 1.2 at most by default), \`ssl_session_cache shared:SSL:10m\` and its default tickets, \`proxy_pass\` + \`keepalive 64\`; tollgate: \`threads = 1\`; both with access logs off, in front of \`tollgate echo-upstream\` (1 thread)."
  echo "*newconn*: wrk -t1 -c${WRK_CONNECTIONS:-64} -H 'Connection: close', a new TLS connection per request (wrk offers each connection's session on the next, so mostly resumed handshakes); *full*: $clients × \`openssl s_time -new\` at once (a full handshake and one request per connection; rate over wall time); *resumed*: $clients × \`openssl s_time -reuse\` (a resumed handshake and one request per connection); *resumed_load*: \`bench/tls_resume_load\`, one event-driven thread holding ${WRK_CONNECTIONS:-64} connections, each a TLS 1.3 handshake resuming its newest ticket and one request with \`Connection: close\` (a client as light as wrk that counts its resumptions); *keepalive*: wrk -t1 -c${WRK_CONNECTIONS:-64}; *full12*, *resumed12*, *resumed12_load*: as *full*, *resumed* and *resumed_load* with TLS 1.2 (\`-tls1_2\`) (nginx: $protocol12_nginx; tollgate: $protocol12_tollgate; a TLS 1.2 resumption has no key exchange). Clients, upstream and proxy share the $(nproc) cores (load average $load before the run); *CPU µs/req* is the proxy process's (nginx: its worker's) utime + stime over the run divided by the requests done: its own cost; *clients' CPU* is the load generators' (wrk, the s_time processes, tls_resume_load) over the same run: where s_time's exceeds the proxy's, the rate is largely the clients'."
  echo
  echo "| mode | nginx req/s | tollgate req/s | ÷ nginx | round by round | nginx CPU µs/req (user + sys) | tollgate CPU µs/req (user + sys) | ÷ nginx | clients' CPU µs/req (nginx, tollgate) | goal |"
  echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---|"
  for m in $modes; do
    case $m in keepalive | full*) goal="≥ 1.0×" ;; *) goal="≥ 1.1×" ;; esac
    echo "| $m | $(col "${m}_nginx" 1) | $(col "${m}_tollgate" 1) | $(ratio "$(col "${m}_tollgate" 1)" "$(col "${m}_nginx" 1)")× | $(round_ratios "${m}_nginx" "${m}_tollgate" 1 higher) | $(last "${m}_nginx") ($(split_cpu "${m}_nginx")) | $(last "${m}_tollgate") ($(split_cpu "${m}_tollgate")) | $(ratio "$(last "${m}_tollgate")" "$(last "${m}_nginx")")× | $(client_cpu "${m}_nginx"), $(client_cpu "${m}_tollgate") | $goal |"
  done
  echo
  notes=()
  for m in newconn keepalive; do
    [[ " $modes " == *" $m "* ]] && notes+=("$m: nginx $(col "${m}_nginx" 3) ms, tollgate $(col "${m}_tollgate" 3) ms")
  done
  shares=()
  for m in full resumed resumed_load full12 resumed12 resumed12_load; do
    [[ " $modes " == *" $m "* ]] && shares+=("$m nginx $(col "${m}_nginx" 3), tollgate $(col "${m}_tollgate" 3)")
  done
  echo "p99 (wrk) $(IFS=';'; echo "${notes[*]:-none}" | sed 's/;/; /g'). Resumed share of the connections (s_time's 'r' marks; tls_resume_load's SSL_session_reused): $(IFS=';'; echo "${shares[*]:-none}" | sed 's/;/; /g'). tollgate's tollgate_tls_handshakes_total after all rounds: $handshakes (newconn and resumed* resume; full*, and each client's first connection, do not)."
} > "$report"
cat "$report"
# A run of some modes only is a probe, not the section's table.
if [ -z "${TLS_MODES:-}" ]; then write_results tls "$report"; fi
