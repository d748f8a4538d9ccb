#!/usr/bin/env bash
# Same-run A/B of two GPU bundles (scripts/gpu/pack-devbin.sh output) on the H200: the previous
# commit's build against this one, Llama-3.1-8B shape, bf16, dummy weights. Each bundle's
# lathe_cuda_bench runs batch-1 decode (512 in, 128 out), one 2048-token prefill, decode at batch 1
# and 64 (context 512) and offline throughput (1000 x 1024 in / 128 out), in the order A B A B so
# that clock drift does not pick the winner; the bounds (copy bandwidth, BF16 GEMM) are measured in
# the same run. Prints a table of each figure, both rounds, and B/A.
#   bash scripts/gpu/ab-bundles.sh OLD.tar.xz NEW.tar.xz     (carry: .devbin)
# Environment: OUT (results folder), LATHE_AB_ROUNDS (default 2), LATHE_AB_ARGS (extra bench args).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
OLD=${1:?old bundle}
NEW=${2:?new bundle}
OUT=${OUT:-/tmp/lathe-ab-out}
ROUNDS=${LATHE_AB_ROUNDS:-2}
mkdir -p "$OUT"
for side in A B; do
  bundle=$OLD
  [ "$side" = B ] && bundle=$NEW
  rm -rf "/tmp/ab-$side" && mkdir -p "/tmp/ab-$side" && xz -dc "$bundle" | tar -C "/tmp/ab-$side" -xf -
done
run() {  # side, output file
  LD_LIBRARY_PATH="/tmp/ab-$1/lib:/usr/local/cuda/lib64" timeout 300 "/tmp/ab-$1/bin/lathe_cuda_bench" \
    --model benchmarks/configs/llama-3.1-8b --copy-gbps "${COPY:-0}" --gemm-tflops "${GEMM:-0}" \
    --decode 1,64 --skip profile ${LATHE_AB_ARGS:-} > "$2" 2>&1
  echo "bench $1 -> $2: exit $?"
}
LD_LIBRARY_PATH="/tmp/ab-B/lib:/usr/local/cuda/lib64" timeout 180 /tmp/ab-B/bin/lathe_gpu_bounds > "$OUT/ab-bounds.txt" 2>&1
gpu_read_bounds "$OUT/ab-bounds.txt"
echo "bounds: copy ${COPY:-?} GB/s, BF16 GEMM ${GEMM:-?} TFLOP/s"
echo "A: $(head -1 /tmp/ab-A/bin/commit.txt)  B: $(head -1 /tmp/ab-B/bin/commit.txt)"
for r in $(seq 1 "$ROUNDS"); do
  run A "$OUT/ab-A$r.txt"
  run B "$OUT/ab-B$r.txt"
done
# The figures: batch-1 tok/s, prefill ms, decode B1 and B64 tok/s, throughput output tok/s.
extract() {  # file -> "b1 prefill_ms d1 d64 thr"
  local f=$1
  local b1 pre d1 d64 thr
  b1=$(grep -m1 '^batch-1 decode' "$f" | sed -E 's/^[^)]*\) +([0-9.]+) tok\/s.*/\1/')
  pre=$(grep -m1 '^prefill' "$f" | sed -E 's/.*tokens +([0-9.]+) ms.*/\1/')
  d1=$(grep -m1 '^decode tok/s' "$f" | sed -E 's/.*B1=([0-9.]+).*/\1/')
  d64=$(grep -m1 '^decode tok/s' "$f" | sed -E 's/.*B64=([0-9.]+).*/\1/')
  thr=$(grep -m1 '^throughput' "$f" | sed -E 's/.*\) +([0-9.]+) output tok\/s.*/\1/')
  echo "$b1 $pre $d1 $d64 $thr"
}
{
  echo "figure: batch1_tok/s prefill2048_ms decodeB1_tok/s decodeB64_tok/s throughput_out_tok/s"
  for r in $(seq 1 "$ROUNDS"); do
    echo "A round $r: $(extract "$OUT/ab-A$r.txt")"
    echo "B round $r: $(extract "$OUT/ab-B$r.txt")"
  done
} | tee "$OUT/ab-summary.txt"
python3 - "$OUT" "$ROUNDS" <<'EOF' | tee -a "$OUT/ab-summary.txt"
import sys, re
out, rounds = sys.argv[1], int(sys.argv[2])
names = ["batch-1 decode tok/s", "prefill 2048 ms", "decode B1 tok/s", "decode B64 tok/s",
         "throughput out tok/s"]
rows = {}
for line in open(out + "/ab-summary.txt"):
    m = re.match(r"([AB]) round (\d+): (.*)", line)
    if m:
        vals = [float(x) if re.match(r"^[0-9.]+$", x) else None for x in m.group(3).split()]
        rows.setdefault(m.group(1), []).append(vals)
for i, n in enumerate(names):
    a = [r[i] for r in rows.get("A", []) if len(r) > i and r[i] is not None]
    b = [r[i] for r in rows.get("B", []) if len(r) > i and r[i] is not None]
    if not a or not b:
        print(f"{n}: missing"); continue
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    better = mb / ma if "ms" not in n else ma / mb
    print(f"{n}: A {ma:.2f} B {mb:.2f}  B/A (higher is better) {better:.4f}")
EOF
