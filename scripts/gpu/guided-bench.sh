#!/usr/bin/env bash
# Constrained decoding's cost per step on the GPU (issue 18), for the H200 machine, after
# scripts/gpu/run-all.sh has unpacked the bundle (or standalone: it unpacks it itself):
#   bash scripts/gpu/guided-bench.sh      (from the repository root; carry: .devbin)
# `lathe bench latency` on Qwen2.5-7B shape (dummy weights) with the Qwen2.5 tokenizer (152k
# tokens: .devbin/qwen-tokenizer/, written by `lathe quantize` from the Qwen2.5-Coder GGUF, see
# docs/PERFORMANCE.md), at batch 1 and 64: the batch decodes 128 tokens unconstrained, then with every
# request constrained to benchmarks/schemas/person.json (one shared grammar, as a server sees one
# schema sent by many clients); the TPOT difference is the overhead.
# Environment: LATHE_GPU_BUNDLE, OUT, LATHE_GUIDED_BATCHES (default "1 64"), LATHE_GPU_BUDGET_S
# (default 240).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_begin 240
gpu_unpack_bundle bin/lathe || exit 2
TOK=.devbin/qwen-tokenizer
[ -f "$TOK/tokenizer.json" ] || { echo "guided: no $TOK/tokenizer.json" | tee -a "$OUT/guided-summary.txt"; exit 2; }
MODEL=/tmp/lathe-qwen7b-tok
rm -rf "$MODEL" && mkdir -p "$MODEL"
cp benchmarks/configs/qwen2.5-7b/config.json "$TOK"/* "$MODEL"/
: > "$OUT/guided-summary.txt"
for b in ${LATHE_GUIDED_BATCHES:-1 64}; do
  [ "$(left)" -gt 40 ] || { echo "guided: out of time before batch $b" | tee -a "$OUT/guided-summary.txt"; break; }
  timeout $(( $(left) - 10 )) "$DIR/bin/lathe" bench latency -m "$MODEL" --load-format dummy \
    --device cuda --max-model-len 1024 --batch-size "$b" --input-len 128 --output-len 128 \
    --num-iters-warmup 1 --num-iters 3 --guided-json benchmarks/schemas/person.json \
    --json "$OUT/guided-b$b.json" > "$OUT/guided-b$b.txt" 2>&1
  echo "guided batch $b: exit $? $(grep -m1 'Constrained-decoding overhead' "$OUT/guided-b$b.txt")" | tee -a "$OUT/guided-summary.txt"
done
