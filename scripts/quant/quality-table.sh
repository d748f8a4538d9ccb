#!/usr/bin/env bash
# The quality table of docs/QUANTIZATION.md: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF,
# scripts/fetch-qwen-coder-model.sh) dequantized to an f16 Hugging Face folder is the reference and
# the source of every method; each method's output is measured against it with `lathe eval` on the
# same windows of a Canterbury text (scripts/fetch-eval-text.sh). Prints a markdown table (size,
# bits per parameter of the whole checkpoint, PPL, mean/p99 KLD, top-1 agreement, CPU time of the
# quantization) and leaves the JSON reports in $WORK/eval-*.json.
# Usage: scripts/quant/quality-table.sh [WORK_DIR]   (env: LATHE, GGUF, WINDOWS, CTX, TEXT, SAMPLES,
#        SEQ_LEN, GROUP, METHODS, CALIB)
# CALIB is the calibration text of gptq and awq (`--calibration`; empty: the built-in multilingual
# set). Calibrate in the model's own languages: for English-only SmolLM2 use the English part,
# CALIB=~/.cache/lathe/text/calibration-en.txt (docs/QUANTIZATION.md, "GPTQ and the calibration
# text").
set -euo pipefail
cd "$(dirname "$0")/../.."
LATHE=${LATHE:-build/cpu/app/lathe}
WORK=${1:-/tmp/lathe-quality}
WINDOWS=${WINDOWS:-1}
CTX=${CTX:-512}
SAMPLES=${SAMPLES:-32}
SEQ_LEN=${SEQ_LEN:-256}
GROUP=${GROUP:-128}  # 64 for SmolLM2-135M (576 columns)
MODELS=${LATHE_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/models}
TEXTS=${LATHE_TEXT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/text}
GGUF=${GGUF:-$MODELS/Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf}
TEXT=${TEXT:-$TEXTS/canterbury/alice29.txt}
CALIB=${CALIB:-}
CAL_FLAGS="--num-samples $SAMPLES --seq-len $SEQ_LEN${CALIB:+ --calibration $CALIB}"
METHODS=${METHODS:-"rtn rtn-asym gptq awq fp8 int8 q8_0 q6_k q5_k_m q4_k_m q4_0"}
mkdir -p "$WORK"
REF=$WORK/ref-f16
[ -d "$REF" ] || "$LATHE" quantize "$GGUF" -s f16 -o "$REF"

declare -A FLAGS=(
  [rtn]="-s rtn --format gptq --bits 4 --group-size $GROUP --sym"
  [rtn-asym]="-s rtn --format awq --bits 4 --group-size $GROUP --asym"
  [gptq]="-s gptq --bits 4 --group-size $GROUP --desc-act --damp-percent 0.1 $CAL_FLAGS"
  [awq]="-s awq --group-size $GROUP $CAL_FLAGS"
  [fp8]="-s fp8-dynamic"
  [int8]="-s int8-w8a16"
  [q8_0]="-s q8_0" [q6_k]="-s q6_k" [q5_k_m]="-s q5_k_m" [q4_k_m]="-s q4_k_m" [q4_0]="-s q4_0"
)
EVAL=(--reference "$REF" --text "$TEXT" --ctx "$CTX" --stride "$CTX" --max-windows "$WINDOWS"
      --device cpu --json)
for m in $METHODS; do
  out=$WORK/$m
  case $m in q*) out=$out.gguf ;; esac
  if [ ! -e "$out" ]; then
    echo "== $m: lathe quantize $REF ${FLAGS[$m]} -o $out" >&2
    # shellcheck disable=SC2086
    /usr/bin/time -f "%U %S %e" -o "$WORK/time-$m" "$LATHE" quantize "$REF" ${FLAGS[$m]} -o "$out"
  fi
  [ -s "$WORK/eval-$m.json" ] || "$LATHE" eval "$out" "${EVAL[@]}" > "$WORK/eval-$m.json"
done
[ -s "$WORK/eval-ref.json" ] || "$LATHE" eval "$REF" --text "$TEXT" --ctx "$CTX" --stride "$CTX" \
  --max-windows "$WINDOWS" --device cpu --json > "$WORK/eval-ref.json"

python3 - "$WORK" "$REF" $METHODS <<'PY'
import json, os, sys
work, ref, methods = sys.argv[1], sys.argv[2], sys.argv[3:]
def size(p):
    if os.path.isfile(p): return os.path.getsize(p)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs
               if f.endswith(".safetensors"))
params = size(ref) / 2  # f16
r = json.load(open(f"{work}/eval-ref.json"))
print(f"| method | size | bits/param | PPL | mean KLD | p99 KLD | top-1 | quantize CPU time |")
print(f"|---|---|---|---|---|---|---|---|")
print(f"| f16 reference | {size(ref)/2**20:.0f} MiB | 16.00 | {r['perplexity']:.3f} | 0 | 0 | 100% | |")
for m in methods:
    out = f"{work}/{m}" + (".gguf" if m.startswith("q") else "")
    e = json.load(open(f"{work}/eval-{m}.json"))
    t = open(f"{work}/time-{m}").read().split() if os.path.exists(f"{work}/time-{m}") else ["?"] * 3
    cpu = f"{float(t[0]) + float(t[1]):.0f} s ({float(t[2]):.0f} s wall)" if t[0] != "?" else "?"
    print(f"| {m} | {size(out)/2**20:.0f} MiB | {8*size(out)/params:.2f} | {e['perplexity']:.3f} | "
          f"{e['kld']['mean']:.4f} | {e['kld']['p99']:.4f} | {100*e['top1_agreement']:.1f}% | {cpu} |")
print(f"\n{r['windows']} windows of {r['ctx']} tokens ({r['scored_positions']} positions) of {r['text']}")
PY
