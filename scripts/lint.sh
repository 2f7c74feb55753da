#!/usr/bin/env bash
# The house style, checked: every C++ file as clang-format (.clang-format) would write it, and
# clang-tidy's checks (.clang-tidy: bugprone, performance, a few modernize) with no finding on the
# files of src/ and apps/, using the compile commands of a configured build.
#
# usage: scripts/lint.sh               clang-format, then clang-tidy with the compile commands of
#                                      build/lint (configured here: the release flags, each command
#                                      file of the tool on its own rather than in a unity unit)
#        scripts/lint.sh --format      reformat every C++ file in place, then stop
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [ "${1:-}" = "--format" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
build=build/lint

echo "lint: clang-format on ${#files[@]} files"
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "lint: FAILED: run scripts/lint.sh --format, look at the change, commit it"
  exit 1
fi

# Configuring alone writes the compile commands (and the generated version header); nothing is built.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTN_UNITY_APPS=OFF -DATTN_BUILD_TESTS=OFF >/dev/null
echo "lint: clang-tidy on src/ and apps/"
if ! run-clang-tidy -quiet -p "$build" -j "$(nproc)" "$PWD/(src|apps)/.*\\.cpp\$" > "$build/clang-tidy.log" 2>&1; then
  grep -E "(warning|error):" "$build/clang-tidy.log" | sed 's/\x1b\[[0-9;]*m//g' | sort -u | head -50
  echo "lint: FAILED: clang-tidy found the above ($build/clang-tidy.log has everything)"
  exit 1
fi
echo "lint: clean"
