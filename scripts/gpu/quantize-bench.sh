#!/usr/bin/env bash
# `lathe quantize` on the GPU (issue 15), for the H200 machine, after scripts/gpu/run-all.sh has
# unpacked the bundle (or standalone: it unpacks it itself):
#   bash scripts/gpu/quantize-bench.sh       (from the repository root; carry: .devbin)
# Random weights of the Llama-3.1-8B shape (`--load-format dummy`: generated as they are read,
# gptq/awq calibrated on 128 x 512 random token ids), each on `--device cuda`:
#   gptq 4-bit g128 --desc-act, awq 4-bit g128, fp8-dynamic;
# then the Llama-3.1-70B shape, gptq 4-bit g128, when the time left allows (--no-resume there: its
# ~37 GB output and a work folder of the same size do not both fit the machine's 64 GiB disk).
# gptq and awq run with --profile: the summary gets each run's op and stage times.
# Each run's output goes to the folder with the most room (LATHE_QUANTIZE_WORK, else the roomiest
# of /tmp, /dev/shm and /var/tmp) and is deleted after the run. One summary line per run in
# $OUT/quantize-summary.txt: wall time, peak device memory and peak host RSS (the CLI's last line,
# "lathe quantize: peak memory: host RSS X, device Y (cuda:0 ...)"), or how far it got.
# Environment: LATHE_GPU_BUNDLE, OUT (output folder), LATHE_GPU_BUDGET_S (default 540),
# LATHE_QUANTIZE_8B (default "gptq awq fp8-dynamic"; empty to skip), LATHE_QUANTIZE_70B (default
# "gptq"; empty to skip), LATHE_QUANTIZE_DEVICE (default cuda; cpu runs the script's steps without
# a GPU), LATHE_QUANTIZE_8B_CONFIG / LATHE_QUANTIZE_70B_CONFIG (default benchmarks/configs/
# llama-3.1-8b / -70b), LATHE_QUANTIZE_ARGS (more flags for every run, e.g. "--num-samples 32"),
# LATHE_QUANTIZE_WORK (where outputs go).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_begin 540
LOG="$OUT/quantize-bench.log"
: > "$LOG"
: > "$OUT/quantize-summary.txt"

gpu_unpack_bundle bin/lathe || exit 2
if [ ! -x "$BIN/lathe" ]; then
  log "the bundle has no bin/lathe (pack-devbin.sh packs the CLI when it builds): build it and pack again"
  exit 2
fi
DEVICE=${LATHE_QUANTIZE_DEVICE:-cuda}
CONFIG_8B=${LATHE_QUANTIZE_8B_CONFIG:-benchmarks/configs/llama-3.1-8b}
CONFIG_70B=${LATHE_QUANTIZE_70B_CONFIG:-benchmarks/configs/llama-3.1-70b}
read -r -a EXTRA <<< "${LATHE_QUANTIZE_ARGS:-}"
SUMMARY=()

# The candidate folder with the most free bytes (df's available space).
roomiest() {
  local best="" best_free=-1 d free
  for d in ${LATHE_QUANTIZE_WORK:-/tmp /dev/shm /var/tmp}; do
    [ -d "$d" ] && [ -w "$d" ] || continue
    free=$(df -P -B1 "$d" 2> /dev/null | awk 'NR == 2 {print $4}')
    [ -n "$free" ] && [ "$free" -gt "$best_free" ] && { best=$d; best_free=$free; }
  done
  echo "$best"
}

# One `lathe quantize` run: NAME, a time limit in seconds, then the CLI's arguments after the
# model (CONFIG first). Appends its summary line; the output and its work folder are deleted.
quantize() {
  local name=$1 limit=$2 config=$3
  shift 3
  local work out txt start end rc wall peak err
  work=$(roomiest)
  [ -n "$work" ] || { SUMMARY+=("$name: no writable folder for the output"); return 1; }
  out="$work/lathe-quantize-bench-$$"
  txt="$OUT/quantize-$name.txt"
  rm -rf "$out" "$out".*
  log "== $name: lathe quantize $config --load-format dummy --device $DEVICE $* -> $out (limit ${limit} s, $(df -P -h "$work" | awk 'NR == 2 {print $4}') free there)"
  start=$(date +%s.%N)
  # SIGINT first (the CLI stops between linears and removes its temporary output), SIGKILL 20 s later.
  timeout -s INT -k 20 "$limit" "$BIN/lathe" quantize "$config" --load-format dummy --device "$DEVICE" \
    -o "$out" "$@" "${EXTRA[@]}" > "$txt" 2>&1
  rc=$?
  end=$(date +%s.%N)
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
  log "exit $rc after $wall s"
  du -sh "$out" 2> /dev/null | awk '{print "output size " $1}' >> "$txt"
  rm -rf "$out" "$out".*  # the output, OUT.partial, and an OUT.tmp-PID a killed run left
  peak=$(grep -m1 '^lathe quantize: peak memory: ' "$txt" | sed 's/^lathe quantize: peak memory: //')
  if [ "$rc" -eq 0 ]; then
    SUMMARY+=("$name: ${wall} s wall, peak memory: ${peak:-?}; $(grep -m1 '^lathe quantize: wrote' "$txt" | sed 's/^lathe quantize: //')")
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    SUMMARY+=("$name: stopped by the time limit after ${wall} s; last progress: $(grep '^  \[' "$txt" | tail -1 | sed 's/^ *//')")
  else
    err=$(grep -m2 '^lathe quantize: ' "$txt" | tail -1)
    SUMMARY+=("$name: exit $rc after ${wall} s: ${err:-$(tail -1 "$txt")}")
  fi
  grep -m1 '^  device: ' "$txt" | sed "s/^  /  $name /" | while IFS= read -r line; do log "$line"; done
  # gptq / awq: where the time went (--profile's last line).
  prof=$(grep 'time so far: ' "$txt" | tail -1 | sed 's/^ *time so far: //')
  [ -n "$prof" ] && SUMMARY+=("  $name time: $prof")
  return 0
}

# The 8B shape: about 16 GB of bf16 weights generated, ~6-9 GB written per run.
for s in ${LATHE_QUANTIZE_8B-gptq awq fp8-dynamic}; do
  [ "$(left)" -gt 60 ] || { log "out of time before 8B $s"; break; }
  case $s in
    gptq) args=(-s gptq --bits 4 --group-size 128 --desc-act --profile) ;;
    awq) args=(-s awq --group-size 128 --profile) ;;
    *) args=(-s "$s") ;;
  esac
  quantize "8b-$s" $(( $(left) - 40 )) "$CONFIG_8B" "${args[@]}"
done

# The 70B shape: 140 GB of weights generated block by block; only when a run has some minutes.
for s in ${LATHE_QUANTIZE_70B-gptq}; do
  [ "$(left)" -gt 240 ] || { log "out of time before 70B $s ($(left) s left; LATHE_GPU_BUDGET_S raises the budget)"; break; }
  case $s in
    gptq) args=(-s gptq --bits 4 --group-size 128 --no-resume --profile) ;;
    awq) args=(-s awq --group-size 128 --no-resume --profile) ;;
    *) args=(-s "$s") ;;
  esac
  quantize "70b-$s" $(( $(left) - 40 )) "$CONFIG_70B" "${args[@]}"
done

echo "==== quantize-bench summary ($DEVICE)" | tee -a "$LOG"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$LOG" "$OUT/quantize-summary.txt"
