#!/usr/bin/env bash
# The README's test command: installs dependencies, fetches the default model, the reference
# vocabularies the tokenizer tests compare against and the Python tools the quantization tests
# compare against (gguf-py, numpy), builds, and runs
# the whole test suite through CTest. GPU tests (label "gpu") skip themselves without a GPU.
# Extra arguments go to ctest (e.g. -L gpu, -R tokenizer).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/fetch-default-model.sh
./scripts/fetch-test-assets.sh
./scripts/fetch-quant-tools.sh
./scripts/fetch-eval-text.sh
./scripts/build.sh
cd build/release
ctest --output-on-failure --timeout 1200 -j "${LATHE_TEST_JOBS:-2}" "$@"
