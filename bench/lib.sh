# Shared helpers for the benchmark scripts (sourced, not run).
# Anchors (nginx) and tollgate run on loopback, one worker each, with the
# same wrk settings, in alternating rounds; medians are reported.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$BENCH_ROOT/build}
TOLLGATE=$BUILD_DIR/tollgate
WORK=$(mktemp -d /tmp/tollgate-bench.XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# A free loopback port.
free_port() {
  local port
  while :; do
    # Below the ephemeral range (32768+), where outgoing connections take ports.
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
}

wait_port() {  # up to 20 s (a server under valgrind starts slowly)
  for _ in $(seq 400); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "port $1 did not open" >&2
  return 1
}

start_echo() {  # port
  "$TOLLGATE" echo-upstream --listen "127.0.0.1:$1" --threads 1 2>/dev/null &
  PIDS+=($!)
  wait_port "$1"
}

# nginx with one worker in front of 127.0.0.1:$2, listening on $1; the rest of
# the server block in $3 and http-level directives in $4. It forwards what
# tollgate forwards (the client's Host, X-Forwarded-For, -Proto and -Host, as
# the usual reverse-proxy configuration does), so that both send the
# upstream, which shares the machine, the same request.
start_nginx() {
  local port=$1 upstream=$2 location_extra=${3:-} http_extra=${4:-}
  local dir=$WORK/nginx-$port
  mkdir -p "$dir"
  { nginx_conf_head "$dir"; cat <<NGINX; } > "$dir/nginx.conf"
  $http_extra
  upstream api { server 127.0.0.1:$upstream; keepalive 64; }
  server {
    listen 127.0.0.1:$port reuseport ${NGINX_LISTEN:-};
    ${NGINX_SERVER:-}
    location / {
      $location_extra
      proxy_pass http://api;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$http_host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Forwarded-Host \$http_host;
      proxy_set_header X-Real-IP \$remote_addr;
    }
  }
}
NGINX
  # NGINX_LISTEN: more parameters of listen (http2, ssl); NGINX_SERVER: more
  # server-level directives (certificates).
  run_nginx "$dir" "$port"
}

# The directives every nginx here shares (one worker, no access log, its
# files under $1), up to the open `http {` block.
nginx_conf_head() {  # dir
  cat <<NGINX
user root;
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log crit;
worker_rlimit_nofile ${NGINX_NOFILE:-8192};
events { worker_connections ${NGINX_WORKER_CONNECTIONS:-4096}; }
http {
  access_log off;
  client_body_temp_path $1/body;
  proxy_temp_path $1/proxy;
  fastcgi_temp_path $1/fastcgi;
  uwsgi_temp_path $1/uwsgi;
  scgi_temp_path $1/scgi;
NGINX
}

# nginx on the configuration $1/nginx.conf, once it listens on port $2.
# NGINX_WRAP: a command to run it under; NGINX_MAIN: more main-context
# directives.
run_nginx() {  # dir port
  ${NGINX_WRAP:-} nginx -p "$1" -c "$1/nginx.conf" -g "daemon off;${NGINX_MAIN:-}" 2>/dev/null &
  PIDS+=($!)
  wait_port "$2"
}

# tollgate with one thread on $1 in front of $2; extra TOML in $3.
start_tollgate() {
  local port=$1 upstream=$2 extra=${3:-}
  local admin
  admin=$(free_port)
  cat > "$WORK/tollgate-$port.toml" <<TOML
[server]
threads = 1
[[listeners]]
address = "127.0.0.1:$port"
${TOLLGATE_LISTENER:-}
[admin]
address = "127.0.0.1:$admin"
metrics = ${TOLLGATE_METRICS:-true}
${TOLLGATE_ADMIN_OPTIONS:-}
[log]
access = "off"
level = "${TOLLGATE_LOG_LEVEL:-warn}"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:$upstream"]
${TOLLGATE_UPSTREAM_OPTIONS:-}
[[routes]]
path_prefix = "/"
upstream = "api"
$extra
TOML
  # TOLLGATE_WRAP: a command to run tollgate under; TOLLGATE_LISTENER: more
  # keys of its listener (tls); TOLLGATE_ADMIN_OPTIONS: more keys of [admin]
  # (token_env).
  ${TOLLGATE_WRAP:-} "$TOLLGATE" --config "$WORK/tollgate-$port.toml" 2>"$WORK/tollgate-$port.err" &
  PIDS+=($!)
  wait_port "$port"
}

# A token_bucket rule "per-key" of $1 per second, burst $2, keyed by $3
# ("ip" unless given), without rate-limit headers; and nginx's http-level
# directives for a per-IP limit_req zone of $1 per second answering 429:
# the two sides of bench/ratelimit.sh and bench/instructions.sh.
token_bucket_rule() {  # limit burst [key]
  cat <<TOML
[[rules]]
name = "per-key"
key = "${3:-ip}"
algorithm = "token_bucket"
limit = $1
window = "1s"
burst = $2
headers = "none"
TOML
}
nginx_limit_zone() {  # rate
  echo "limit_req_zone \$binary_remote_addr zone=ip:10m rate=$1r/s; limit_req_status 429; limit_req_log_level warn;"
}

# A per-IP token bucket that lets everything through (headers off): the
# cost of a rate-limit decision on every request, without any 429.
PASS_ALL_RULE='[[rules]]
name = "per-ip"
key = "ip"
algorithm = "token_bucket"
limit = 1000000
window = "1s"
headers = "none"'

# The [store] section of a tollgate on the redis-server on port $1.
redis_store_section() {  # port
  printf '[store]\nkind = "redis"\n[store.redis]\nurl = "redis://127.0.0.1:%s"\n' "$1"
}

# A throwaway redis-server on $1 (no persistence).
start_redis() {
  redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
  PIDS+=($!)
  wait_port "$1"
}

# Standard input framed as one gRPC length-prefixed message on standard
# output: not compressed, a 4-byte big-endian length, the bytes (the body of
# a unary call, for h2load -d and nghttp -d).
grpc_frame() {
  local message size
  message=$(mktemp "$WORK/grpc-message.XXXXXX")
  cat > "$message"
  size=$(stat -c %s "$message")
  printf '\0'
  printf "\\$(printf %03o $(((size >> 24) & 255)))\\$(printf %03o $(((size >> 16) & 255)))"
  printf "\\$(printf %03o $(((size >> 8) & 255)))\\$(printf %03o $((size & 255)))"
  cat "$message"
  rm -f "$message"
}

# h2load -c16 -m32 -t1 against $1 (more h2load arguments after it) for
# H2LOAD_SECONDS (5) after a 1 s warm-up; prints "req_per_s p50_ms p99_ms
# non2xx", and with H2LOAD_PID set, "cpu_us user_us sys_us" after them: the
# CPU time that process spent per request completed in the counted window
# (see h2load_window). h2load reports no percentiles: p50 and p99 come from
# its per-request log (--log-file), emptied first (h2load appends to it).
run_h2load() {  # url [h2load arguments]
  local url=$1 log=$WORK/h2load.log out rps non2xx cpu=""
  shift
  : > "$log"
  out=$(h2load -c16 -m32 -t1 --warm-up-time=1 -D "${H2LOAD_SECONDS:-5}" --log-file="$log" "$@" "$url" |
        h2load_window "${H2LOAD_PID:-}")
  rps=$(awk '/^finished in/ { print $4 }' <<<"$out")
  non2xx=$(awk '/^status codes:/ { print $5 + $7 + $9 }' <<<"$out")
  if [ -n "${H2LOAD_PID:-}" ]; then
    # "requests: N total, N started, N done, ...": per request done in the window.
    cpu=$(awk -v hz="$(getconf CLK_TCK)" '
      /^requests:/ { done = $6 }
      /^window / { u[$2] = $3; s[$2] = $4 }
      END {
        if (!("start" in u) || !("end" in u) || !done) { print "h2load: no counted window" > "/dev/stderr"; exit 1 }
        f = 1e6 / hz / done
        printf "%.2f %.2f %.2f", (u["end"] - u["start"] + s["end"] - s["start"]) * f, (u["end"] - u["start"]) * f, (s["end"] - s["start"]) * f
      }' <<<"$out")
  fi
  # The log: start time, status, latency in microseconds, one request a line.
  awk '{ print $3 }' "$log" | sort -n | awk -v rps="$rps" -v non2xx="$non2xx" -v cpu="$cpu" '
    { a[NR] = $1 }
    END { printf "%.0f %.3f %.3f %d%s\n", rps, a[int(NR * 0.5)] / 1000, a[int(NR * 0.99)] / 1000, non2xx, cpu == "" ? "" : " " cpu }'
}

# Copies h2load's output (-t1) and, with a pid in $1, adds lines "window
# start|end UTIME STIME": that process's CPU time (clock ticks, from
# /proc/PID/stat) when h2load says its counted window starts (after the
# warm-up) and ends. h2load flushes those lines as it enters each phase; they
# are read here without starting a process, so the reading follows within
# a millisecond or so (the ticks are 10 ms).
h2load_window() {  # [pid]
  local line stat start="" end=""
  while IFS= read -r line; do
    if [ -n "$1" ]; then
      case $line in
        "Main benchmark duration is started"*) read -r stat < "/proc/$1/stat"; start=${stat##*) } ;;
        "Main benchmark duration is over"*) read -r stat < "/proc/$1/stat"; end=${stat##*) } ;;
      esac
    fi
    printf '%s\n' "$line"
  done
  # After the name: state is field 3 of the line; utime and stime are 14 and 15.
  if [ -n "$start" ]; then awk '{ print "window start", $12, $13 }' <<<"$start"; fi
  if [ -n "$end" ]; then awk '{ print "window end", $12, $13 }' <<<"$end"; fi
}

# The pid of the worker of the nginx started on port $1 (one worker, its
# master's pid in $WORK/nginx-$1/nginx.pid): the process that serves, whose
# CPU time is nginx's cost. The master forks it after opening the port.
nginx_worker_pid() {  # port
  local master worker
  for _ in $(seq 200); do
    master=$(cat "$WORK/nginx-$1/nginx.pid" 2>/dev/null || true)
    if [ -n "$master" ] && worker=$(pgrep -P "$master"); then echo "$worker"; return 0; fi
    sleep 0.05
  done
  echo "no worker of the nginx on port $1" >&2
  return 1
}

# valgrind's callgrind, counting off until `callgrind_control -i on`, its
# profile in $WORK/$1.cg: the command to run a server under (TOLLGATE_WRAP,
# NGINX_WRAP; nginx with NGINX_MAIN=" master_process off;", in one process,
# so that valgrind follows its worker). callgrind_total: the instructions
# counted in the profiles of $1 written so far.
callgrind_wrap() { echo "valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$WORK/$1.cg"; }
callgrind_total() { cat "$WORK/$1".cg* | awk '/^totals:/ { s += $2 } END { print s + 0 }'; }

# User-space instructions per request of the server $2 (a pid) started
# under $(callgrind_wrap $1), through URL $3 (more h2load arguments after
# it): h2load -c16 -m32 -t1 sends H2LOAD_CG_REQUESTS (20000) requests after
# a quarter as many to warm up, counting on during those only (the 16
# connections' set-up is in it: little beside that many requests); the
# server is then stopped, so that callgrind writes its profile. Prints
# "instructions_per_request requests_done requests_succeeded".
h2load_instructions() {  # name pid url [h2load arguments]
  local name=$1 pid=$2 url=$3 n=${H2LOAD_CG_REQUESTS:-20000} out stat
  shift 3
  h2load -c16 -m32 -t1 -n "$((n / 4))" "$@" "$url" >/dev/null
  callgrind_control -i on "$pid" >/dev/null 2>&1
  out=$(h2load -c16 -m32 -t1 -n "$n" "$@" "$url")
  callgrind_control -i off "$pid" >/dev/null 2>&1
  kill "$pid"
  # Gone, or a zombie (when this runs in a subshell, its parent reaps it).
  while read -r stat 2>/dev/null < "/proc/$pid/stat" && [[ $stat != *") Z "* ]]; do sleep 0.1; done
  awk -v ir="$(callgrind_total "$name")" '
    /^requests:/ { printf "%.0f %d %d\n", ir / $6, $6, $8 }' <<<"$out"
}

# The arguments "[rounds] [--instructions]" of bench/$1 (http2.sh,
# grpc.sh): sets rounds (5 unless given) and instructions (1 with the
# option, else 0); anything else: the usage, and exit.
rounds_and_instructions() {  # script "$@"
  local script=$1 arg
  shift
  rounds=5 instructions=0
  for arg in "$@"; do
    case $arg in
      --instructions) instructions=1 ;;
      [0-9]*) rounds=$arg ;;
      *) echo "usage: bench/$script [rounds] [--instructions]" >&2; exit 2 ;;
    esac
  done
}

# The --instructions paragraph and table of bench/http2.sh and grpc.sh:
# instructions per $1 (request, call) from h2load_instructions, $2 after
# that word in the heading (" over h2c"), for the targets $3... (the first:
# the nginx the ratios are to), from the caller's associative array ir.
h2load_instructions_report() {  # unit qualifier target...
  local unit=$1 qualifier=$2 n=${H2LOAD_CG_REQUESTS:-20000} t
  shift 2
  echo "User-space instructions per $unit$qualifier (\`--instructions\`: callgrind on another instance of each proxy, nginx in one process, counting during one h2load -c16 -m32 -t1 run of $n ${unit}s after $((n / 4)) to warm up; deterministic, kernel excluded):"
  echo
  echo "| proxy | instructions/$unit | ÷ nginx |"
  echo "|---|---:|---:|"
  for t in "$@"; do echo "| $t | ${ir[$t]} | $(ratio "${ir[$t]}" "${ir[$1]}")× |"; done
  echo
}

# wrk against URL; prints "req_per_s p50_ms p99_ms non2xx requests".
run_wrk() {  # url [wrk Lua script]
  local url=$1 script=${2:-}
  local out
  out=$(wrk -t"${WRK_THREADS:-1}" -c"${WRK_CONNECTIONS:-64}" -d"${WRK_DURATION:-5s}" \
        ${script:+-s "$script"} --latency "$url")
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec/ { rps = $2 }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /Non-2xx or 3xx responses/ { non2xx = $5 }
    / requests in / { total = $1 }
    END { printf "%.0f %.3f %.3f %d %d\n", rps, p50, p99, non2xx + 0, total }
  ' <<<"$out"
}

# utime + stime of process $1, in clock ticks (/proc/PID/stat).
cpu_ticks() { local stat; read -r stat < "/proc/$1/stat"; awk '{ print $12 + $13 }' <<<"${stat##*) }"; }

# wrk against http://127.0.0.1:${port[T]}${BENCH_PATH:-/api/hello} for every target T in
# $2..., $1 rounds, alternating the order (neither side always runs on a
# warmer machine); results appended to $WORK/T. `port` is the caller's
# associative array, as is `wrk_script` (optional: a wrk Lua script for T)
# and `pid` (optional: T's serving process, whose CPU µs per request over
# the run are then a sixth column: its own cost, which noise moves little).
run_rounds() {
  local rounds=$1; shift
  local targets="$*" order result round t script before cpu_us
  for t in $targets; do : > "$WORK/$t"; done
  for round in $(seq "$rounds"); do
    order=$targets
    if [ $((round % 2)) -eq 0 ]; then order=$(echo "$targets" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for t in $order; do
      script="" before=""
      if declare -p wrk_script >/dev/null 2>&1; then script=${wrk_script[$t]:-}; fi
      if declare -p pid >/dev/null 2>&1 && [ -n "${pid[$t]:-}" ]; then before=$(cpu_ticks "${pid[$t]}"); fi
      result=$(run_wrk "http://127.0.0.1:${port[$t]}${BENCH_PATH:-/api/hello}" "$script")
      if [ -n "$before" ]; then
        cpu_us=$(awk -v a="$before" -v b="$(cpu_ticks "${pid[$t]}")" -v n="$(awk '{ print $5 }' <<<"$result")" \
          -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / n }')
        result="$result $cpu_us"
      fi
      echo "round $round $t: $result (req/s p50_ms p99_ms non2xx requests [cpu_us/req])" >&2
      echo "$result" >> "$WORK/$t"
    done
  done
}

# bench/ws_load's name=value line $1: the value of field $2 (0 when absent).
ws_field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | grep . || echo 0; }

# The cores the rest of the machine used during bench/ws_load's run $1 (its
# machine_cores less its own, the upstream's and the proxy's): noise.
ws_others() {
  awk -v m="$(ws_field "$1" machine_cores)" -v a="$(ws_field "$1" self_cores)" \
    -v b="$(ws_field "$1" upstream_cores)" -v c="$(ws_field "$1" proxy_cores)" \
    'BEGIN { o = m - a - b - c; printf "%.2f", o < 0 ? 0 : o }'
}

# Like run_rounds, for runs that measure the machine's noise: `$3 ROUND T`
# runs target T once and prints its figures on one line, the last of them
# the cores other processes used meanwhile (fails: the script ends). Every
# target of $2 runs once per round, the order reversed every other round;
# a round in which other processes passed $4 cores during any run is run
# again, up to $5 times (then kept). Appends each kept run's line to
# $WORK/T and "ROUND T" to $WORK/rounds, in the order they ran; sets
# `reruns` and `noisy_rounds` (the rounds kept noisy).
quiet_rounds() {  # rounds "targets" runner max_others retries
  local rounds=$1 targets=$2 runner=$3 max_others=$4 retries=$5
  local round order attempt noisy t
  local -A got
  reruns=0 noisy_rounds=""
  for t in $targets; do : > "$WORK/$t"; done
  for round in $(seq "$rounds"); do
    order=$targets
    if [ $((round % 2)) -eq 0 ]; then order=$(echo "$targets" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for attempt in $(seq 0 "$retries"); do
      got=() noisy=""
      for t in $order; do
        got[$t]=$("$runner" "$round" "$t") || exit 1
        if awk -v o="${got[$t]##* }" -v max="$max_others" 'BEGIN { exit !(o > max) }'; then
          noisy+=" $t"
        fi
      done
      if [ -z "$noisy" ] || [ "$attempt" = "$retries" ]; then break; fi
      reruns=$((reruns + 1))
      echo "round $round again: other processes used > $max_others cores during:$noisy" >&2
    done
    if [ -n "$noisy" ]; then noisy_rounds+=" $round"; fi
    for t in $order; do
      echo "${got[$t]}" >> "$WORK/$t"
      echo "$round $t" >> "$WORK/rounds"
    done
  done
}

# Median of column $2 of the results of target $1.
col() { awk -v c="$2" '{ print $c }' "$WORK/$1" | median; }

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# $1 ÷ $2 with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Target $2 against target $1 round by round, on column $3: in each round
# the two ran back to back, so the ratio of that round is free of the
# machine's drift between rounds (seen here: ±10% over minutes). $4 is
# "higher" or "lower": which way is better for $2. Prints e.g.
# "median 1.02× (0.97–1.06×), better or equal in 4 of 5 rounds".
round_ratios() {  # reference target column higher|lower
  paste "$WORK/$1" "$WORK/$2" | awk -v c="$3" -v better="$4" '
    { n = NF / 2; r = $(n + c) / $c; print r, (better == "higher" ? r >= 1 : r <= 1) }
  ' | sort -n | awk '
    { a[NR] = $1; wins += $2 }
    END {
      m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      printf "median %.2f× (%.2f–%.2f×), better or equal in %d of %d rounds\n", m, a[1], a[NR], wins, NR
    }'
}

# Replaces the block between <!-- NAME:begin --> and <!-- NAME:end --> in
# bench/RESULTS.md with the content of file $2.
write_results() {
  local name=$1 content=$2 results=$BENCH_ROOT/bench/RESULTS.md
  [ -f "$results" ] || printf '# Benchmark results\n' > "$results"
  if ! grep -q "<!-- $name:begin -->" "$results"; then
    printf '\n<!-- %s:begin -->\n<!-- %s:end -->\n' "$name" "$name" >> "$results"
  fi
  awk -v name="$name" -v file="$content" '
    $0 == "<!-- " name ":begin -->" { print; while ((getline line < file) > 0) print line; skip = 1; next }
    $0 == "<!-- " name ":end -->" { skip = 0 }
    !skip { print }
  ' "$results" > "$results.tmp" && mv "$results.tmp" "$results"
}
