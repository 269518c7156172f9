#!/usr/bin/env bash
# User-space instructions per streamed chat completion in tollgate, counted
# by callgrind over a fixed number of requests (lib.sh's
# h2load_instructions, h2load --h1 -m1 POSTing an OpenAI stream request to
# tests/gateway/fake_llm.py through tollgate): without any rule ("plain")
# and with cost = "openai" ("budget"), so that the budget's own work per
# request (the body's parse and rewrite, the reservation, the stream's
# scan, the settle) is their difference. Deterministic: unlike bench/cost.sh's
# times, a loaded machine does not move it.
# Usage: bench/cost_instructions.sh   (env: N requests, 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
export H2LOAD_CG_REQUESTS=${N:-2000}
python3 tests/gateway/fake_llm.py 2>$WORK/llm.err &
PIDS+=($!)
for _ in $(seq 100); do grep -q port "$WORK/llm.err" 2>/dev/null && break; sleep 0.05; done
llm=$(sed -n 's/port //p' $WORK/llm.err)
printf '{"model":"gpt-4o-mini","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Say hi."}]}' > $WORK/body.json
for t in plain budget; do
  extra=""  # plain: no rule
  [ $t = budget ] && extra=$(printf '[[rules]]\nname = "x"\nkey = "header:X-Team"\nalgorithm = "token_bucket"\nlimit = 100000000\nwindow = "1h"\ncost = "openai"\nmax_output_tokens = 64\n')
  p=$(free_port)
  TOLLGATE_WRAP="$(callgrind_wrap $t)" start_tollgate $p $llm "$extra"
  read -r ir done_ _ < <(h2load_instructions "$t" "${PIDS[-1]}" \
    "http://127.0.0.1:$p/v1/chat/completions" --h1 -m1 -d "$WORK/body.json" \
    -H 'X-Team: a' -H 'Content-Type: application/json')
  echo "$t: $ir instructions per request ($done_ requests)"
done
