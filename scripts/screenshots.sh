#!/usr/bin/env bash
# Takes the screenshots in docs/screenshots/ (shown in the README): Lathe Studio under Xvfb with the
# default model loaded on the CPU, its server running and traffic flowing, one PNG per page
# (models.png, chat.png, serve.png, dashboard.png).
#
#   scripts/screenshots.sh [BUILD_DIR] [MODEL]     (defaults: build/release, the default model)
#
# Settings and conversations go to a temporary home, so the user's own are neither used nor touched.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
MODEL=${2:-}
OUT=docs/screenshots
command -v xvfb-run >/dev/null || { echo "screenshots: xvfb-run is missing (apt-get install xvfb xauth)" >&2; exit 2; }
cmake --build "$BUILD" --target lathe-studio
HOME_TMP=$(mktemp -d)
trap 'rm -rf "$HOME_TMP"' EXIT
mkdir -p "$OUT"
# The model cache stays the user's (LATHE_MODEL_DIR or ~/.cache/lathe/models).
export LATHE_MODEL_DIR=${LATHE_MODEL_DIR:-$HOME/.cache/lathe/models}
XDG_CONFIG_HOME="$HOME_TMP/config" XDG_DATA_HOME="$HOME_TMP/data" XDG_RUNTIME_DIR="$HOME_TMP/run" \
QT_QPA_PLATFORM=xcb QT_SCALE_FACTOR=1 \
  xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$BUILD/app/lathe-studio" --screenshots "$OUT" ${MODEL:+"$MODEL"}
ls -l "$OUT"/*.png
