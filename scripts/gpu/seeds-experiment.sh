#!/usr/bin/env bash
# The seeds' central experiment (issue 14), for the H200 machine: `lathe serve` on Qwen2.5-7B shape
# (dummy weights) in BF16, FP8 and INT4 W4A16 g128 (`--quantization fp8|int4`: random codes in the
# format, engine/backend/cuda/dummy_quant.h), each swept by `lathe bench serve` with random prompts
# of 1024 tokens in / 256 out at concurrency 1, 4, 16, 64, 128, 300 (each level sends at least its
# own number of requests; level 1 sends LATHE_SEEDS_PROMPTS, default 8).
#   bash scripts/gpu/seeds-experiment.sh        (from the repository root; carry: .devbin)
# Writes $OUT/seeds-<variant>.json and .txt per variant and $OUT/seeds-summary.txt (one line per
# variant and level: output tok/s, TTFT p50/p99, ITL p50/p99). scripts/gpu/seeds-plot.py turns the
# JSON files into the table and the SVG plot of docs/PERFORMANCE.md.
# Environment: LATHE_SEEDS_VARIANTS (default "none fp8 int4"), LATHE_SEEDS_LEVELS (default
# 1,4,16,64,128,300), LATHE_GPU_BUDGET_S (default 420), OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_begin 420
gpu_unpack_bundle bin/lathe || exit 2
PORT=${LATHE_SWEEP_PORT:-8766}
MODEL=benchmarks/configs/qwen2.5-7b
LEVELS=${LATHE_SEEDS_LEVELS:-1,4,16,64,128,300}
: > "$OUT/seeds-summary.txt"

for q in ${LATHE_SEEDS_VARIANTS:-none fp8 int4}; do
  [ "$(left)" -gt 60 ] || { echo "seeds: out of time before $q" | tee -a "$OUT/seeds-summary.txt"; break; }
  args=()
  [ "$q" != none ] && args=(--quantization "$q")
  "$BIN/lathe" serve "$MODEL" --load-format dummy --device cuda --port "$PORT" "${args[@]}" \
    --max-model-len 2048 --served-model-name qwen2.5-7b-dummy > "$OUT/seeds-serve-$q.log" 2>&1 &
  SERVER=$!
  if ! gpu_wait_health "$PORT" $SERVER 150; then
    echo "seeds $q: lathe serve did not come up: $(tail -3 "$OUT/seeds-serve-$q.log" | tr '\n' ' ')" | tee -a "$OUT/seeds-summary.txt"
    kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null
    continue
  fi
  t=$(( $(left) - 15 ))
  timeout "$t" "$BIN/lathe" bench serve --base-url "http://127.0.0.1:$PORT" --model qwen2.5-7b-dummy \
    --endpoint /v1/completions --dataset random --input-len 1024 --output-len 256 --ignore-eos \
    --no-progress --seed 1 --num-prompts "${LATHE_SEEDS_PROMPTS:-8}" --sweep-concurrency "$LEVELS" \
    --json "$OUT/seeds-$q.json" > "$OUT/seeds-$q.txt" 2>&1
  echo "seeds $q: bench exit $?" | tee -a "$OUT/seeds-summary.txt"
  kill -TERM $SERVER; wait $SERVER
  grep -m1 "weights on" "$OUT/seeds-serve-$q.log" | sed "s/^/seeds $q: /" >> "$OUT/seeds-summary.txt"
  tail -12 "$OUT/seeds-$q.txt" | sed "s/^/seeds $q: /" >> "$OUT/seeds-summary.txt"
done
cat "$OUT/seeds-summary.txt"
