#!/usr/bin/env bash
# Gets the default model (SmolLM2-135M-Instruct Q4_1, 98 MB: over the device tool's 64 MiB carry
# limit) onto the GPU machine for the default-model end-to-end test, in as few calls as possible:
# the file is xz-compressed once (~90 MB, cached) and split so that the first part fills one call on
# its own and the rest travels with .devbin in the run-all call itself. Usually two calls:
#
#   HERE:    scripts/gpu/pack-devbin.sh && scripts/gpu/stage-default-model.sh   (prints the calls)
#   call 1:  bash scripts/gpu/stage-default-model.sh --receive     carry: build-gpu-model/part-00
#   call 2:  bash scripts/gpu/run-all.sh                           carry: .devbin build-gpu-model/part-01
#            (at once: the machine keeps /tmp only while warm, 30 s after a call ends)
#
# --receive (on the GPU machine) copies the carried parts to /tmp/lathe-models; run-all.sh joins
# the parts it finds there and in build-gpu-model/, checks the SHA-256 and runs the test; with a
# part missing (the machine went cold between the calls) the test skips and everything else runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
OUTDIR=build-gpu-model

if [ "${1:-}" = "--receive" ]; then
  mkdir -p /tmp/lathe-models
  n=0
  for p in "$OUTDIR"/part-*; do
    [ -f "$p" ] || continue
    cp "$p" /tmp/lathe-models/ && n=$((n + 1))
  done
  echo "stage-default-model: $n part(s) in /tmp/lathe-models: $(ls /tmp/lathe-models | tr '\n' ' ')"
  [ "$n" -gt 0 ]
  exit
fi

. scripts/cache-dir.sh
SRC=$(lathe_cache_dir LATHE_MODEL_DIR models)/$FILE
[ -f "$SRC" ] || ./scripts/fetch-default-model.sh
mkdir -p "$OUTDIR"
if [ ! -f "$OUTDIR/model.xz" ] || [ "$SRC" -nt "$OUTDIR/model.xz" ]; then
  echo "stage-default-model: compressing $SRC (xz -9e, a few minutes once)"
  xz -9e -T0 -c "$SRC" > "$OUTDIR/model.xz.tmp" && mv "$OUTDIR/model.xz.tmp" "$OUTDIR/model.xz"
fi
rm -f "$OUTDIR"/part-*

# What travels in a call: the working tree (tracked and untracked files git does not ignore) plus
# the carried paths, 64 MiB in all; 2 MiB are kept free for files others add meanwhile.
LIMIT=$((64 * 1048576))
MARGIN=$((2 * 1048576))
TREE=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2> /dev/null | awk '{s += $1} END {print s + 0}')
DEVBIN=$(stat -c %s .devbin/lathe-gpu.tar.xz 2> /dev/null || echo $((22 * 1048576)))
TOTAL=$(stat -c %s "$OUTDIR/model.xz")
ALONE=$((LIMIT - TREE - MARGIN))            # bytes of model a call can carry on its own
WITH_RUN=$((LIMIT - TREE - MARGIN - DEVBIN))  # ... next to .devbin in the run-all call
if [ "$WITH_RUN" -lt 0 ] || [ "$ALONE" -le 0 ]; then
  echo "stage-default-model: the working tree ($TREE bytes) and .devbin ($DEVBIN) leave no room" >&2
  exit 1
fi
# Parts 00..N-2 fill staging calls; the last part (at most WITH_RUN bytes) rides with run-all.
REST=$((TOTAL - WITH_RUN))
[ "$REST" -lt 0 ] && REST=0
STAGING=$(((REST + ALONE - 1) / ALONE))
# With one staging call, balance the two calls (equal headroom under the limit in both).
if [ "$STAGING" -eq 1 ]; then
  BAL=$(((TOTAL + DEVBIN + 1) / 2))
  [ "$BAL" -gt "$REST" ] && REST=$((BAL < ALONE ? BAL : ALONE))
fi
i=0
off=0
for ((c = 0; c < STAGING; c++)); do
  size=$((REST - off < ALONE ? REST - off : ALONE))
  dd if="$OUTDIR/model.xz" of="$(printf '%s/part-%02d' "$OUTDIR" $i)" bs=1M iflag=skip_bytes,count_bytes \
    skip="$off" count="$size" status=none
  off=$((off + size))
  i=$((i + 1))
done
dd if="$OUTDIR/model.xz" of="$(printf '%s/part-%02d' "$OUTDIR" $i)" bs=1M iflag=skip_bytes skip="$off" status=none
LAST=$(printf 'part-%02d' $i)
cat "$OUTDIR"/part-* | cmp -s - "$OUTDIR/model.xz" || { echo "stage-default-model: split check failed" >&2; exit 1; }

echo "stage-default-model: $FILE -> $OUTDIR/model.xz ($TOTAL bytes), working tree $TREE bytes, .devbin $DEVBIN bytes"
echo "  headroom under the 64 MiB limit: staging call $((LIMIT - TREE - (STAGING > 0 ? (REST < ALONE ? REST : ALONE) : 0))) bytes, run-all call $((LIMIT - TREE - DEVBIN - (TOTAL - REST))) bytes"
ls -l "$OUTDIR"/part-*
echo
echo "Device calls, back to back (the machine keeps /tmp for 30 s after a call):"
for ((c = 0; c < STAGING; c++)); do
  printf '  call %d: bash scripts/gpu/stage-default-model.sh --receive    carry: ["%s/part-%02d"]\n' \
    $((c + 1)) "$OUTDIR" $c
done
printf '  call %d: bash scripts/gpu/run-all.sh    carry: [".devbin", "%s/%s"]\n' $((STAGING + 1)) "$OUTDIR" "$LAST"
