#!/usr/bin/env bash
# The house style, checked: every C++ file as clang-format (.clang-format) would write it, and
# clang-tidy's checks (.clang-tidy: bugprone, performance, a few modernize) with no finding on the
# files of src/ and apps/, using the compile commands of a configured build.
#
# usage: scripts/lint.sh               clang-format, then clang-tidy with the compile commands of
#                                      build/lint (configured here with the release flags), then each
#                                      command file of the tool compiled on its own (syntax only)
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

# Configuring alone writes the compile commands, the generated version header and the unity sources
# that compile the tool's command files together; nothing is built.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTN_UNITY_APPS=ON -DATTN_BUILD_TESTS=OFF -DATTN_PCH=OFF >/dev/null
unity="$PWD/$build/CMakeFiles/(attn-trace|attn_core)\\.dir/Unity"
# clang-tidy's checks walk every declaration a file includes, nlohmann/json's and CLI11's instantiations
# among them (most of its time), so it reads the files of src/ and apps/ through the unity sources the
# build compiles (CMakeLists.txt: ATTN_UNITY, ATTN_UNITY_APPS; about twenty units instead of a hundred files):
# a finding inside an included file of src/ or apps/ is still reported there (HeaderFilterRegex). The
# unity sources include .cpp files by design, so only they are exempt from bugprone-suspicious-include.
printf '%s\n' '# Written by scripts/lint.sh for the generated unity sources below this directory.' \
  'InheritParentConfig: true' "Checks: '-bugprone-suspicious-include'" > "$build/.clang-tidy"
echo "lint: clang-tidy on src/ and apps/"
if ! run-clang-tidy -quiet -p "$build" -j "$(nproc)" "^($PWD/(src|apps)/.*\\.cpp|$unity/unity_[0-9]+_cxx\\.cxx)\$" \
  > "$build/clang-tidy.log" 2>&1; then
  grep -E "(warning|error):" "$build/clang-tidy.log" | sed 's/\x1b\[[0-9;]*m//g' | sort -u | head -50
  echo "lint: FAILED: clang-tidy found the above ($build/clang-tidy.log has everything)"
  exit 1
fi

# In a unity unit a command file can lean on an include of the file before it; compiled alone it must
# stand on its own includes. Syntax only, with the unity unit's own flags. The Python module's file is
# compiled on its own anyway, with Python's headers (cmake/python_module.cmake), which these flags lack.
mapfile -t apps < <(git ls-files 'apps/*.cpp' ':!apps/python/*')
echo "lint: each of the ${#apps[@]} files of apps/ compiles on its own"
unit_command=$(grep -o '"command": "[^"]*attn-trace\.dir/Unity/unity_0_cxx\.cxx"' "$build/compile_commands.json" | head -1)
unit_command=${unit_command#\"command\": \"}
unit_command=${unit_command%% -o *}
[ -n "$unit_command" ] || { echo "lint: FAILED: no unity unit in $build/compile_commands.json"; exit 1; }
# shellcheck disable=SC2086  # the compile command is split into its words on purpose
if ! printf '%s\0' "${apps[@]}" | xargs -0 -P "$(nproc)" -n 1 $unit_command -fsyntax-only -Werror; then
  echo "lint: FAILED: a file of apps/ does not compile on its own (the error is above)"
  exit 1
fi
echo "lint: clean"
