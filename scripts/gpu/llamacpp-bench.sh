#!/usr/bin/env bash
# Lathe against llama.cpp on the same GGUF file, batch-1 decode (issue 14), for the H200 machine:
#   bash scripts/gpu/llamacpp-bench.sh      (from the repository root; carry: .devbin)
# Prepare HERE first: scripts/gpu/pack-devbin.sh (Lathe's bundle, with lathe_dummy_gguf) and
# scripts/gpu/build-llamacpp-cuda.sh (llama.cpp's llama-bench for sm_90a, .devbin/llamacpp.tar.xz).
#
# For each GGUF type (LATHE_LLAMACPP_TYPES, default "q4_k_m q8_0 q4_0"), at the Llama-3.1-8B shape
# (benchmarks/configs/llama-3.1-8b):
#   1. lathe_dummy_gguf writes a file of random weights in the type's llama.cpp tensor mix, with
#      Llama 3's vocabulary (llama.cpp's vocab-only file, in the llama.cpp bundle) to
#      $LATHE_LLAMACPP_DIR (default /dev/shm when it has 12 GiB free, else /tmp);
#   2. llama-bench on it: tg128 (-p 0 -n 128 -ngl 99 -r 3), flash attention off and on (llama.cpp's
#      default, auto, is on for this GPU), at depth 0 (the issue's figure) and at depth 512 (the
#      context of Lathe's latency run);
#   3. lathe_cuda_bench on the same file: batch-1 latency (512 in, 128 out; the issue's figure) and
#      decode steps at batch 1 at contexts 64 and 512 (llama-bench's mean contexts);
#   4. the file is removed.
# Rooflines: weight bytes read per token (every tensor of the file but token_embd, as stored) plus
# the KV cache read at the run's mean context, over the device copy bandwidth measured in this run
# (lathe_gpu_bounds, $OUT/bounds.txt, reused when an earlier script wrote it).
# Output: $OUT/llamacpp-<type>-{gguf,llama-bench.json,lathe}.txt and $OUT/llamacpp-summary.txt
# (tok/s of each, Lathe / llama.cpp, % of roofline); the summary is printed last.
# Two calls when the carry limit cannot hold both bundles: LATHE_LLAMACPP_PHASE=lathe (Lathe's
# bundle and the vocabulary file LATHE_LLAMACPP_VOCAB only: writes the files, keeps them, runs Lathe),
# then, on the same machine while it is warm, LATHE_LLAMACPP_PHASE=llama (llama.cpp's bundle only:
# llama-bench on the kept files, then removes them); the summary is then run where both outputs are.
# Environment: LATHE_GPU_BUNDLE, LATHE_LLAMACPP_BUNDLE (default .devbin/llamacpp.tar.xz), OUT,
# LATHE_LLAMACPP_TYPES, LATHE_LLAMACPP_DIR, LATHE_LLAMACPP_VOCAB, LATHE_LLAMACPP_ARGS (extra
# llama-bench arguments), LATHE_LLAMACPP_CONFIG (another model shape: a folder with a config.json
# whose vocab_size is 128256),
# LATHE_GPU_BUDGET_S (default 480; about 60-90 s per type).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. scripts/gpu/lib.sh
gpu_begin 480
LOG="$OUT/llamacpp-bench.log"
: > "$LOG"
CONFIG=${LATHE_LLAMACPP_CONFIG:-benchmarks/configs/llama-3.1-8b}
# Where the files go: /dev/shm when it holds the largest (Q8_0, 8.5 GB) with room to spare (no disk
# writeback), else /tmp.
WORK=${LATHE_LLAMACPP_DIR:-/tmp}
if [ -z "${LATHE_LLAMACPP_DIR:-}" ] &&
  [ "$(df -B1 --output=avail /dev/shm 2> /dev/null | tail -1)" -gt $((12 * 1024 ** 3)) ] 2> /dev/null; then
  WORK=/dev/shm
fi

PHASE=${LATHE_LLAMACPP_PHASE:-both}
if [ "$PHASE" != llama ]; then
gpu_unpack_bundle bin/lathe_dummy_gguf || exit 2
fi
if [ "$PHASE" != llama ] && [ ! -x "$BIN/lathe_dummy_gguf" ]; then
  log "the bundle has no bin/lathe_dummy_gguf: run scripts/gpu/pack-devbin.sh again"
  exit 2
fi
LLAMA_BUNDLE=${LATHE_LLAMACPP_BUNDLE:-.devbin/llamacpp.tar.xz}
LLAMA=/tmp/llamacpp
if [ "$PHASE" != lathe ] && [ ! -f "$LLAMA_BUNDLE" ]; then
  log "no $LLAMA_BUNDLE: run scripts/gpu/build-llamacpp-cuda.sh on the development machine and carry .devbin"
  exit 2
fi
[ "$PHASE" != lathe ] && rm -rf "$LLAMA" && mkdir -p /tmp && xz -dc "$LLAMA_BUNDLE" | tar -C /tmp -xf -
LLAMA_ENV=(env "LD_LIBRARY_PATH=$LLAMA/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}")
log "llama.cpp: $(cat "$LLAMA/VERSION" 2> /dev/null)"
VOCAB=${LATHE_LLAMACPP_VOCAB:-$LLAMA/models/ggml-vocab-llama-bpe.gguf}
if [ "$PHASE" != llama ] && [ ! -f "$VOCAB" ]; then
  log "no vocabulary at $VOCAB (set LATHE_LLAMACPP_VOCAB to a GGUF file with Llama 3's 128256 tokens)"
  exit 2
fi

if [ "$PHASE" != llama ] && [ ! -s "$OUT/bounds.txt" ]; then
  log "== lathe_gpu_bounds"
  timeout 180 "$BIN/lathe_gpu_bounds" > "$OUT/bounds.txt" 2>&1
fi
gpu_read_bounds "$OUT/bounds.txt"
mkdir -p "$WORK"
log "copy bandwidth ${COPY:-?} GB/s; $(nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader 2> /dev/null)"

for t in ${LATHE_LLAMACPP_TYPES-q4_k_m q8_0 q4_0}; do
  [ "$(left)" -gt 60 ] || { log "out of time before $t"; break; }
  f=$WORK/lathe-dummy-$(basename "$CONFIG")-$t.gguf
  if [ "$PHASE" != llama ]; then
  log "== $t: writing $f ($(df -h --output=avail "$WORK" | tail -1 | tr -d ' ') free there)"
  timeout 120 "$BIN/lathe_dummy_gguf" --config "$CONFIG" --type "$t" --vocab "$VOCAB" \
    --output "$f" > "$OUT/llamacpp-$t-gguf.txt" 2>&1
  rc=$?
  log "lathe_dummy_gguf exit $rc: $(tr '\n' ' ' < "$OUT/llamacpp-$t-gguf.txt")"
  [ $rc = 0 ] || { rm -f "$f"; continue; }
  fi
  [ -f "$f" ] || { log "no $f (the lathe phase ran on another machine?)"; continue; }

  if [ "$PHASE" != lathe ]; then
  log "== $t: llama-bench"
  # shellcheck disable=SC2086
  timeout $(($(left) > 150 ? 120 : $(left) - 30)) "${LLAMA_ENV[@]}" "$LLAMA/bin/llama-bench" -m "$f" \
    -p 0 -n 128 -ngl 99 -r 3 -fa 0,1 -d 0,512 -o json ${LATHE_LLAMACPP_ARGS:-} \
    > "$OUT/llamacpp-$t-llama-bench.json" 2> "$OUT/llamacpp-$t-llama-bench.err"
  log "llama-bench exit $? ($(grep -c '"avg_ts"' "$OUT/llamacpp-$t-llama-bench.json" 2> /dev/null) results)"
  tail -3 "$OUT/llamacpp-$t-llama-bench.err" | tee -a "$LOG"
  fi

  if [ "$PHASE" != llama ] && [ "$(left)" -gt 40 ]; then
    log "== $t: lathe_cuda_bench"
    timeout $(($(left) > 170 ? 150 : $(left) - 15)) "$BIN/lathe_cuda_bench" --model "$f" \
      --load-format auto --copy-gbps "${COPY:-0}" --latency 512,128 --decode 1 --context 64,512 \
      --skip prefill,throughput,profile > "$OUT/llamacpp-$t-lathe.txt" 2>&1
    log "lathe_cuda_bench exit $?"
    grep -E '^(weights:|batch-1 decode|decode tok/s|KV cache:)|lathe_cuda_bench:' "$OUT/llamacpp-$t-lathe.txt" | tee -a "$LOG"
  fi
  [ "$PHASE" = lathe ] || rm -f "$f"
done
[ "$PHASE" = both ] || exit 0

echo "==== llamacpp-bench summary" | tee -a "$LOG"
python3 scripts/gpu/llamacpp_summary.py --out "$OUT" --config "$CONFIG" --copy-gbps "${COPY:-0}" \
  --types "${LATHE_LLAMACPP_TYPES-q4_k_m q8_0 q4_0}" | tee "$OUT/llamacpp-summary.txt" | tee -a "$LOG"
