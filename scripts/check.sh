#!/usr/bin/env bash
# Quick start, second command: set up (the test packages too), build, and run every test. .ci/run
# runs this.
#   1. the release build and its whole suite, the installation test among it
#   2. the house style: clang-format and clang-tidy (scripts/lint.sh)
#   3. the C++ suites built with AddressSanitizer and UndefinedBehaviorSanitizer (the dev preset; the
#      Python checks of what is shown and written run in step 1 only)
#   4. a bounded libFuzzer run (FUZZ_SECONDS, default 60; scripts/fuzz.sh SECONDS runs longer)
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
cmake --preset dev >/dev/null
cmake --build --preset dev
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --preset dev

phase "fuzzing"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
phase "done"
