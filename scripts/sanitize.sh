#!/usr/bin/env bash
# The sanitizer job (docs/RELIABILITY.md): builds the `debug` preset (CPU only, ASan + UBSan) and
# runs the CPU test suite under it. Slow (the suite runs several times slower); run it at every
# change that touches the engine, and before a release.
#   scripts/sanitize.sh                 every CPU test (labels gpu and packaging excluded)
#   scripts/sanitize.sh -R 'tokenizer|kv'   a subset (arguments go to ctest; only the matching
#                                       tests' targets are built)
# Any sanitizer report fails its test: ASan and UBSan abort at the first error, LeakSanitizer
# reports leaks at exit (scripts/sanitizers/lsan.supp lists third-party leaks ignored).
# Time limits are 10 times the normal ones (LATHE_TEST_TIME_SCALE below).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/lathe/ccache} CCACHE_BASEDIR=$PWD
cmake --preset debug >/dev/null

# Which tests (and so which targets) to build.
tests=$(cd build/debug && ctest -N -LE 'gpu|packaging' "$@" | sed -n 's/^ *Test *#[0-9]*: //p')
if [ -z "$tests" ]; then
  echo "sanitize.sh: no test matches $*" >&2
  exit 2
fi
targets=()
for t in $tests; do
  case $t in
    test_fuzz_replay_*) targets+=("fuzz_${t#test_fuzz_replay_}_replay") ;;
    *) targets+=("$t") ;;
  esac
done
# The whole suite includes tests that run the CLI: build it too.
[ $# -eq 0 ] && targets+=(lathe)
cmake --build build/debug -j "${LATHE_BUILD_JOBS:-2}" --target "${targets[@]}"

supp=$PWD/scripts/sanitizers
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
# Instrumented code runs several times slower. Time limits scale by 10 (none is dropped): each
# test's CTest TIMEOUT (the debug preset's LATHE_TEST_TIMEOUT_SCALE), Qt Test's per-function limit
# (QTEST_FUNCTION_TIMEOUT, 300 s by default) and the tests' own wall-clock limits
# (LATHE_TEST_TIME_SCALE, tests/test_support.h).
export LATHE_TEST_TIME_SCALE=${LATHE_TEST_TIME_SCALE:-10}
export QTEST_FUNCTION_TIMEOUT=${QTEST_FUNCTION_TIMEOUT:-$((300000 * LATHE_TEST_TIME_SCALE))}
cd build/debug
ctest --output-on-failure --timeout 3600 -j "${LATHE_TEST_JOBS:-2}" -LE 'gpu|packaging' "$@"
