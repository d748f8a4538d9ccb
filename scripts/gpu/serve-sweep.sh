#!/usr/bin/env bash
# Issue 5's GPU figure: `lathe serve` on Llama-3.1-8B shape (BF16, dummy weights) swept by
# `lathe bench serve` over concurrency 1, 4, 16, 64, 128, 256 with 1024 random input tokens and 128
# output tokens per request. Called by run-all.sh on the GPU machine (needs the unpacked bundle):
#   scripts/gpu/serve-sweep.sh BIN_DIR OUT_DIR
# Levels 1..128 send 32 prompts (at least the level); level 256 sends 768 so the throughput is a
# steady state comparable with `lathe bench throughput`.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
BIN=$1
OUT=$2
PORT=${LATHE_SWEEP_PORT:-8765}
MODEL=benchmarks/configs/llama-3.1-8b
"$BIN/lathe" serve "$MODEL" --load-format dummy --device cuda --port "$PORT" \
  --served-model-name llama-3.1-8b-dummy > "$OUT/serve.log" 2>&1 &
SERVER=$!
gpu_wait_health "$PORT" $SERVER 120
if [ $? = 1 ]; then
  echo "serve-sweep: lathe serve exited early"; tail -5 "$OUT/serve.log"; exit 1
fi
COMMON=(--base-url "http://127.0.0.1:$PORT" --model llama-3.1-8b-dummy --endpoint /v1/completions
        --dataset random --input-len 1024 --output-len 128 --ignore-eos --no-progress --seed 1)
timeout 240 "$BIN/lathe" bench serve "${COMMON[@]}" --num-prompts 32 --sweep-concurrency 1,4,16,64,128 \
  --json "$OUT/serve-sweep-1-128.json" > "$OUT/serve-sweep-1-128.txt" 2>&1
echo "serve-sweep 1..128 exit $?"
timeout 150 "$BIN/lathe" bench serve "${COMMON[@]}" --num-prompts 768 --max-concurrency 256 --skip-test-request \
  --json "$OUT/serve-sweep-256.json" > "$OUT/serve-sweep-256.txt" 2>&1
echo "serve-sweep 256 exit $?"
curl -s "http://127.0.0.1:$PORT/metrics" > "$OUT/serve-metrics.txt" 2>/dev/null || \
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics').read().decode())" \
  > "$OUT/serve-metrics.txt" 2>/dev/null
kill -TERM $SERVER
wait $SERVER
echo "lathe serve exit $? (SIGTERM)"
cat "$OUT/serve-sweep-1-128.txt" | tail -20
cat "$OUT/serve-sweep-256.txt" | tail -25
