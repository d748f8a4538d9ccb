#!/usr/bin/env bash
# Configures and builds Lathe in build/release (CUDA backend included when a toolkit is found).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/lathe/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Paths relative to the checkout, so that other checkouts (git worktrees) share the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
JOBS=${LATHE_BUILD_JOBS:-$(nproc)}
if [ ! -f build/release/build.ninja ]; then cmake --preset release >/dev/null; fi
cmake --build build/release -j "$JOBS"
