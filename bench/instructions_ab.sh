#!/usr/bin/env bash
# User-space instructions per request of two tollgate binaries side by side
# (a change's before and after) and nginx, each with one worker in front of
# the echo upstream, counted by callgrind over a fixed number of requests:
# h2load (-c16 -m32 -t1; --h1 for HTTP/1.1) sends H2LOAD_CG_REQUESTS
# (20000) after a quarter as many to warm up (lib.sh's h2load_instructions),
# so the count per request does not depend on how many requests a timed
# run completes, as bench/instructions.sh's wrk runs do on a loaded machine.
# Scenarios: "proxied" (a per-IP limit never reached) and "429" (per-IP
# 100/s, burst 10) over HTTP/1.1, as bench/instructions.sh, pipelined;
# "alive", proxied again but one request at a time on each connection
# (h2load -m1), so that every connection goes idle between its requests,
# as wrk's do; "h2c" (no rule) over HTTP/2 with prior knowledge, as
# bench/http2.sh --instructions.
# Usage: bench/instructions_ab.sh BEFORE_BINARY   (after: $BUILD_DIR/tollgate)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
before=${1:?usage: bench/instructions_ab.sh BEFORE_BINARY}
after=$TOLLGATE

echo_port=$(free_port); start_echo "$echo_port"
declare -A ir
measure() {  # name url [h2load arguments]
  local name=$1 url=$2
  shift 2
  read -r ir[$name] _ _ < <(h2load_instructions "$name" "${PIDS[-1]}" "$url" "$@")
  echo "$name: ${ir[$name]} instructions per request" >&2
}

for s in proxied:1000000:1000000:32 429:100:10:32 alive:1000000:1000000:1; do
  IFS=: read -r name rate burst streams <<<"$s"  # scenario:rate:burst:requests in flight
  p=$(free_port)
  # h2load does not reconnect: no cap on requests per connection.
  NGINX_SERVER="keepalive_requests 100000000;" NGINX_WRAP=$(callgrind_wrap "nginx_$name") \
    NGINX_MAIN=" master_process off;" \
    start_nginx "$p" "$echo_port" "limit_req zone=ip burst=$burst nodelay;" "$(nginx_limit_zone "$rate")"
  measure "nginx_$name" "http://127.0.0.1:$p/api/hello" --h1 -m "$streams"
  for side in before after; do
    p=$(free_port)
    TOLLGATE=${!side} TOLLGATE_WRAP=$(callgrind_wrap "${side}_$name") \
      start_tollgate "$p" "$echo_port" "$(token_bucket_rule "$rate" "$burst")"
    measure "${side}_$name" "http://127.0.0.1:$p/api/hello" --h1 -m "$streams"
  done
done
for side in before after; do
  p=$(free_port)
  TOLLGATE=${!side} TOLLGATE_WRAP=$(callgrind_wrap "${side}_h2c") start_tollgate "$p" "$echo_port"
  measure "${side}_h2c" "http://127.0.0.1:$p/api/hello"
done

echo
echo "\`bench/instructions_ab.sh BEFORE\` on $(date -u +%Y-%m-%d): user-space instructions per request (callgrind; h2load -c16 -m32 -t1, ${H2LOAD_CG_REQUESTS:-20000} requests counted after a warm-up; --h1 for the HTTP/1.1 scenarios, -m1 for \"alive\")."
echo
echo "| scenario | nginx | before | after | after ÷ before |"
echo "|---|---:|---:|---:|---:|"
for s in proxied 429 alive; do
  echo "| $s | ${ir[nginx_$s]} | ${ir[before_$s]} | ${ir[after_$s]} | $(ratio "${ir[after_$s]}" "${ir[before_$s]}")× |"
done
echo "| h2c | — | ${ir[before_h2c]} | ${ir[after_h2c]} | $(ratio "${ir[after_h2c]}" "${ir[before_h2c]}")× |"
