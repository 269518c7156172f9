#!/usr/bin/env bash
# What an HPACK bomb costs tollgate: a client stores one 4,000-byte value
# in the HPACK dynamic table, then sends 16 KiB HEADERS frames made of
# 1-byte references to it (about 64 MB of decoded fields a frame), on new
# streams, until the GOAWAY (tests/gateway/http2/h2_peer.py hpack-bomb).
# CONNECTIONS clients run one after another against one tollgate (1
# thread) in front of the echo upstream; the figure is tollgate's CPU time
# (utime + stime from /proc/PID/stat) over the whole run divided by the
# bomb frames the clients sent, and by the connections. BOMBS caps the
# frames a client sends (300).
# Usage: bench/hpack_bomb.sh [connections]   (env: BOMBS, BUILD_DIR)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
connections=${1:-20}
upstream=$(free_port); start_echo "$upstream"
port=$(free_port); start_tollgate "$port" "$upstream"
pid=${PIDS[-1]}
cpu_ticks() { local stat; read -r stat < "/proc/$pid/stat"; set -- ${stat##*) }; echo $(( ${12} + ${13} )); }

before=$(cpu_ticks)
sent=0
for _ in $(seq "$connections"); do
  # A gateway that never sends GOAWAY leaves the client waiting for one
  # until its socket timeout (20 s): then it has sent all BOMBS.
  out=$(BOMBS=${BOMBS:-300} /usr/bin/python3 "$BENCH_ROOT/tests/gateway/http2/h2_peer.py" \
          hpack-bomb "$port" || true)
  n=$(sed -n 's/.* sent=\([0-9]*\).*/\1/p' <<<"$out")
  n=${n:-${BOMBS:-300}}
  sent=$((sent + n))
  echo "$out" | tr '\n' ' ' >&2; echo >&2
done
after=$(cpu_ticks)
hz=$(getconf CLK_TCK)
awk -v t=$((after - before)) -v hz="$hz" -v frames="$sent" -v c="$connections" 'BEGIN {
  s = t / hz
  printf "connections=%d bomb_frames=%d cpu_s=%.3f cpu_ms_per_frame=%.3f cpu_ms_per_connection=%.2f\n",
         c, frames, s, 1000 * s / frames, 1000 * s / c }'
