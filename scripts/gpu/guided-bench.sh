#!/usr/bin/env bash
# Constrained decoding's cost per step on the GPU (issue 18), for the H200 machine, after
# scripts/gpu/run-all.sh has unpacked the bundle (or standalone: it unpacks it itself):
#   bash scripts/gpu/guided-bench.sh      (from the repository root; carry: .devbin)
# `lathe bench latency` on Qwen2.5-7B shape (dummy weights) with the Qwen2.5 tokenizer (152k
# tokens: .devbin/qwen-tokenizer/, written by `lathe quantize` from the Qwen2.5-Coder GGUF, see
# docs/PERFORMANCE.md), at batch 1 and 64: the batch decodes 128 tokens unconstrained, then with every
# request constrained to benchmarks/schemas/person.json (one shared grammar, as a server sees one
# schema sent by many clients); the TPOT difference is the overhead.
# Then, at batch 64, the same with the constrained-decoding switches of cuda_switches.h set back
# all together (the path before them) and one at a time, in the same run: A/B lines
# "guided batch 64 [old path: all three 0]: ...", "[LATHE_CUDA_MASK_LOOKUP_LATE=0]", ...
# Environment: LATHE_GPU_BUNDLE, OUT, LATHE_GUIDED_BATCHES (default "1 64"), LATHE_GUIDED_AB
# (default 1; 0: no A/B runs), LATHE_GPU_BUDGET_S (default 300).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_begin 300
gpu_unpack_bundle bin/lathe || exit 2
TOK=.devbin/qwen-tokenizer
[ -f "$TOK/tokenizer.json" ] || { echo "guided: no $TOK/tokenizer.json" | tee -a "$OUT/guided-summary.txt"; exit 2; }
MODEL=/tmp/lathe-qwen7b-tok
rm -rf "$MODEL" && mkdir -p "$MODEL"
cp benchmarks/configs/qwen2.5-7b/config.json "$TOK"/* "$MODEL"/
: > "$OUT/guided-summary.txt"

# run_guided BATCH TAG LABEL [ENV=VALUE...]: one `lathe bench latency` (unconstrained, then
# constrained) under the given environment; its output in $OUT/guided-b<BATCH><TAG>.txt and .json,
# one summary line (with " [LABEL]" when LABEL is not empty).
run_guided() {
  local b=$1 tag=$2 label=$3
  shift 3
  [ -n "$label" ] && label=" [$label]"
  [ "$(left)" -gt 40 ] || { echo "guided: out of time before batch $b$label" | tee -a "$OUT/guided-summary.txt"; return 1; }
  env "$@" timeout $(( $(left) - 10 )) "$DIR/bin/lathe" bench latency -m "$MODEL" --load-format dummy \
    --device cuda --max-model-len 1024 --batch-size "$b" --input-len 128 --output-len 128 \
    --num-iters-warmup 1 --num-iters 3 --guided-json benchmarks/schemas/person.json \
    --json "$OUT/guided-b$b$tag.json" > "$OUT/guided-b$b$tag.txt" 2>&1
  echo "guided batch $b$label: exit $? $(grep -m1 'Constrained-decoding overhead' "$OUT/guided-b$b$tag.txt")" | tee -a "$OUT/guided-summary.txt"
}

for b in ${LATHE_GUIDED_BATCHES:-1 64}; do
  run_guided "$b" "" "" || break
done
if [ "${LATHE_GUIDED_AB:-1}" != 0 ]; then
  run_guided 64 -old "old path: all three 0" LATHE_CUDA_MASK_LOOKUP_LATE=0 LATHE_CUDA_MASK_CACHE=0 \
    LATHE_CUDA_SAMPLER_MASKS=0
  run_guided 64 -nolate "LATHE_CUDA_MASK_LOOKUP_LATE=0" LATHE_CUDA_MASK_LOOKUP_LATE=0
  run_guided 64 -nocache "LATHE_CUDA_MASK_CACHE=0" LATHE_CUDA_MASK_CACHE=0
  run_guided 64 -nosampler "LATHE_CUDA_SAMPLER_MASKS=0" LATHE_CUDA_SAMPLER_MASKS=0
  # The default path again, last: drift over the run shows as a difference from the first line.
  run_guided 64 -again "defaults again"
fi
