#!/usr/bin/env bash
# `make run`: the demo upstream on 127.0.0.1:9000 and the gateway with
# conf/tollgate.toml in the foreground. Ctrl-C stops both.
set -euo pipefail
build_dir=${1:-build}
cd "$(dirname "$0")/.."
scripts/dev_cert.sh

"$build_dir/tollgate" echo-upstream --listen 127.0.0.1:9000 &
upstream=$!
trap 'kill -TERM $upstream 2>/dev/null; wait $upstream 2>/dev/null' EXIT
cat >&2 <<'MSG'
run: try   curl -i localhost:8080/api/hello
           curl -ik https://localhost:8443/api/hello
           curl -i localhost:9090/readyz
     status page: http://localhost:9090/
MSG
"$build_dir/tollgate" --config conf/tollgate.toml
