#!/usr/bin/env bash
# tollgate as a plain reverse proxy versus nginx (1 worker each, proxy_pass
# with upstream keep-alive), both in front of the bundled echo upstream.
# Usage: bench/proxy.sh [rounds]   (env: WRK_THREADS, WRK_CONNECTIONS, WRK_DURATION)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}

declare -A port
port[upstream]=$(free_port); start_echo "${port[upstream]}"
port[nginx]=$(free_port); start_nginx "${port[nginx]}" "${port[upstream]}"
port[tollgate]=$(free_port); start_tollgate "${port[tollgate]}" "${port[upstream]}"

run_rounds "$rounds" upstream nginx tollgate
report=$WORK/report.md
{
  echo "## Proxy: tollgate vs nginx (bench/proxy.sh)"
  echo
  echo "\`bench/proxy.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s}, $rounds alternating rounds, medians."
  echo "nginx $(nginx -v 2>&1 | sed 's/.*\///'): 1 worker, \`proxy_pass\` + \`keepalive 64\`, forwarding the client's Host and X-Forwarded-For/-Proto/-Host as tollgate does; tollgate: \`threads = 1\`; both with access logs off, in front of \`tollgate echo-upstream\` (1 thread)."
  echo
  echo "| target | req/s | p50 ms | p99 ms |"
  echo "|---|---:|---:|---:|"
  for target in upstream nginx tollgate; do
    echo "| $target | $(col "$target" 1) | $(col "$target" 2) | $(col "$target" 3) |"
  done
  echo
  echo "**tollgate ÷ nginx: req/s $(ratio "$(col tollgate 1)" "$(col nginx 1)")×, p99 $(ratio "$(col tollgate 3)" "$(col nginx 3)")×** (goal: req/s ≥ 1.00×, p99 ≤ 1.00×)."
  echo
  echo "Round by round (the two ran back to back in each round; tollgate ÷ nginx): req/s $(round_ratios nginx tollgate 1 higher); p99 $(round_ratios nginx tollgate 3 lower)."
} > "$report"
cat "$report"
write_results proxy "$report"
