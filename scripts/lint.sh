#!/usr/bin/env bash
# The house style, checked: every C++ file as clang-format (.clang-format) would write it, and
# clang-tidy's checks (.clang-tidy: bugprone, performance, a few modernize) with no finding on the
# files of src/ and apps/, using the compile commands of a configured build.
#
# usage: scripts/lint.sh [BUILD_DIR]   (default build/release; it must have been configured)
#        scripts/lint.sh --format      reformat every C++ file in place, then stop
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [ "${1:-}" = "--format" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
build=${1:-build/release}

echo "lint: clang-format on ${#files[@]} files"
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "lint: FAILED: run scripts/lint.sh --format, look at the change, commit it"
  exit 1
fi

[ -f "$build/compile_commands.json" ] || { echo "lint: no $build/compile_commands.json: configure $build first"; exit 1; }
echo "lint: clang-tidy on src/ and apps/"
if ! run-clang-tidy -quiet -p "$build" -j "$(nproc)" "$PWD/(src|apps)/.*\\.cpp\$" > "$build/clang-tidy.log" 2>&1; then
  grep -E "(warning|error):" "$build/clang-tidy.log" | sed 's/\x1b\[[0-9;]*m//g' | sort -u | head -50
  echo "lint: FAILED: clang-tidy found the above ($build/clang-tidy.log has everything)"
  exit 1
fi
echo "lint: clean"
