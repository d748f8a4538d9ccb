#!/usr/bin/env bash
# Run HERE (the development machine), before a GPU run that compares against llama.cpp: builds
# llama.cpp's llama-bench with CUDA for the H200 (sm_90a) from the llama.cpp sources vendored in the
# llama-cpp-python source distribution on PyPI (the same pinned version and checksum as
# scripts/fetch-test-assets.sh), and installs it, stripped, with its own shared libraries
# (libllama.so, libggml*.so; never CUDA's) into .devbin/llamacpp.tar.xz, which the GPU run carries
# with .devbin (git-ignored), together with Llama 3's vocab-only GGUF file from the same sources.
# scripts/gpu/llamacpp-bench.sh unpacks and runs it. Not part of the product: the comparison figure
# of issue 14 only.
#
#   scripts/gpu/build-llamacpp-cuda.sh
# Build folder: $LATHE_LLAMACPP_BUILD, else <cache>/lathe/llamacpp-build (scripts/cache-dir.sh).
# Jobs: LATHE_BUILD_JOBS (default nproc). Idempotent: an unchanged build only re-packs.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/cache-dir.sh

# The pin of scripts/fetch-test-assets.sh.
VERSION=$(sed -n 's/^VERSION=//p' scripts/fetch-test-assets.sh)
SHA256=$(sed -n 's/^SHA256=//p' scripts/fetch-test-assets.sh)
SDIST=llama_cpp_python-$VERSION.tar.gz
CACHE=$(lathe_cache_dir LATHE_LLAMACPP_BUILD llamacpp-build)
SRC=$CACHE/src-$VERSION
BUILD=$CACHE/build-$VERSION-sm90a-real
JOBS=${LATHE_BUILD_JOBS:-$(nproc)}
DEST=.devbin/llamacpp.tar.xz

mkdir -p "$CACHE"
if [ ! -f "$SRC/.complete" ]; then
  if [ ! -f "$CACHE/$SDIST" ] || ! echo "$SHA256  $CACHE/$SDIST" | sha256sum -c --status; then
    echo "build-llamacpp-cuda: downloading the llama-cpp-python $VERSION source distribution from PyPI"
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --disable-pip-version-check \
      --dest "$CACHE" "llama-cpp-python==$VERSION"
  fi
  if ! echo "$SHA256  $CACHE/$SDIST" | sha256sum -c --status; then
    echo "build-llamacpp-cuda: checksum mismatch for $SDIST (expected $SHA256)" >&2
    exit 1
  fi
  rm -rf "$SRC" && mkdir -p "$SRC"
  tar -xzf "$CACHE/$SDIST" -C "$SRC" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
  touch "$SRC/.complete"
fi

LAUNCHER=()
if command -v ccache > /dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$(lathe_cache_dir LATHE_CCACHE_DIR ccache)}
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
# No driver here: libggml-cuda links the toolkit's stub libcuda.so, whose soname libcuda.so.1 the
# executable's link must find to check the symbols (-rpath-link; nothing is embedded).
STUBS=$CACHE/cuda-stubs
mkdir -p "$STUBS"
ln -sf "$(dirname "$(dirname "$CUDACXX")")/lib64/stubs/libcuda.so" "$STUBS/libcuda.so.1"
# 90a-real: machine code for the H200 only, with its arch-specific features (llama.cpp's CMake passes
# CMAKE_CUDA_ARCHITECTURES through; its sources pick the Hopper paths by __CUDA_ARCH__), and no PTX
# (plain 90a would embed PTX too: 41 MiB packed instead of 22). FA kernels for the f16 cache
# only (llama.cpp's default), no CPU-native tuning (the GPU machine's CPU differs).
nice -n 15 cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" \
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real -DGGML_NATIVE=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF \
  -DGGML_CUDA_NCCL=OFF -DGGML_BACKEND_DL=OFF -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$STUBS" > "$CACHE/configure.log" 2>&1 ||
  { tail -30 "$CACHE/configure.log" >&2; echo "build-llamacpp-cuda: configure failed" >&2; exit 1; }
nice -n 15 cmake --build "$BUILD" --target llama-bench -j "$JOBS"

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/llamacpp/bin" "$STAGE/llamacpp/lib"
strip -o "$STAGE/llamacpp/bin/llama-bench" "$BUILD/bin/llama-bench"
# Its own libraries (libllama*, libggml*), as ldd resolves them through the build's RPATH, and
# OpenMP's runtime (the GPU machine may lack it); never CUDA's or the C/C++ runtime.
ldd "$BUILD/bin/llama-bench" | awk '/=>/ {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libllama*.so* | libggml*.so* | libgomp.so*)
      strip --strip-unneeded -o "$STAGE/llamacpp/lib/$(basename "$lib")" "$(readlink -f "$lib")" ;;
  esac
done
# What the GPU machine must provide: the C/C++ runtime, CUDA 13's cudart and cuBLAS, and the driver's
# libcuda.so.1 (absent here: "not found" is expected for it alone).
EXTERNAL=$(env LD_LIBRARY_PATH="$STAGE/llamacpp/lib" ldd "$STAGE/llamacpp/bin/llama-bench" "$STAGE"/llamacpp/lib/*.so* |
  grep -v "^/" | grep -v "$STAGE" | awk '{print $1, $2, $3}' | sort -u)
echo "build-llamacpp-cuda: libraries from outside the bundle:" \
  "$(echo "$EXTERNAL" | awk '{print $1}' | grep -v "^linux-vdso\|^/lib" | sort -u | tr '\n' ' ')"
if echo "$EXTERNAL" | grep "not found" | grep -qv "^libcuda.so.1 "; then
  echo "build-llamacpp-cuda: unresolved libraries: $(echo "$EXTERNAL" | grep "not found")" >&2
  exit 1
fi
# Llama 3's vocabulary (llama.cpp's vocab-only file of the same sources): lathe_dummy_gguf gives the
# benchmark files its tokenizer, which llama.cpp needs to load a model.
mkdir -p "$STAGE/llamacpp/models"
cp "$SRC/models/ggml-vocab-llama-bpe.gguf" "$STAGE/llamacpp/models/"
echo "llama-cpp-python $VERSION (vendor/llama.cpp), CUDA sm_90a, $("$CUDACXX" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')" \
  > "$STAGE/llamacpp/VERSION"
mkdir -p .devbin
rm -f "$DEST"
tar -C "$STAGE" -cf - llamacpp | xz -T0 -9 > "$DEST"
echo "build-llamacpp-cuda: $DEST $(($(stat -c %s "$DEST") / 1048576)) MiB" \
  "(unpacked $(du -sm "$STAGE/llamacpp" | cut -f1) MiB: $(ls "$STAGE/llamacpp/lib" | tr '\n' ' '))"
