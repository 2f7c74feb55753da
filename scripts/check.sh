#!/usr/bin/env bash
# Quick start, second command: set up (the test packages too), build, and run every test. .ci/run
# runs this.
#   1. the release build and its whole suite, the installation test among it
#   2. the house style: clang-format and clang-tidy (scripts/lint.sh)
#   3. one clang build with AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's coverage (the
#      sanitize preset): its unit tests (the Python checks of what is shown and written and the PyTorch
#      goldens run in step 1 only), and the release build's CLI tests on its binary
#   4. a bounded libFuzzer run of that build's fuzz target (FUZZ_SECONDS, default 30; scripts/fuzz.sh
#      SECONDS runs longer)
# The release build treats warnings as errors here (GCC); the sanitize build does too (clang).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests

phase() { echo "== $1 (at ${SECONDS} s)"; }

phase "release build and tests"
cmake --preset release -DATTN_WARNINGS_AS_ERRORS=ON >/dev/null
cmake --build --preset release
ctest --preset release

phase "style: clang-format and clang-tidy"
bash scripts/lint.sh

phase "sanitizer build (ASan + UBSan, clang) and tests"
# The CLI tests are a black box: the release build's suite runs the sanitized binary, and the sanitizer
# build leaves them out (building them instrumented would test the harness, not the tool). The PyTorch
# goldens check numbers, which the release run does; the unit and CLI suites take the same engines
# through the sanitizers. The same objects, with libFuzzer's coverage, make the fuzz target: one build
# of the library for both.
# The explorer's WebAssembly core is the release build's (cmake/explorer.cmake): compiled once.
core=build/release/explorer/explorer_core.js
cmake --preset sanitize $([ -f "$core" ] && echo "-DATTN_EXPLORER_CORE=$PWD/$core") >/dev/null
cmake --build --preset sanitize
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --preset sanitize
ATTN_TRACE_BIN="$PWD/build/sanitize/attn-trace" ATTN_SANITIZED=1 ctest --preset release -R '^cli:'
unset ASAN_OPTIONS UBSAN_OPTIONS

phase "fuzzing"
FUZZ_PRESET=sanitize bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
phase "done"
