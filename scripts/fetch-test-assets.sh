#!/usr/bin/env bash
# Puts test assets too big to commit into the test-asset cache: real tokenizer vocabularies
# (llama.cpp's vocab-only GGUF files for Llama 3, Qwen2 and Llama 2, with the token ids the
# models' own Hugging Face tokenizers give for llama.cpp's test texts). They ship inside the
# source distribution of llama-cpp-python on PyPI, pinned by version and checksum.
# Cache: $LATHE_TEST_ASSETS, else $XDG_CACHE_HOME/lathe/test-assets, else ~/.cache/lathe/test-assets.
# Idempotent. Tests that need these skip themselves (with a message) when they are absent.
set -euo pipefail

VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
VOCABS=(llama-bpe qwen2 llama-spm)

. "$(dirname "$0")/cache-dir.sh"
DIR=$(lathe_cache_dir LATHE_TEST_ASSETS test-assets)
DEST=$DIR/llama.cpp-vocab
STAMP=$DEST/.complete-$VERSION

if [ -f "$STAMP" ]; then
  echo "fetch-test-assets: $DEST is present"
  exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetch-test-assets: downloading the llama-cpp-python $VERSION source distribution from PyPI"
# --no-binary names the package only: pip still prepares its metadata, and its build tools
# may come as wheels.
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --disable-pip-version-check \
  --dest "$TMP" "llama-cpp-python==$VERSION"
if ! echo "$SHA256  $TMP/$SDIST" | sha256sum -c --status; then
  echo "fetch-test-assets: checksum mismatch for $SDIST (expected $SHA256)" >&2
  exit 1
fi
members=()
for v in "${VOCABS[@]}"; do
  for ext in "" .inp .out; do
    members+=("llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-$v.gguf$ext")
  done
done
tar -xzf "$TMP/$SDIST" -C "$TMP" "${members[@]}"
mkdir -p "$DEST"
mv "$TMP/llama_cpp_python-$VERSION/vendor/llama.cpp/models/"* "$DEST/"
touch "$STAMP"
echo "fetch-test-assets: $DEST"
