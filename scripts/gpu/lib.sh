# Shared steps of the GPU scripts in scripts/gpu/ (sourced, not run):
#   . "$(dirname "$0")/lib.sh"
# Nothing here runs on sourcing; each script calls what it needs. The scripts run under
# `set -uo pipefail` (no -e: one failed step must not cost the others), so every function returns a
# status and the caller decides.

# gpu_begin [BUDGET_S]: the results folder OUT (default /tmp/lathe-gpu-out) exists; BUDGET is
# LATHE_GPU_BUDGET_S, else BUDGET_S (seconds the whole script may take); START is now, for left()
# and log().
gpu_begin() {
  OUT=${OUT:-/tmp/lathe-gpu-out}
  mkdir -p "$OUT"
  BUDGET=${LATHE_GPU_BUDGET_S:-${1:-0}}
  START=$(date +%s)
}

# Seconds left of BUDGET since START (negative once over).
left() { echo $((BUDGET - ($(date +%s) - START))); }

# One line to stdout, and with a time stamp and the seconds since START to $LOG when LOG is set.
log() {
  if [ -n "${LOG:-}" ]; then
    echo "[$(date +%H:%M:%S) +$(($(date +%s) - START))s] $*" | tee -a "$LOG"
  else
    echo "$*"
  fi
}

# gpu_unpack_bundle [MARKER]: the GPU bundle (scripts/gpu/pack-devbin.sh's LATHE_GPU_BUNDLE, default
# .devbin/lathe-gpu.tar.xz, relative to the repository root) unpacked into DIR=/tmp/lathe-gpu, unless
# $DIR/MARKER is already executable there (an earlier script of the same call unpacked it); without
# MARKER always afresh. Sets DIR, BIN ($DIR/bin) and BUNDLE, and puts $DIR/lib (liblathe_engine.so and
# the CUDA plugin liblathe_cuda.so side by side: binaries find the engine through LD_LIBRARY_PATH, the
# engine loads the plugin from its own folder; LATHE_CUDA_PLUGIN names another file) and the CUDA
# toolkit's libraries first on LD_LIBRARY_PATH. Returns 2, saying so, when the bundle is missing.
gpu_unpack_bundle() {
  BUNDLE=${LATHE_GPU_BUNDLE:-.devbin/lathe-gpu.tar.xz}
  DIR=/tmp/lathe-gpu
  BIN=$DIR/bin
  if [ -z "${1:-}" ] || [ ! -x "$DIR/$1" ]; then
    if [ ! -f "$BUNDLE" ]; then
      log "no $BUNDLE: run scripts/gpu/pack-devbin.sh on the development machine and carry .devbin"
      return 2
    fi
    rm -rf "$DIR" && mkdir -p "$DIR" && xz -dc "$BUNDLE" | tar -C "$DIR" -xf -
  fi
  export LD_LIBRARY_PATH="$DIR/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
}

# gpu_bounds: COPY and GEMM (gpu_read_bounds) from $OUT/bounds.txt, measured first by
# $BIN/lathe_gpu_bounds (gpu_unpack_bundle) unless an earlier script of the same call wrote it.
gpu_bounds() {
  if [ ! -s "$OUT/bounds.txt" ]; then
    timeout 180 "$BIN/lathe_gpu_bounds" > "$OUT/bounds.txt" 2>&1
  fi
  gpu_read_bounds "$OUT/bounds.txt"
}

# gpu_read_bounds FILE: COPY (device copy bandwidth, GB/s, read+write) and GEMM (BF16 GEMM,
# TFLOP/s) from lathe_gpu_bounds' output in FILE; empty where FILE lacks them.
gpu_read_bounds() {
  COPY=$(awk '/^bound.copy_bandwidth_GBps/ {print $2}' "$1" 2> /dev/null)
  GEMM=$(awk '/^bound.bf16_gemm_TFLOPs/ {print $2}' "$1" 2> /dev/null)
}

# gpu_wait_health PORT PID TRIES: waits for http://127.0.0.1:PORT/health, polling once a second up
# to TRIES times. Returns 0 once it answers, 1 when the server process PID has exited, 2 when
# TRIES polls went unanswered.
gpu_wait_health() {
  local _
  for _ in $(seq 1 "$3"); do
    if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=1)" 2> /dev/null; then
      return 0
    fi
    kill -0 "$2" 2> /dev/null || return 1
    sleep 1
  done
  return 2
}
