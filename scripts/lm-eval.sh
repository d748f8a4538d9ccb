#!/usr/bin/env bash
# EleutherAI's lm-eval as a real client of `lathe serve` (issue 18; not part of CI: lm-eval pulls
# in PyTorch). Runs the 20-question multiple-choice task of tests/fixtures/lm_eval/ (local files,
# no hub download) with `lm_eval --model local-completions` against `lathe serve` on the default
# model (CPU), then compares lm-eval's per-choice log-likelihoods with Lathe's own
# (scripts/lm_eval_compare.py: /tokenize and /v1/completions echo + logprobs on the text) and
# prints both and the largest difference. Exits 1 when they differ by more than LM_EVAL_TOLERANCE
# nats; exits 0 with "SKIPPED" when lm-eval cannot be installed (offline).
#
#   scripts/lm-eval.sh                  # build/release/app/lathe, the default model
#   LATHE_BIN=... LATHE_MODEL=... scripts/lm-eval.sh
#   LM_EVAL_TOKENIZER=remote scripts/lm-eval.sh   # lm-eval tokenizes through the server
#
# LM_EVAL_TOKENIZER: huggingface (default: lm-eval tokenizes with transformers, reading the
# model's tokenizer from the GGUF; needs PyTorch) or remote (lm-eval's tokenizer_backend=remote:
# /tokenizer_info, /tokenize and /detokenize of lathe serve; lm-eval[api] alone, no PyTorch).
#
# Environment: LATHE_BIN (default build/release/app/lathe), LATHE_MODEL (default: the default
# model in the model cache), LATHE_LM_EVAL_VENV (default ~/.cache/lathe/lm-eval-venv; created and
# filled with pip on first use), LM_EVAL_VERSION (0.4.13), LM_EVAL_TOLERANCE (1e-3),
# LM_EVAL_OUT (results folder; default a temporary one, kept).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LATHE_BIN=${LATHE_BIN:-$ROOT/build/release/app/lathe}
. "$ROOT/scripts/cache-dir.sh"
MODEL_DIR=$(lathe_cache_dir LATHE_MODEL_DIR models)
LATHE_MODEL=${LATHE_MODEL:-$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf}
VENV=${LATHE_LM_EVAL_VENV:-$HOME/.cache/lathe/lm-eval-venv}
LM_EVAL_VERSION=${LM_EVAL_VERSION:-0.4.13}
TOKENIZER_BACKEND=${LM_EVAL_TOKENIZER:-huggingface}
TOLERANCE=${LM_EVAL_TOLERANCE:-1e-3}
TASK_DIR=$ROOT/tests/fixtures/lm_eval
OUT=${LM_EVAL_OUT:-$(mktemp -d /tmp/lathe-lm-eval.XXXXXX)}
mkdir -p "$OUT"
NAME=lathe-default

say() { echo "lm-eval.sh: $*"; }
[ -x "$LATHE_BIN" ] || { say "no lathe binary at $LATHE_BIN (build the lathe target)"; exit 2; }
[ -f "$LATHE_MODEL" ] || { say "no model at $LATHE_MODEL (run scripts/fetch-default-model.sh)"; exit 2; }
case "$TOKENIZER_BACKEND" in
  huggingface) EXTRA_PACKAGES=(transformers torch gguf sentencepiece) ;;
  remote) EXTRA_PACKAGES=() ;;
  *) say "LM_EVAL_TOKENIZER must be huggingface or remote, got '$TOKENIZER_BACKEND'"; exit 2 ;;
esac

# 1. lm-eval in a venv of its own (once). transformers reads the model's tokenizer from the GGUF
#    (which needs torch and gguf); local-completions itself needs only lm-eval[api].
have_lm_eval() {
  "$VENV/bin/python" - "$LM_EVAL_VERSION" "$TOKENIZER_BACKEND" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
import lm_eval.models.openai_completions
if sys.argv[2] == "huggingface":
    import transformers, gguf, torch
sys.exit(version("lm_eval") != sys.argv[1])
PYEOF
}
if ! have_lm_eval; then
  say "installing lm-eval $LM_EVAL_VERSION into $VENV (${EXTRA_PACKAGES[*]:-no extra packages}; once)"
  python3 -m venv "$VENV" || { say "SKIPPED: python3 -m venv failed (install python3-venv)"; exit 0; }
  if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check \
      "lm-eval[api]==$LM_EVAL_VERSION" "${EXTRA_PACKAGES[@]}"; then
    say "SKIPPED: could not install lm-eval from PyPI (offline?)"
    exit 0
  fi
fi
PY=$VENV/bin/python
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# 2. huggingface: lm-eval tokenizes on its side: the model's tokenizer, read from the GGUF by
#    transformers and saved as a Hugging Face tokenizer folder. remote: the server tokenizes.
if [ "$TOKENIZER_BACKEND" = huggingface ]; then
  TOKENIZER=$OUT/tokenizer
  "$PY" - "$LATHE_MODEL" "$TOKENIZER" <<'PYEOF'
import os, sys
from transformers import AutoTokenizer
path, out = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
tok.save_pretrained(out)
PYEOF
  TOKENIZER_ARGS="tokenizer=$TOKENIZER,tokenizer_backend=huggingface"
else
  TOKENIZER_ARGS="tokenizer_backend=remote"
fi

# 3. lathe serve on a free port (CPU, the default model).
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
"$LATHE_BIN" serve "$LATHE_MODEL" --device cpu --port "$PORT" --served-model-name "$NAME" \
  > "$OUT/serve.log" 2>&1 &
SERVE_PID=$!
trap 'kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  curl -fs "$URL/health" > /dev/null 2>&1 && break
  kill -0 "$SERVE_PID" 2>/dev/null || { say "lathe serve exited:"; cat "$OUT/serve.log"; exit 1; }
  sleep 0.5
done
say "lathe serve at $URL (log: $OUT/serve.log)"

# 4. lm-eval against it. Run from the task folder: the task's data_files path is relative.
(cd "$TASK_DIR" && "$VENV/bin/lm_eval" --model local-completions \
   --model_args "model=$NAME,base_url=$URL/v1/completions,$TOKENIZER_ARGS,tokenized_requests=True,num_concurrent=1,max_retries=1" \
   --tasks lathe_mc20 --include_path "$TASK_DIR" --batch_size 1 \
   --log_samples --output_path "$OUT/results") 2>&1 | tee "$OUT/lm_eval.log" | grep -v "^\s*$" | tail -12

# 5. lm-eval's log-likelihoods against Lathe's own.
set +e
"$PY" "$ROOT/scripts/lm_eval_compare.py" --samples-dir "$OUT/results" --base-url "$URL" \
  --model "$NAME" --tolerance "$TOLERANCE" | tee "$OUT/compare.txt"
status=${PIPESTATUS[0]}
set -e
say "results in $OUT"
exit "$status"
