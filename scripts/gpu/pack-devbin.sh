#!/usr/bin/env bash
# Run HERE (the development machine), before a run on the GPU machine: builds Lathe's GPU binaries
# and packs them with the shared libraries the GPU machine lacks (Qt 6, ICU 72, sentencepiece, ...)
# into .devbin/lathe-gpu.tar.xz, which the GPU run carries (the folder is git-ignored; the device
# tool's carry limit is 64 MiB in all, so binaries are stripped and the bundle xz-compressed; the
# rest of the limit carries the last part of the default model, stage-default-model.sh).
#
#   scripts/gpu/pack-devbin.sh [BUILD_DIR]      (default build/cuda, configured with LATHE_CUDA=ON)
# Then on the GPU machine: bash scripts/gpu/run-all.sh   (carry: .devbin)
#
# Packed: every test labelled "gpu" in the build's CTest list, lathe_gpu_bounds, lathe_cuda_bench,
# lathe_dummy_gguf (GGUF files of random weights, scripts/gpu/llamacpp-bench.sh), and the lathe CLI
# when it builds (run-all.sh's `lathe bench` and scripts/gpu/quantize-bench.sh need it); in lib/,
# Lathe's own liblathe_engine.so and the CUDA plugin liblathe_cuda.so side by side (the engine's
# plugin loader looks next to liblathe_engine.so, so test_engine_gpu and the CLI find it there), and
# whatever else ldd resolves outside
# glibc/libstdc++ and the CUDA toolkit (the GPU machine has CUDA 13.0 in /usr/local/cuda/lib64).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/cuda}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_CUDA=ON -DLATHE_CUDA_ARCHITECTURES=90a \
    -DLATHE_BUILD_GUI=OFF
fi

GPU_TESTS=$(cd "$BUILD" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
echo "pack-devbin: gpu tests: $(echo $GPU_TESTS)"
cmake --build "$BUILD" --target lathe_cuda lathe_gpu_bounds lathe_cuda_bench lathe_dummy_gguf -j "${LATHE_BUILD_JOBS:-$(nproc)}"
BUILT_TESTS=""
for t in $GPU_TESTS; do  # a test that does not build (work in progress elsewhere) is left out, loudly
  if cmake --build "$BUILD" --target "$t" -j "${LATHE_BUILD_JOBS:-$(nproc)}"; then BUILT_TESTS="$BUILT_TESTS $t"; else
    echo "pack-devbin: warning: $t does not build; packing without it" >&2
  fi
done
GPU_TESTS=$BUILT_TESTS
HAVE_CLI=0
if cmake --build "$BUILD" --target lathe -j "${LATHE_BUILD_JOBS:-$(nproc)}"; then HAVE_CLI=1; else
  echo "pack-devbin: the lathe CLI does not build; packing without it (run-all.sh skips 'lathe bench')" >&2
fi

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib"
bins=()
for t in $GPU_TESTS; do
  f=$(find "$BUILD/tests" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$f" ] || { echo "pack-devbin: test binary $t not found" >&2; exit 1; }
  bins+=("$f")
done
bins+=("$BUILD/engine/backend/cuda/lathe_gpu_bounds" "$BUILD/engine/backend/cuda/lathe_cuda_bench"
  "$BUILD/engine/quant/lathe_dummy_gguf")
[ "$HAVE_CLI" = 1 ] && bins+=("$BUILD/app/lathe")
for b in "${bins[@]}"; do strip -o "$STAGE/bin/$(basename "$b")" "$b"; done
# Lathe's libraries (cmake/LatheLayout.cmake puts both in <build>/lib).
for l in liblathe_engine.so liblathe_cuda.so; do
  [ -f "$BUILD/lib/$l" ] || { echo "pack-devbin: $BUILD/lib/$l is missing" >&2; exit 1; }
  strip --strip-unneeded -o "$STAGE/lib/$l" "$BUILD/lib/$l"
done
echo "$GPU_TESTS" | tr ' ' '\n' | sed '/^$/d' > "$STAGE/bin/gpu-tests.txt"

# Shared libraries: everything outside the C/C++ runtime and CUDA, plus ICU's data library.
for b in "${bins[@]}" "$BUILD/lib/liblathe_engine.so" "$BUILD/lib/liblathe_cuda.so"; do ldd "$b"; done |
    awk '/=>/ {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    liblathe_*) ;;
    libcuda*|libcublas*|libcudart*|libcusolver*|libcusparse*|libnvrtc*|libnvJitLink*) ;;
    *) cp -L "$lib" "$STAGE/lib/" ;;
  esac
done
for icu in "$STAGE"/lib/libicuuc.so.*; do
  [ -e "$icu" ] || continue
  v=${icu##*.so.}
  for dep in libicudata.so.$v libicui18n.so.$v; do
    [ -e "$STAGE/lib/$dep" ] || cp -L "/usr/lib/x86_64-linux-gnu/$dep" "$STAGE/lib/" 2>/dev/null || true
  done
done
git rev-parse HEAD > "$STAGE/bin/commit.txt" 2>/dev/null || true
git status --short >> "$STAGE/bin/commit.txt" 2>/dev/null || true

mkdir -p .devbin
rm -f .devbin/lathe-gpu.tar.xz
# -9: a 64 MiB dictionary spans several files (the engine and the CUDA kernels are shared libraries
# now, stored once anyway; -9 still helps across the test binaries); one xz block, so -T0 does not
# split it.
tar -C "$STAGE" -cf - bin lib | xz -T0 -9 > .devbin/lathe-gpu.tar.xz
SIZE=$(stat -c %s .devbin/lathe-gpu.tar.xz)
echo "pack-devbin: .devbin/lathe-gpu.tar.xz $((SIZE / 1048576)) MiB ($(ls "$STAGE/bin" | wc -l) files in bin, $(ls "$STAGE/lib" | wc -l) libraries)"
if [ "$SIZE" -gt $((56 * 1048576)) ]; then
  echo "pack-devbin: warning: the bundle leaves little of the 64 MiB carry limit for the working tree" >&2
fi
