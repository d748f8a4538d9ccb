#!/usr/bin/env bash
# Puts the Python tools the quantization tests compare Lathe against into a virtual environment:
# gguf-py (llama.cpp's own GGUF reader, writer and Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 quantizers) and numpy
# (the reference readers of scripts/quant/). Pinned versions from PyPI.
# Venv: $LATHE_QUANT_VENV, else $XDG_CACHE_HOME/lathe/venv-quant, else ~/.cache/lathe/venv-quant.
# Idempotent. Tests that need it skip themselves (with a message) when it is absent.
set -euo pipefail

GGUF_VERSION=0.19.0
NUMPY_VERSION=2.4.6

. "$(dirname "$0")/cache-dir.sh"
VENV=$(lathe_cache_dir LATHE_QUANT_VENV venv-quant)
STAMP=$VENV/.complete-gguf-$GGUF_VERSION-numpy-$NUMPY_VERSION

if [ -f "$STAMP" ]; then
  echo "fetch-quant-tools: $VENV is present"
  exit 0
fi

echo "fetch-quant-tools: creating $VENV (gguf $GGUF_VERSION, numpy $NUMPY_VERSION)"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "gguf==$GGUF_VERSION" "numpy==$NUMPY_VERSION"
"$VENV/bin/python" -c "import gguf, numpy; from gguf import quants" >/dev/null
touch "$STAMP"
echo "fetch-quant-tools: $VENV"
