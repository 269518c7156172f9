#!/bin/sh
# deploy/tollgate.service as systemd reads it: `systemd-analyze verify`
# (syntax, the commands it runs, the man pages it names) and the exposure
# score of `systemd-analyze security --offline`, printed, at most 2.0.
# systemd need not be running: both read the file.
# usage: verify_unit.sh SOURCE_DIR TOLLGATE_BINARY
set -eu
src=$1
binary=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The unit runs /usr/bin/tollgate, which a test machine need not have: the
# copy runs the binary just built. Its Documentation= pages are found in a
# man tree made of docs/man.
sed "s#/usr/bin/tollgate#$binary#g" "$src/deploy/tollgate.service" >"$work/tollgate.service"
mkdir -p "$work/man/man5" "$work/man/man8"
cp "$src/docs/man/tollgate.8" "$work/man/man8/"
cp "$src/docs/man/tollgate.toml.5" "$work/man/man5/"

MANPATH="$work/man" systemd-analyze verify "$work/tollgate.service"
systemd-analyze security --offline=yes --threshold=20 "$work/tollgate.service"
