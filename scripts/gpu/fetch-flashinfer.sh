#!/usr/bin/env bash
# Puts FlashInfer's header-only CUDA templates (and the CCCL headers they need, newer than the CUDA
# 13.0 toolkit's) into Lathe's dependency cache, from the PyPI wheel flashinfer-python. The CUDA
# backend compiles its paged-prefill attention from them (engine/backend/cuda/CMakeLists.txt).
#
#   cache: $LATHE_DEPS_DIR, else $XDG_CACHE_HOME/lathe/deps, else ~/.cache/lathe/deps
#   result: <cache>/flashinfer-<version>/include      (flashinfer/*.cuh)
#           <cache>/flashinfer-<version>/libcudacxx   (cuda/*, CCCL 3.6 libcu++)
# Idempotent; prints the folder. Needs python3 -m pip and unzip (scripts/install-deps.sh has both).
set -euo pipefail

VERSION=0.7.4
if [ -n "${LATHE_DEPS_DIR:-}" ]; then DIR=$LATHE_DEPS_DIR
elif [ -n "${XDG_CACHE_HOME:-}" ]; then DIR=$XDG_CACHE_HOME/lathe/deps
else DIR=$HOME/.cache/lathe/deps; fi
DEST=$DIR/flashinfer-$VERSION

if [ -f "$DEST/include/flashinfer/attention/prefill.cuh" ] && [ -d "$DEST/libcudacxx/cuda" ]; then
  echo "$DEST"
  exit 0
fi

mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetch-flashinfer: downloading flashinfer-python==$VERSION from PyPI" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$TMP" \
  "flashinfer-python==$VERSION" >&2
WHEEL=$(ls "$TMP"/flashinfer_python-*.whl)
unzip -q -o "$WHEEL" 'flashinfer/data/include/*' 'flashinfer/data/cccl/libcudacxx/include/*' \
  'flashinfer_python-*.dist-info/licenses/*' -d "$TMP/x" >&2
rm -rf "$DEST.partial"
mkdir -p "$DEST.partial"
mv "$TMP/x/flashinfer/data/include" "$DEST.partial/include"
mv "$TMP/x/flashinfer/data/cccl/libcudacxx/include" "$DEST.partial/libcudacxx"
mv "$TMP"/x/flashinfer_python-*.dist-info/licenses "$DEST.partial/licenses"  # Apache-2.0 (FlashInfer, CCCL)
rm -rf "$DEST"
mv "$DEST.partial" "$DEST"
echo "$DEST"
