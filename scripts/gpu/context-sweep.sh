#!/usr/bin/env bash
# Batch-1 (or any batch) decode step time over context lengths, for each variant of the backend's
# switches, on the H200 machine (carry: .devbin). One lathe_cuda_bench per variant:
#   bash scripts/gpu/context-sweep.sh "default=" "split4096=LATHE_CUDA_DECODE_SPLIT_TOKENS=4096"
# Each argument is NAME=ENV (ENV: space-separated VAR=VALUE, may be empty). Environment:
# SWEEP_CONTEXTS (default "32 128 512 1024 2048 3968"), SWEEP_BATCH (default 1), LATHE_GPU_BUNDLE.
# Logs go to $OUT, and the last lines printed are one table: variant, context, step ms, tok/s.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_begin
gpu_unpack_bundle bin/lathe_cuda_bench || exit 2
CONTEXTS=${SWEEP_CONTEXTS:-32 128 512 1024 2048 3968}
BATCH=${SWEEP_BATCH:-1}
TABLE=()
for variant in "$@"; do
  name=${variant%%=*}
  envs=${variant#*=}
  log="$OUT/sweep-$name.txt"
  env $envs timeout 240 "$DIR/bin/lathe_cuda_bench" --skip latency,prefill,throughput,profile \
    --decode "$BATCH" --context "${CONTEXTS// /,}" --max-model-len 4096 > "$log" 2>&1
  ctx=""
  while read -r line; do
    case "$line" in
      "[decode] context "*) ctx=$(echo "$line" | awk '{print $3}') ;;
      "[decode] "*)
        set -- $line
        [ "$2" = "$BATCH" ] && TABLE+=("$(printf '%-14s ctx %5s  %s ms  %s tok/s' "$name" "$ctx" "$3" "$4")") ;;
    esac
  done < "$log"
  grep -q "^\[decode\] context" "$log" || TABLE+=("$name: failed (see $log)")
done
printf '%s\n' "variant / context / step / tok/s (batch $BATCH)" "${TABLE[@]}" | tee "$OUT/sweep.txt"
