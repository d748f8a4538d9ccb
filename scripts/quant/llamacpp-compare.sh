#!/usr/bin/env bash
# Lathe against llama.cpp on this machine's CPU (docs/QUANTIZATION.md, "Against llama.cpp"):
#  1. q4_k_m: `lathe quantize` and llama.cpp's `llama-quantize ... Q4_K_M` (no importance matrix)
#     quantize the same 16-bit GGUF; both outputs are measured with `lathe eval OUT --reference
#     ref-f16` on the same windows; the per-tensor types and bytes of the two files are compared.
#  2. perplexity: `lathe eval` and `llama-perplexity` on the same GGUF files and text, scoring the
#     same tokens (llama-perplexity scores the second half of each n_ctx chunk: `lathe eval --ctx N
#     --stride N --score-from N/2+1`); Lathe's own plan (every target of the windows) is shown too.
# llama.cpp is built (CPU only: llama-quantize and llama-perplexity) from the llama.cpp sources in
# the llama-cpp-python sdist of PyPI (the version scripts/fetch-test-assets.sh pins), in
# $LLAMA_BUILD (default ~/.cache/lathe/llama.cpp-build); Lathe itself does not depend on it.
# The 16-bit inputs: ref-f16 = `lathe quantize MODEL.gguf -s f16` (a Hugging Face folder, the
# reference of every eval) and ref-f16.gguf = the same weights as an F16 GGUF written by
# scripts/quant/gguf_to_f16.py with gguf-py (Lathe writes f16 only as a folder); the script checks
# that the two are the same model (KLD of one against the other).
# Usage: scripts/quant/llamacpp-compare.sh [WORK_DIR]   (env: LATHE, GGUF, WINDOWS, CTX, TEXT,
#        PPL_WINDOWS, THREADS, LLAMA_BUILD)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
LATHE=${LATHE:-build/release/app/lathe}
WORK=${1:-/tmp/lathe-llamacpp}
WINDOWS=${WINDOWS:-2}          # KLD windows
PPL_WINDOWS=${PPL_WINDOWS:-4}  # perplexity windows (chunks)
CTX=${CTX:-512}
THREADS=${THREADS:-2}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/lathe
MODELS=${LATHE_MODEL_DIR:-$CACHE/models}
TEXTS=${LATHE_TEXT_DIR:-$CACHE/text}
GGUF=${GGUF:-$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf}
TEXT=${TEXT:-$TEXTS/canterbury/alice29.txt}
LLAMA_BUILD=${LLAMA_BUILD:-$CACHE/llama.cpp-build}
VENV=${LATHE_QUANT_VENV:-$CACHE/venv-quant}

VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

build_llamacpp() {
  local src=$LLAMA_BUILD/llama_cpp_python-$VERSION/vendor/llama.cpp bin=$LLAMA_BUILD/build/bin
  if [ -x "$bin/llama-quantize" ] && [ -x "$bin/llama-perplexity" ]; then return; fi
  mkdir -p "$LLAMA_BUILD"
  if [ ! -f "$LLAMA_BUILD/$SDIST" ]; then
    echo "== downloading the llama-cpp-python $VERSION sdist from PyPI" >&2
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
      --disable-pip-version-check --dest "$LLAMA_BUILD" "llama-cpp-python==$VERSION"
  fi
  echo "$SHA256  $LLAMA_BUILD/$SDIST" | sha256sum -c --status ||
    { echo "llamacpp-compare: checksum mismatch for $SDIST (expected $SHA256)" >&2; exit 1; }
  [ -f "$src/CMakeLists.txt" ] ||
    tar -xzf "$LLAMA_BUILD/$SDIST" -C "$LLAMA_BUILD" "llama_cpp_python-$VERSION/vendor/llama.cpp"
  echo "== building llama-quantize and llama-perplexity (CPU) in $LLAMA_BUILD/build" >&2
  nice -n 19 cmake -S "$src" -B "$LLAMA_BUILD/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_CUDA=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF >"$LLAMA_BUILD/configure.log"
  nice -n 19 cmake --build "$LLAMA_BUILD/build" -j2 --target llama-quantize llama-perplexity \
    >"$LLAMA_BUILD/build.log"
}

build_llamacpp
BIN=$LLAMA_BUILD/build/bin
[ -x "$VENV/bin/python" ] || { echo "llamacpp-compare: run scripts/fetch-quant-tools.sh" >&2; exit 1; }
mkdir -p "$WORK"
REF=$WORK/ref-f16
REF_GGUF=$WORK/ref-f16.gguf
[ -d "$REF" ] || nice -n 19 "$LATHE" quantize "$GGUF" -s f16 -o "$REF" >&2
[ -f "$REF_GGUF" ] || nice -n 19 "$VENV/bin/python" scripts/quant/gguf_to_f16.py "$GGUF" "$REF_GGUF" >&2

# 1. q4_k_m from the same F16 GGUF (and Lathe's from the ref-f16 folder, as quality-table.sh).
if [ ! -f "$WORK/llama-q4_k_m.gguf" ]; then
  /usr/bin/time -f "%U %S %e" -o "$WORK/time-llama" nice -n 19 "$BIN/llama-quantize" \
    "$REF_GGUF" "$WORK/llama-q4_k_m.gguf" Q4_K_M "$THREADS" >"$WORK/llama-quantize.log" 2>&1
fi
if [ ! -f "$WORK/lathe-q4_k_m.gguf" ]; then
  /usr/bin/time -f "%U %S %e" -o "$WORK/time-lathe" nice -n 19 "$LATHE" quantize "$REF_GGUF" \
    -s q4_k_m -o "$WORK/lathe-q4_k_m.gguf" >"$WORK/lathe-quantize.log" 2>&1
fi
[ -f "$WORK/lathe-folder-q4_k_m.gguf" ] || nice -n 19 "$LATHE" quantize "$REF" -s q4_k_m \
  -o "$WORK/lathe-folder-q4_k_m.gguf" >"$WORK/lathe-folder-quantize.log" 2>&1

KLD=(--reference "$REF" --text "$TEXT" --ctx "$CTX" --stride "$CTX" --max-windows "$WINDOWS"
     --device cpu --threads "$THREADS" --json)
for m in llama lathe lathe-folder ref-gguf; do
  case $m in ref-gguf) out=$REF_GGUF ;; *) out=$WORK/$m-q4_k_m.gguf ;; esac
  [ -s "$WORK/kld-$m.json" ] || nice -n 19 "$LATHE" eval "$out" "${KLD[@]}" >"$WORK/kld-$m.json"
done

# 2. perplexity of the same files: llama-perplexity (n_ctx CTX, one sequence per batch) against
# lathe eval on the tokens it scores, and on every target of the same windows. llama-f32 is
# llama.cpp's q4_k_m dequantized to F32 (gguf-py): the same weights, but llama.cpp's CPU backend
# then multiplies in float32 instead of quantizing the activations to 8 bits (Q8_K / Q8_0 blocks),
# which is what it does for quantized weights and Lathe's CPU runner does not.
HALF=$((CTX / 2 + 1))
[ -f "$WORK/llama-q4_k_m-f32.gguf" ] || nice -n 19 "$VENV/bin/python" scripts/quant/gguf_to_f16.py \
  --f32 "$WORK/llama-q4_k_m.gguf" "$WORK/llama-q4_k_m-f32.gguf" >&2
for m in source ref-gguf llama llama-f32; do
  case $m in
    source) f=$GGUF ;; ref-gguf) f=$REF_GGUF ;; llama) f=$WORK/llama-q4_k_m.gguf ;;
    llama-f32) f=$WORK/llama-q4_k_m-f32.gguf ;;
  esac
  [ -s "$WORK/ppl-llama-$m.log" ] || nice -n 19 "$BIN/llama-perplexity" -m "$f" -f "$TEXT" \
    -c "$CTX" -b "$CTX" --chunks "$PPL_WINDOWS" -t "$THREADS" >"$WORK/ppl-llama-$m.log" 2>&1
  [ -s "$WORK/ppl-lathe-$m.json" ] || nice -n 19 "$LATHE" eval "$f" --text "$TEXT" --ctx "$CTX" \
    --stride "$CTX" --score-from "$HALF" --max-windows "$PPL_WINDOWS" --device cpu \
    --threads "$THREADS" --json >"$WORK/ppl-lathe-$m.json"
  [ -s "$WORK/ppl-lathe-all-$m.json" ] || nice -n 19 "$LATHE" eval "$f" --text "$TEXT" \
    --ctx "$CTX" --stride "$CTX" --max-windows "$PPL_WINDOWS" --device cpu --threads "$THREADS" \
    --json >"$WORK/ppl-lathe-all-$m.json"
done

"$VENV/bin/python" "$ROOT/scripts/quant/llamacpp_compare_table.py" "$WORK" "$GGUF"
