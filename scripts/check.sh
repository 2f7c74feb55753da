#!/usr/bin/env bash
# Quick start, second command: set up (the test packages too), build, and run every test. .ci/run
# runs this.
#   1. the release build and its whole suite, the installation test among it
#   2. the house style: clang-format and clang-tidy (scripts/lint.sh)
#   3. the C++ suites built with AddressSanitizer and UndefinedBehaviorSanitizer (the dev preset; the
#      Python checks of what is shown and written and the PyTorch goldens run in step 1 only), and the
#      release build's CLI tests on the sanitized binary
#   4. a bounded libFuzzer run (FUZZ_SECONDS, default 30; scripts/fuzz.sh SECONDS runs longer)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests

phase() { echo "== $1 (at ${SECONDS} s)"; }

phase "release build and tests"
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release

phase "style: clang-format and clang-tidy"
bash scripts/lint.sh build/release

phase "sanitizer build (ASan + UBSan) and tests"
# The CLI tests are a black box: the release build's suite runs the sanitized binary, and the sanitizer
# build leaves them out (building them instrumented would test the harness, not the tool). The PyTorch
# goldens check numbers, which the release run does; the unit and CLI suites take the same engines
# through the sanitizers.
cmake --preset dev -DATTN_CLI_TESTS=OFF -DATTN_CONFORMANCE_TESTS=OFF >/dev/null
cmake --build --preset dev
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --preset dev
ATTN_TRACE_BIN="$PWD/build/dev/attn-trace" ATTN_SANITIZED=1 ctest --preset release -R '^cli:'
unset ASAN_OPTIONS UBSAN_OPTIONS

phase "fuzzing"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
phase "done"
