#!/usr/bin/env bash
# Installs the Debian 12 packages one target needs, and nothing else:
#   scripts/deps.sh run     build and run the tollgate binary (make run)
#   scripts/deps.sh test    + what the tests build and start (make test)
#   scripts/deps.sh bench   + the load generators and profilers (make bench)
#   scripts/deps.sh package run's, + dpkg-shlibdeps and file (make package)
#   scripts/deps.sh fuzz    + clang 14 and its fuzzing runtime (make fuzz)
#   scripts/deps.sh         everything but fuzz (make deps)
# It prints what it is about to install. It never stops, disables or
# reconfigures a service: packages that would start one on installation
# (nginx, redis-server, prometheus) are kept from starting it by a
# policy-rc.d that exists only while apt-get runs.
# Idempotent: when everything is present it only runs dpkg-query.
set -euo pipefail

target=${1:-all}

# The tollgate binary: compiler, build tools and the libraries it links.
run=(
  build-essential cmake ccache pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev openssl  # openssl: scripts/dev_cert.sh
  libhiredis-dev libtoml11-dev libspdlog-dev libfmt-dev
  libnghttp2-dev libprotobuf-dev protobuf-compiler libyaml-cpp-dev
  libgoogle-perftools-dev  # tcmalloc (TOLLGATE_TCMALLOC)
  libsystemd-dev           # sd_notify
  libhowardhinnant-date-dev tzdata  # calendar windows: date/tz.h on /usr/share/zoneinfo
  curl                     # the README's first requests
)
package=(dpkg-dev file)  # CPack's DEB generator: dpkg-shlibdeps finds the Depends
# What `make test` builds (tests and benchmark binaries) and the real peers
# the tests start.
test=(
  libgtest-dev libgmock-dev libbenchmark-dev protobuf-compiler-grpc
  redis-server redis-tools nginx-light nghttp2-client nghttp2-server
  prometheus chromium fonts-dejavu-core
  python3 python3-websockets python3-h2 python3-grpcio python3-protobuf
  python3-jsonschema  # tests/docs/schema_test.py
  systemd groff-base man-db "${package[@]}"  # unit, man page and package tests
)
bench=(
  wrk valgrind strace linux-perf
  liburing-dev  # bench/ws_relay_probe.cc only (the io_uring relay probe)
  haproxy  # bench/idle_memory.sh: the HTTP/1.1 anchor beside nginx
)
fuzz=(clang-14 libclang-rt-14-dev)

case "$target" in
  run) packages=("${run[@]}") ;;
  test) packages=("${run[@]}" "${test[@]}") ;;
  bench) packages=("${run[@]}" "${test[@]}" "${bench[@]}") ;;
  fuzz) packages=("${run[@]}" "${fuzz[@]}") ;;
  package) packages=("${run[@]}" "${package[@]}") ;;
  all) packages=("${run[@]}" "${test[@]}" "${bench[@]}") ;;
  *)
    echo "usage: scripts/deps.sh [run|test|bench|fuzz|package]" >&2
    exit 2
    ;;
esac

# One dpkg-query for all: the packages it lists as installed.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${packages[@]}" 2>/dev/null |
  awk '$2 == "installed" { print $1 }' || true)
missing=()
for p in "${packages[@]}"; do
  if ! grep -qx -- "$p" <<<"$installed"; then missing+=("$p"); fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "deps ($target): about to install ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# invoke-rc.d and deb-systemd-invoke ask /usr/sbin/policy-rc.d whether a
# package may start its service; 101 says no. An existing policy is put
# back exactly as it was afterwards.
policy=/usr/sbin/policy-rc.d
saved=""
restore_policy() {
  $SUDO rm -f "$policy"
  if [ -n "$saved" ]; then $SUDO mv "$saved" "$policy"; fi
}
if [ -e "$policy" ]; then
  saved="$policy.tollgate-deps"
  $SUDO mv "$policy" "$saved"
fi
trap restore_policy EXIT
printf '#!/bin/sh\n# scripts/deps.sh: no service starts while it installs.\nexit 101\n' |
  $SUDO tee "$policy" >/dev/null
$SUDO chmod 755 "$policy"

$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
