#!/usr/bin/env bash
# Makes the self-signed development certificate that conf/tollgate.toml's TLS
# listener uses and its JWT secret, unless they exist. Never use them outside
# development.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p conf/dev
if [ ! -f conf/dev/jwt-secret ]; then
  # HS256 key for conf/tollgate.toml's [identity.jwt] (development only).
  openssl rand -hex 32 > conf/dev/jwt-secret
fi
if [ -f conf/dev/cert.pem ] && [ -f conf/dev/key.pem ]; then exit 0; fi
mkdir -p conf/dev
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout conf/dev/key.pem -out conf/dev/cert.pem 2>/dev/null
echo "dev_cert: made a self-signed development certificate in conf/dev/" >&2
