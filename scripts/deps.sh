#!/usr/bin/env bash
# Installs the Debian packages tollgate needs to build, test and benchmark.
# Idempotent: when everything is present it only runs dpkg-query (well under a second).
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev openssl
  libhiredis-dev libtoml11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  redis-server redis-tools nginx-light wrk curl valgrind strace
  prometheus chromium fonts-dejavu-core
  python3-websockets
  liburing-dev  # bench/ws_relay_probe.cc only (the io_uring relay probe)
  libgoogle-perftools-dev
  libnghttp2-dev nghttp2-client nghttp2-server python3-h2 python3-grpcio
  python3-protobuf protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libyaml-cpp-dev
)
# `scripts/deps.sh fuzz` (make fuzz) also installs clang 14 and its runtime
# libraries (libclang_rt.fuzzer, ASan, UBSan): not needed to build or test.
if [ "${1:-}" = fuzz ]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian nginx package enables and starts a system service on :80; tests
# start their own nginx on free ports and do not need it.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true; fi
$SUDO service nginx stop >/dev/null 2>&1 || true
$SUDO service redis-server stop >/dev/null 2>&1 || true
# Likewise Debian's prometheus service (on :9090, tollgate's default admin port).
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
$SUDO service prometheus stop >/dev/null 2>&1 || true
