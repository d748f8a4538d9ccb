#!/usr/bin/env bash
# Optional, run HERE: splits the default model (98 MB, over the device tool's 64 MiB carry limit) into
# two parts under build-gpu-model/ (git-ignored through /build*/), so that two short calls can stage
# it in /tmp/lathe-models on a warm GPU machine before run-all.sh, which joins the parts, checks the
# SHA-256 and then runs the default-model end-to-end test too (it skips without the model).
#   call 1: mkdir -p /tmp/lathe-models && cp build-gpu-model/part-00 /tmp/lathe-models/   carry: build-gpu-model/part-00
#   call 2: mkdir -p /tmp/lathe-models && cp build-gpu-model/part-01 /tmp/lathe-models/   carry: build-gpu-model/part-01
#   call 3: bash scripts/gpu/run-all.sh                                                    carry: .devbin
# (within the machine's warm period; a fresh machine has an empty /tmp and the test skips).
set -euo pipefail
cd "$(dirname "$0")/../.."
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
if [ -n "${LATHE_MODEL_DIR:-}" ]; then SRC=$LATHE_MODEL_DIR/$FILE
elif [ -n "${XDG_CACHE_HOME:-}" ]; then SRC=$XDG_CACHE_HOME/lathe/models/$FILE
else SRC=$HOME/.cache/lathe/models/$FILE; fi
[ -f "$SRC" ] || ./scripts/fetch-default-model.sh
rm -rf build-gpu-model && mkdir -p build-gpu-model
split -b 50M -d -a 2 "$SRC" build-gpu-model/part-
ls -la build-gpu-model
