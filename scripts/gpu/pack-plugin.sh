#!/usr/bin/env bash
# Run HERE (the development machine): packs this build's CUDA plugin (liblathe_cuda.so, stripped,
# xz) as .devbin/plugin-NAME.so.xz, for a same-run A/B of builds on the GPU machine without a
# second bundle (a bundle is ~23 MiB of the carry's 64; a plugin ~7.5):
#   scripts/gpu/pack-plugin.sh NAME [BUILD_DIR]     (default build/cuda, as pack-devbin.sh)
# e.g. pack the committed build as "before", change the kernels, run pack-devbin.sh, then on the
# GPU machine (carry: .devbin):
#   LATHE_AB_PLUGINS="before=.devbin/plugin-before.so.xz after=" LATHE_AB_ROUNDS=2 \
#     bash scripts/gpu/decode-ab.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME=${1:?usage: scripts/gpu/pack-plugin.sh NAME [BUILD_DIR]}
BUILD=${2:-build/cuda}
case $NAME in *[!A-Za-z0-9_.-]*) echo "pack-plugin: NAME takes letters, digits, . _ - only" >&2; exit 2 ;; esac
cmake --build "$BUILD" --target lathe_cuda -j "${LATHE_BUILD_JOBS:-$(nproc)}"
mkdir -p .devbin
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
strip --strip-unneeded -o "$tmp" "$BUILD/lib/liblathe_cuda.so"
xz -T0 -c "$tmp" > ".devbin/plugin-$NAME.so.xz"
echo "pack-plugin: .devbin/plugin-$NAME.so.xz $(($(stat -c %s ".devbin/plugin-$NAME.so.xz") / 1024 / 1024)) MiB"
