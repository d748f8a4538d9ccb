#!/usr/bin/env bash
# Nsight Compute over a few launches of one kernel inside lathe_cuda_bench's batch-1 decode, for
# the H200 machine (after scripts/gpu/run-all.sh has unpacked the bundle, or standalone):
#   bash scripts/gpu/kernel-profile.sh KERNEL_REGEX [QUANTIZATION] [MODEL_DIR]
# e.g. `bash scripts/gpu/kernel-profile.sh quant_gemv_kquants q4_k_m`. The model runs with dummy
# weights, a 1024-token context and 30% of the memory in eager mode, so that ncu's replay saves and
# restores a few GB rather than the whole KV cache (docs/gpu-notes.md: with the default memory
# fraction a replay did not finish in 4 minutes). Sections: speed of light, memory workload,
# warp states, scheduler, launch and occupancy; the first 40 launches are skipped (warm-up), 6
# are profiled. Output: $OUT/ncu-<QUANTIZATION>.txt (text report). Environment: OUT,
# LATHE_GPU_BUDGET_S (default 240), LATHE_NCU_COUNT (launches, default 6).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_begin 240
gpu_unpack_bundle bin/lathe_cuda_bench || exit 2
KERNEL=${1:?kernel name regex}
QUANT=${2:-none}
MODEL=${3:-benchmarks/configs/llama-3.1-8b}
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
QARGS=()
[ "$QUANT" != none ] && QARGS=(--quantization "$QUANT")
timeout $(($(left) - 5)) "$NCU" --kernel-name "regex:$KERNEL" --launch-skip 40 \
  --launch-count "${LATHE_NCU_COUNT:-6}" --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
  "$BIN/lathe_cuda_bench" --model "$MODEL" --load-format dummy "${QARGS[@]}" \
  --gpu-memory-utilization 0.3 --max-model-len 1024 --enforce-eager --latency 64,16 --decode 1 \
  --skip prefill,throughput,profile > "$OUT/ncu-$QUANT.txt" 2>&1
rc=$?
log "kernel-profile $KERNEL $QUANT: exit $rc, $(grep -c 'Section: GPU Speed Of Light' "$OUT/ncu-$QUANT.txt") launches reported"
exit $rc
