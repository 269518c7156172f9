#!/usr/bin/env bash
# `make bench`: every benchmark, each writing its section of bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=$(cd "${1:-build}" && pwd)
bench/store.sh
bench/proxy.sh
bench/http2.sh
bench/grpc.sh
bench/decision.sh
bench/websocket.sh 5 --message-rule
bench/ratelimit.sh
bench/instructions.sh
bench/syscalls.sh
bench/redis_store.sh
bench/lease.sh
bench/metrics.sh
bench/upstream_limits.sh "$@"
bench/adaptive.sh
bench/reload.sh
