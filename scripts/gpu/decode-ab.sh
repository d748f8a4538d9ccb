#!/usr/bin/env bash
# Same-run A/B of the decode kernels' switches, for the H200 machine (after scripts/gpu/run-all.sh has
# unpacked the bundle, or standalone):
#   bash scripts/gpu/decode-ab.sh        (from the repository root; carry: .devbin)
# Each variant is one lathe_cuda_bench with dummy weights in the format: batch-1 latency (512 in, 128
# out) against the roofline of the copy bandwidth measured here, and decode at the batches of
# LATHE_AB_DECODE (default 1,2,4,8). Formats: LATHE_AB_QUANT (default "int4"; any --quantization of
# lathe_cuda_bench: none, fp8, int8, int4, or a GGUF type such as q8_0). Variants per format, unless
# LATHE_AB_VARIANTS names them ("name:VAR=value ..."; "name:" is the defaults):
#   int4: the defaults; the tile kernel (LATHE_CUDA_INT4_STREAM_MAX_M=0); the streaming kernel up to
#         batch 8; 2 stages per warp; one block per multiprocessor (quant_gemv_stream.cu);
#   fp8, int8, q8_0: the defaults; the kernels before the fused 8-bit decode kernel
#         (LATHE_CUDA_W8_DECODE_MAX_M=0); one block per multiprocessor (decode_gemv.h);
#   others: the defaults only.
# Shapes: LATHE_AB_MODELS (default "llama-3.1-8b llama-3.1-70b", folders of benchmarks/configs).
# LATHE_AB_ARGS: extra lathe_cuda_bench arguments for every variant (e.g. "--dtype f16"); LATHE_AB_TAG:
# a word added to each line's and file's name (to tell such calls apart in one $OUT).
# Builds: LATHE_AB_PLUGINS="NAME=FILE.so.xz ..." runs every variant with each build of the CUDA plugin
# in turn (scripts/gpu/pack-plugin.sh NAME writes .devbin/plugin-NAME.so.xz; "NAME=" is the bundle's
# own), LATHE_AB_ROUNDS times (default 1; 2 alternates them: A B A B), each line tagged NAME (-rN).
# Each variant needs 40 s of the budget left to start.
# Output: $OUT/decode-ab.txt (one line per variant) and each bench's output. Environment: OUT,
# LATHE_GPU_BUDGET_S (default 300).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. scripts/gpu/lib.sh
gpu_begin 300
LOG="$OUT/decode-ab.log"
: > "$LOG"
gpu_unpack_bundle bin/lathe_cuda_bench || exit 2
gpu_bounds
SUMMARY="$OUT/decode-ab.txt"
echo "bounds: device copy ${COPY:-?} GB/s, BF16 GEMM ${GEMM:-?} TFLOP/s" >> "$SUMMARY"

variants_of() {
  if [ -n "${LATHE_AB_VARIANTS:-}" ]; then echo "$LATHE_AB_VARIANTS"; return; fi
  case $1 in
    int4) echo "defaults: tile-kernel:LATHE_CUDA_INT4_STREAM_MAX_M=0 stream-to-8:LATHE_CUDA_INT4_STREAM_MAX_M=8 stages-2:LATHE_CUDA_INT4_STREAM_STAGES=2 one-block:LATHE_CUDA_INT4_STREAM_BLOCKS=1" ;;
    fp8 | int8 | q8_0) echo "defaults: previous:LATHE_CUDA_W8_DECODE_MAX_M=0 one-block:LATHE_CUDA_W8_DECODE_BLOCKS=1" ;;
    *) echo "defaults:" ;;
  esac
}

# One pass over the formats, shapes and variants with the plugin now installed; TAG names it in the
# lines and files. Returns 1 when out of time.
run_variants() {
  local TAG=$1 q model v name setting out
  for q in ${LATHE_AB_QUANT-int4}; do
    for model in ${LATHE_AB_MODELS-llama-3.1-8b llama-3.1-70b}; do
      for v in $(variants_of "$q"); do
        name=${v%%:*}
        setting=${v#*:}
        [ "$(left)" -gt 40 ] || { log "out of time before $q $model $name${TAG:+ $TAG}"; return 1; }
        out="$OUT/decode-ab-$q-$model-$name${TAG:+-$TAG}.txt"
        qargs=()
        [ "$q" != none ] && qargs=(--quantization "$q")
        env ${setting:+"$setting"} timeout $(($(left) > 130 ? 120 : $(left) - 10)) "$BIN/lathe_cuda_bench" \
          --model "benchmarks/configs/$model" --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
          "${qargs[@]}" ${LATHE_AB_ARGS:-} --latency 512,128 --decode "${LATHE_AB_DECODE:-1,2,4,8}" \
          --skip prefill,throughput,profile --max-model-len 4096 > "$out" 2>&1
        log "$q $model $name${TAG:+ $TAG} (${setting:-defaults}): exit $?"
        echo "$q $model $name${TAG:+ $TAG} (${setting:-defaults}): $(grep -E '^(batch-1 decode|decode tok/s)' "$out" | tr '\n' ' ')" >> "$SUMMARY"
      done
    done
  done
}

# Builds of the CUDA plugin (LATHE_AB_PLUGINS), installed in turn under the unpacked bundle; the
# bundle's own is kept beside it so that "NAME=" can put it back.
BUNDLED="$DIR/lib/liblathe_cuda.so.bundled"
[ -f "$BUNDLED" ] || cp "$DIR/lib/liblathe_cuda.so" "$BUNDLED"
for round in $(seq 1 "${LATHE_AB_ROUNDS:-1}"); do
  for plugin in ${LATHE_AB_PLUGINS:-=}; do
    pname=${plugin%%=*}
    pfile=${plugin#*=}
    if [ -n "$pfile" ]; then
      xz -dc "$pfile" > "$DIR/lib/liblathe_cuda.so" || { log "cannot unpack $pfile"; exit 2; }
    else
      cp "$BUNDLED" "$DIR/lib/liblathe_cuda.so"
    fi
    tag=${LATHE_AB_TAG:-}
    [ -n "$pname" ] && tag=${tag:+$tag-}$pname
    [ "${LATHE_AB_ROUNDS:-1}" -gt 1 ] && tag=$tag-r$round
    run_variants "$tag" || break 2
  done
done
cp "$BUNDLED" "$DIR/lib/liblathe_cuda.so"
cat "$SUMMARY"
