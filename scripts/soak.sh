#!/usr/bin/env bash
# Soak test of `lathe serve` (docs/RELIABILITY.md): the default model on the CPU under a mixed load
# (streaming and not, disconnects mid-stream, bad requests, shared-prefix and unique prompts) for
# SECONDS (default 3600), then checks: no crash, no unexpected error, RSS growth < 5% after
# warm-up, every KV block free at the end, /health < 100 ms throughout.
#   scripts/soak.sh [SECONDS] [extra scripts/soak.py flags]
# Uses build/cpu/app/lathe (or $LATHE_BIN); writes summary.json and the server's log to build/soak
# (or $LATHE_SOAK_DIR); $LATHE_SOAK_SERVE_ARGS are added to `lathe serve` (CI: a small KV cache,
# so the warm-up fill takes seconds). Exit 77 (CTest's skip) when the default model is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-3600}
shift || true
lathe=${LATHE_BIN:-build/cpu/app/lathe}
[ -x "$lathe" ] || { echo "soak.sh: $lathe not built (cmake --build build/cpu --target lathe)" >&2; exit 1; }
model=${LATHE_SOAK_MODEL:-$HOME/.cache/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || { echo "soak.sh: $model missing: run scripts/fetch-default-model.sh" >&2; exit 77; }
dir=${LATHE_SOAK_DIR:-build/soak}
mkdir -p "$dir"
read -r -a serve_args <<< "${LATHE_SOAK_SERVE_ARGS:-}"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$lathe" serve "$model" --device cpu --port "$port" --max-model-len 1024 --disable-log-requests \
  "${serve_args[@]}" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "soak.sh: the server exited:" >&2; tail -20 "$dir/server.log" >&2; exit 1; }
  sleep 1
done
set +e
python3 scripts/soak.py --port "$port" --pid "$pid" --duration "$seconds" \
  --out "$dir/summary.json" "$@"
rc=$?
set -e
kill -0 $pid 2>/dev/null || { echo "soak.sh: the server died during the soak" >&2; rc=1; }
kill -TERM $pid
wait $pid || true
trap - EXIT
echo "soak.sh: $( [ $rc -eq 0 ] && echo passed || echo FAILED ) ($dir/summary.json, $dir/server.log)"
exit $rc
