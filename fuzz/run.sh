#!/usr/bin/env bash
# Runs each libFuzzer target of fuzz/ for a bounded time: `make fuzz`.
# Usage: fuzz/run.sh BUILD_DIR SECONDS TARGET...
# The corpus a target grows is kept in BUILD_DIR/fuzz/corpus/TARGET (and read
# again next time), with the seeds of fuzz/corpus/TARGET; a crashing input is
# written to BUILD_DIR/fuzz/artifacts/TARGET/. Exit status 1 if any target
# found something.
set -uo pipefail

build=$(cd "$1" && pwd)
seconds=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)

failed=0
report=()
for t in "$@"; do
  corpus=$build/fuzz/corpus/$t
  artifacts=$build/fuzz/artifacts/$t
  log=$build/fuzz/$t.log
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz: $t for ${seconds}s (log: $log)" >&2
  # Run from the build directory: file names a configuration may mention
  # (conf/...) do not exist there. stdin is /dev/null: nothing can wait on it.
  (cd "$build/fuzz" && "./fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$root/fuzz/corpus/$t" \
     </dev/null >"$log" 2>&1)
  status=$?
  runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  per_sec=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log")
  units=$(find "$corpus" -type f | wc -l)
  if [ "$status" -eq 0 ]; then
    report+=("$(printf '%-13s ok     %10s runs  %7s exec/s  corpus %s' "$t" "${runs:-?}" "${per_sec:-?}" "$units")")
  else
    failed=1
    report+=("$(printf '%-13s FAILED (exit %s): see %s' "$t" "$status" "$log")")
    grep -E 'ERROR:|SUMMARY:|runtime error|Test unit written' "$log" | head -5 >&2
  fi
done
printf '%s\n' "${report[@]}"
exit "$failed"
