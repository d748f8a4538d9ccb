#!/usr/bin/env bash
# The streaming W4A16 decode kernel (engine/backend/cuda/quant_gemv_stream.cu) against the tile kernel
# it replaces at small batches, and its switches against each other, in one call, for the H200 machine
# (after scripts/gpu/run-all.sh has unpacked the bundle, or standalone):
#   bash scripts/gpu/int4-stream-ab.sh        (from the repository root; carry: .devbin)
# Each variant is one lathe_cuda_bench with dummy int4 weights (g128): batch-1 latency (512 in, 128 out)
# against the roofline of the copy bandwidth measured here, and decode at batches 1, 2, 4 and 8.
# Variants: the defaults; the tile kernel (LATHE_CUDA_INT4_STREAM_MAX_M=0); the streaming kernel up to
# batch 8; 2 stages per warp; one block per multiprocessor. Shapes: LATHE_STREAM_MODELS (default
# "llama-3.1-8b llama-3.1-70b", folders of benchmarks/configs). Output: $OUT/int4-stream-ab.txt (one
# line per variant) and each bench's output. Environment: OUT, LATHE_GPU_BUDGET_S (default 300).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. scripts/gpu/lib.sh
gpu_begin 300
LOG="$OUT/int4-stream-ab.log"
: > "$LOG"
gpu_unpack_bundle bin/lathe_cuda_bench || exit 2
if [ ! -s "$OUT/bounds.txt" ]; then
  timeout 180 "$BIN/lathe_gpu_bounds" > "$OUT/bounds.txt" 2>&1
fi
gpu_read_bounds "$OUT/bounds.txt"
SUMMARY="$OUT/int4-stream-ab.txt"
echo "bounds: device copy ${COPY:-?} GB/s, BF16 GEMM ${GEMM:-?} TFLOP/s" > "$SUMMARY"

VARIANTS=(
  "defaults:"
  "tile-kernel:LATHE_CUDA_INT4_STREAM_MAX_M=0"
  "stream-to-8:LATHE_CUDA_INT4_STREAM_MAX_M=8"
  "stages-2:LATHE_CUDA_INT4_STREAM_STAGES=2"
  "one-block:LATHE_CUDA_INT4_STREAM_BLOCKS=1"
)
for model in ${LATHE_STREAM_MODELS-llama-3.1-8b llama-3.1-70b}; do
  for v in "${VARIANTS[@]}"; do
    name=${v%%:*}
    setting=${v#*:}
    [ "$(left)" -gt 40 ] || { log "out of time before $model $name"; break 2; }
    out="$OUT/int4-stream-$model-$name.txt"
    env ${setting:+"$setting"} timeout $(($(left) > 130 ? 120 : $(left) - 10)) "$BIN/lathe_cuda_bench" \
      --model "benchmarks/configs/$model" --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
      --quantization int4 --latency 512,128 --decode 1,2,4,8 --skip prefill,throughput,profile \
      --max-model-len 4096 > "$out" 2>&1
    log "$model $name (${setting:-defaults}): exit $?"
    echo "$model $name (${setting:-defaults}): $(grep -E '^(batch-1 decode|decode tok/s)' "$out" | tr '\n' ' ')" >> "$SUMMARY"
  done
done
cat "$SUMMARY"
