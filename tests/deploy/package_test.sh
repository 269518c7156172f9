#!/usr/bin/env bash
# make package: the .deb CPack builds from this build directory, its
# control fields, contents and maintainer scripts (dpkg-deb), and the
# binary and configuration it installs, unpacked into a temporary root
# (dpkg -x) and run there: under --check-config, then serving with the
# packaged configuration, only its addresses moved to free loopback ports,
# in front of the packaged binary's echo upstream. Nothing is installed on
# the machine.
# usage: package_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log") ||
  { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/out/tollgate_*.deb)
echo "package: $(basename "$deb")"

package=$(dpkg-deb -f "$deb" Package)
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
[ "$package" = tollgate ] || fail "Package is \"$package\""
for lib in libc6 libstdc++6 libssl3 libhiredis0.14 libnghttp2-14 libsystemd0 libprotobuf32 \
  libyaml-cpp0.7 libspdlog1.10 libfmt9; do
  grep -q "\b$lib\b" <<<"$depends" || fail "Depends lacks $lib"
done
if grep -q -- '-dev\b' <<<"$depends"; then fail "Depends names a -dev package"; fi

dpkg-deb -c "$deb" | awk '{ print $NF }' >"$work/contents"
for path in ./usr/bin/tollgate ./etc/tollgate/tollgate.toml ./lib/systemd/system/tollgate.service \
  ./usr/share/man/man8/tollgate.8 ./usr/share/man/man5/tollgate.toml.5 \
  ./usr/share/bash-completion/completions/tollgate ./usr/share/doc/tollgate/copyright \
  ./usr/share/doc/tollgate/algorithms.md ./usr/share/doc/tollgate/examples/tollgate.toml \
  ./usr/share/tollgate/tollgate.schema.json \
  ./usr/share/tollgate/grafana/tollgate-dashboard.json \
  ./usr/share/tollgate/prometheus/tollgate-alerts.yml; do
  grep -qx -- "$path" "$work/contents" || fail "the package lacks $path"
done
if grep -q '^./usr/local\|^./usr/etc' "$work/contents"; then fail "files outside the Debian layout"; fi

dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/tollgate/tollgate.toml "$work/control/conffiles" || fail "tollgate.toml is no conffile"
grep -q 'useradd --system' "$work/control/postinst" || fail "postinst makes no system user"

# The unpacked binary (its libraries are this machine's, as the Depends ask)
# with the unpacked configuration.
dpkg -x "$deb" "$work/root"
"$work/root/usr/bin/tollgate" --version
"$work/root/usr/bin/tollgate" --check-config "$work/root/etc/tollgate/tollgate.toml" ||
  fail "the packaged configuration does not check"
# The packaged alert rules load and the dashboard is JSON.
promtool check rules "$work/root/usr/share/tollgate/prometheus/tollgate-alerts.yml" >/dev/null ||
  fail "the packaged alert rules do not check"
/usr/bin/python3 -m json.tool "$work/root/usr/share/tollgate/grafana/tollgate-dashboard.json" \
  >/dev/null || fail "the packaged dashboard is not JSON"
grep -q '^ExecStart=/usr/bin/tollgate --config /etc/tollgate/tollgate.toml$' \
  "$work/root/lib/systemd/system/tollgate.service" || fail "the unit does not run /usr/bin/tollgate"

# The packaged binary serving with the packaged configuration: the listener,
# admin and upstream addresses moved to free loopback ports, nothing else.
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
}
wait_port() {
  for _ in $(seq 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  return 1
}
listen=$(free_port) admin=$(free_port) upstream=$(free_port)
sed -e "s/\"0.0.0.0:8080\"/\"127.0.0.1:$listen\"/" -e "s/\"127.0.0.1:9090\"/\"127.0.0.1:$admin\"/" \
  -e "s/\"127.0.0.1:9000\"/\"127.0.0.1:$upstream\"/" "$work/root/etc/tollgate/tollgate.toml" \
  >"$work/served.toml"
[ "$(diff "$work/root/etc/tollgate/tollgate.toml" "$work/served.toml" | grep -c '^>')" = 3 ] ||
  fail "the packaged configuration's addresses are not where this test expects them"
"$work/root/usr/bin/tollgate" echo-upstream --listen "127.0.0.1:$upstream" 2>/dev/null &
echo_pid=$!
"$work/root/usr/bin/tollgate" --config "$work/served.toml" >"$work/served.log" 2>&1 &
gateway_pid=$!
if wait_port "$listen" && wait_port "$admin"; then
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz")" = 200 ] ||
    fail "the packaged gateway is not ready"
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$listen/api/hello")" = 200 ] ||
    fail "the packaged gateway does not proxy"
else
  fail "the packaged gateway did not listen"; cat "$work/served.log"
fi
kill -TERM "$gateway_pid"
wait "$gateway_pid" || fail "the packaged gateway did not stop cleanly on SIGTERM"
kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true
exit $failed
