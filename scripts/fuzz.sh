#!/usr/bin/env bash
# Runs libFuzzer targets (tests/fuzz/, docs/RELIABILITY.md) for a while each.
#   scripts/fuzz.sh TARGET|all SECONDS [extra libFuzzer flags]
# Builds the `fuzz` preset (clang 14, ASan + UBSan) into build/fuzz, then runs each target on
# SECONDS of wall time from its checked-in seeds (tests/fuzz/corpus/<target>/) plus what earlier
# runs found (build/fuzz/corpus/<target>/, not checked in). A crash leaves its input in
# build/fuzz/artifacts/<target>/; copy it to tests/fuzz/corpus/<target>/regression-<what> with the
# fix, so the replay CTest keeps it fixed. One line per run is appended to build/fuzz/runs.tsv:
# date, target, seconds, executions, corpus size, crashes.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(gguf gguf_tokenizer safetensors tokenizer_json jinja openai_request sse weight_scheme)
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET|all SECONDS [libFuzzer flags]   (targets: ${ALL[*]})" >&2
  exit 2
fi
what=$1 seconds=$2
shift 2
if [ "$what" = all ]; then targets=("${ALL[@]}"); else targets=("$what"); fi
for t in "${targets[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (${ALL[*]})" >&2; exit 2; }
done
command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 missing: run scripts/install-deps.sh" >&2; exit 1; }

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/lathe/ccache} CCACHE_BASEDIR=$PWD
# LATHE_FUZZ_NO_BUILD=1: use the binaries already built (for runs in parallel).
if [ "${LATHE_FUZZ_NO_BUILD:-0}" != 1 ]; then
  cmake --preset fuzz >/dev/null
  cmake --build build/fuzz -j "${LATHE_BUILD_JOBS:-2}" --target "${targets[@]/#/fuzz_}"
fi

status=0
for t in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$t artifacts=build/fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  log=build/fuzz/$t.log
  before=$(find "$artifacts" -type f | wc -l)
  echo "fuzz.sh: $t for ${seconds}s (log $log)"
  set +e
  # -timeout: one input may take 10 s at most (a hang is a bug); -rss_limit_mb: memory is bounded.
  "build/fuzz/tests/fuzz/fuzz_$t" "$corpus" "tests/fuzz/corpus/$t" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$@" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  crashes=$(($(find "$artifacts" -type f | wc -l) - before))
  size=$(find "$corpus" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$seconds" "${execs:-0}" "$size" \
    "$crashes" >>build/fuzz/runs.tsv
  echo "fuzz.sh: $t: ${execs:-0} executions, corpus $size, exit $rc"
  if [ $rc -ne 0 ]; then
    status=1
    grep -m1 -A12 'ERROR:\|fuzz check failed\|deadly signal\|timeout' "$log" || tail -20 "$log"
  fi
done
exit $status
