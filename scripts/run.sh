#!/usr/bin/env bash
# The README's run command: installs dependencies, fetches the default model, builds, and starts
# Lathe with the default model: Lathe Studio when a display is available, else `lathe serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/fetch-default-model.sh
./scripts/build.sh
BIN=build/release/app
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "$BIN/lathe-studio" ]; then
  exec "$BIN/lathe-studio" "$@"
fi
echo "run: no display found; starting the OpenAI-compatible server instead (Ctrl-C stops it)" >&2
exec "$BIN/lathe" serve "$@"
