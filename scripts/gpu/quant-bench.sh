#!/usr/bin/env bash
# Quantized formats on the GPU (issues 13 and 14), for the H200 machine, after scripts/gpu/run-all.sh
# has unpacked the bundle (or standalone: it unpacks it itself):
#   bash scripts/gpu/quant-bench.sh       (from the repository root; carry: .devbin)
# Llama-3.1-8B shape with dummy weights, one lathe_cuda_bench per format: bf16 and the formats
# `--quantization fp8|int8|int4` makes (random codes in the format, dummy_quant.h): resident weight
# bytes, batch-1 latency (512 in, 128 out) against the format's own roofline (bytes read per step /
# the copy bandwidth measured here), one 2048-token prefill, decode tok/s at batch 1..256. Then the
# Llama-3.1-70B shape as int4 and fp8: loads on one H200 and decodes at batch 1. Optionally the
# GGUF types (random blocks laid out as a file's, engine/model/dummy_gguf.h: q4_k_m is llama.cpp's
# Q4_K_M mix with its q6_k LM head) at the 8B shape: batch-1 latency and decode at batch 1 and 8
# against their rooflines.
# Environment: LATHE_GPU_BUNDLE, OUT (output folder), LATHE_QUANT_FORMATS (default "none fp8 int8
# int4"; empty to skip), LATHE_QUANT_70B (default "int4 fp8"; empty to skip), LATHE_QUANT_GGUF
# (default empty, e.g. "q4_k_m q8_0 q4_0": 6-7 s each in run 55; the dummies are engine/model/dummy_gguf.h's:
# q4_k_m q4_k q4_0 q8_0 q5_k_m q6_k q4_1 q5_0 q5_1 q2_k q3_k), LATHE_QUANT_GGUF_AB (non-empty: each GGUF type
# also with its blocks as in the file, LATHE_CUDA_GGUF_REPACK=0, in the same call), LATHE_QUANT_AB
# (default 1; empty: no same-run A/B of the previous kernels), LATHE_GPU_BUDGET_S (default 300).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_begin 300
LOG="$OUT/quant-bench.log"
: > "$LOG"

gpu_unpack_bundle bin/lathe_cuda_bench || exit 2

gpu_bounds
SUMMARY=("bounds: device copy ${COPY:-?} GB/s, BF16 GEMM ${GEMM:-?} TFLOP/s")
# One bench output into the summary: its weights line under `head`, its figure lines, and its first
# errors under `who`.
summarize() {
  local head=$1 who=$2 f=$3 line
  SUMMARY+=("$head: $(grep -m1 '^weights:' "$f")")
  while IFS= read -r line; do SUMMARY+=("  $line"); done < <(grep -E '^(batch-1 decode|prefill 2048|decode tok/s)' "$f")
  grep -q -i "error\|lathe_cuda_bench:" "$f" && SUMMARY+=("  $who: $(grep -m2 -i 'error\|lathe_cuda_bench:' "$f" | tr '\n' ' ')")
  return 0
}

for q in ${LATHE_QUANT_FORMATS-none fp8 int8 int4}; do
  [ "$(left)" -gt 40 ] || { log "out of time before $q"; break; }
  log "== 8B shape, --quantization $q"
  args=()
  [ "$q" != none ] && args=(--quantization "$q")
  timeout $(( $(left) > 150 ? 120 : $(left) - 20 )) "$BIN/lathe_cuda_bench" \
    --model benchmarks/configs/llama-3.1-8b --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
    "${args[@]}" --skip profile,throughput > "$OUT/quant-8b-$q.txt" 2>&1
  log "exit $?"
  summarize "8B $q" "8B $q" "$OUT/quant-8b-$q.txt"
  # A/B in the same run: int4 with dequantize-then-GEMM above batch 8 instead of the W4A16 GEMM
  # kernel; int8 with the one-row decode kernel instead of the multi-row one.
  if [ "$q" != none ] && [ -n "${LATHE_QUANT_AB-1}" ] && [ "$(left)" -gt 60 ]; then
    # fp8: W8A16 (dequantize, 16-bit GEMM) instead of W8A8 where the batch is above 8.
    case $q in
      # int4: batches above 8 dequantized for a 16-bit GEMM instead of the W4A16 GEMM kernel.
      int4) ab=LATHE_CUDA_INT4_GEMM_MAX_M; ab_args=(--decode 16,32,64,128 --skip latency,prefill,profile,throughput) ;;
      fp8) ab=LATHE_CUDA_FP8_GEMM; ab_args=(--decode 64,256 --skip latency,profile,throughput) ;;
      *) ab=LATHE_CUDA_QUANT_ROWS; ab_args=(--decode 1,8 --skip prefill,profile,throughput) ;;
    esac
    abv=0
    [ "$ab" = LATHE_CUDA_INT4_GEMM_MAX_M ] && abv=8
    env "$ab=$abv" timeout 90 "$BIN/lathe_cuda_bench" \
      --model benchmarks/configs/llama-3.1-8b --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
      "${args[@]}" "${ab_args[@]}" > "$OUT/quant-8b-$q-ab.txt" 2>&1
    while IFS= read -r line; do SUMMARY+=("  previous kernel ($ab=$abv): $line"); done < <(grep -E '^(batch-1 decode|prefill 2048|decode tok/s)' "$OUT/quant-8b-$q-ab.txt")
    if [ "$q" = int4 ]; then  # one launch per part, SwiGLU and RoPE/KV in their own kernels
      LATHE_CUDA_INT4_TILE_PAIRS=0 timeout 90 "$BIN/lathe_cuda_bench" \
        --model benchmarks/configs/llama-3.1-8b --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
        "${args[@]}" --decode 1,8 --skip prefill,profile,throughput > "$OUT/quant-8b-$q-nopairs.txt" 2>&1
      while IFS= read -r line; do SUMMARY+=("  one launch per part (LATHE_CUDA_INT4_TILE_PAIRS=0): $line"); done < <(grep -E '^(batch-1 decode|decode tok/s)' "$OUT/quant-8b-$q-nopairs.txt")
    fi
  fi
done

for q in ${LATHE_QUANT_GGUF-}; do
  [ "$(left)" -gt 50 ] || { log "out of time before GGUF $q"; break; }
  log "== 8B shape, --quantization $q (GGUF blocks)"
  start=$SECONDS
  timeout $(( $(left) > 110 ? 90 : $(left) - 20 )) "$BIN/lathe_cuda_bench" \
    --model benchmarks/configs/llama-3.1-8b --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
    --quantization "$q" --latency 512,128 --decode 1,8 --skip prefill,profile,throughput \
    > "$OUT/quant-8b-$q.txt" 2>&1
  log "exit $? after $(( SECONDS - start )) s"
  summarize "8B $q ($(( SECONDS - start )) s)" "8B $q" "$OUT/quant-8b-$q.txt"
  # Same-run A/B: every GGUF part in its file blocks (no repack, split or unit layout: the one-row
  # GGUF kernel for the types the k-quant kernel reads from those layouts).
  if [ -n "${LATHE_QUANT_GGUF_AB-}" ] && [ "$(left)" -gt 50 ]; then
    LATHE_CUDA_GGUF_REPACK=0 timeout 90 "$BIN/lathe_cuda_bench" \
      --model benchmarks/configs/llama-3.1-8b --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
      --quantization "$q" --latency 512,128 --decode 1,8 --skip prefill,profile,throughput \
      > "$OUT/quant-8b-$q-blocks.txt" 2>&1
    while IFS= read -r line; do SUMMARY+=("  file blocks (LATHE_CUDA_GGUF_REPACK=0): $line"); done < <(grep -E '^(batch-1 decode|decode tok/s)' "$OUT/quant-8b-$q-blocks.txt")
  fi
done

for q in ${LATHE_QUANT_70B-int4 fp8}; do
  [ "$(left)" -gt 60 ] || { log "out of time before 70B $q"; break; }
  log "== 70B shape, --quantization $q"
  timeout $(( $(left) > 150 ? 130 : $(left) - 20 )) "$BIN/lathe_cuda_bench" \
    --model benchmarks/configs/llama-3.1-70b --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
    --quantization "$q" --latency 512,64 --decode 1 --skip prefill,profile,throughput \
    > "$OUT/quant-70b-$q.txt" 2>&1
  log "exit $?"
  summarize "70B $q" "70B $q" "$OUT/quant-70b-$q.txt"
done

echo "==== quant-bench summary" | tee -a "$LOG"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$LOG" "$OUT/quant-summary.txt"
