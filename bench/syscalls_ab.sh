#!/usr/bin/env bash
# System calls per request of two tollgate binaries side by side (a change's
# before and after), one worker each in front of the echo upstream:
# strace -c -f attaches to the process after a warm-up and counts during one
# h2load run of a fixed number of requests (-c16 -m32 -t1; --h1 for
# HTTP/1.1), whose requests divide the counts. Scenarios: "proxied" over
# HTTP/1.1 (no rule) and "h2c" over HTTP/2 with prior knowledge.
# Usage: bench/syscalls_ab.sh BEFORE_BINARY [requests]  (after: $BUILD_DIR/tollgate)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
before=${1:?usage: bench/syscalls_ab.sh BEFORE_BINARY [requests]}
after=$TOLLGATE
n=${2:-20000}

echo_port=$(free_port); start_echo "$echo_port"
declare -A calls top
for scenario in proxied:--h1 h2c:; do
  IFS=: read -r name flag <<<"$scenario"
  for side in before after; do
    p=$(free_port)
    TOLLGATE=${!side} start_tollgate "$p" "$echo_port"
    pid=${PIDS[-1]}
    url="http://127.0.0.1:$p/api/hello"
    h2load -c16 -m32 -t1 -n "$((n / 4))" $flag "$url" >/dev/null
    strace -c -f -p "$pid" -o "$WORK/$side-$name.strace" 2>/dev/null &
    tracer=$!
    sleep 1
    h2load -c16 -m32 -t1 -n "$n" $flag "$url" >/dev/null
    kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
    calls[${side}_$name]=$(awk -v n="$n" '/ total$/ { printf "%.2f", $4 / n }' "$WORK/$side-$name.strace")
    top[${side}_$name]=$(awk -v n="$n" '$NF != "total" && $4 ~ /^[0-9]+$/ && $4 / n >= 0.05 {
        printf "%s%s %.2f", sep, $NF, $4 / n; sep = ", " }' "$WORK/$side-$name.strace")
    kill "$pid"
  done
done

echo
echo "\`bench/syscalls_ab.sh BEFORE $n\` on $(date -u +%Y-%m-%d): system calls per request (strace -c -f during one h2load -c16 -m32 -t1 run of $n requests after a warm-up; --h1 for HTTP/1.1)."
echo
echo "| scenario | before | after | before: by call | after: by call |"
echo "|---|---:|---:|---|---|"
for s in proxied h2c; do
  echo "| $s | ${calls[before_$s]} | ${calls[after_$s]} | ${top[before_$s]} | ${top[after_$s]} |"
done
