#!/usr/bin/env bash
# Fuzzes the loader, both engines, compare, the trace writer/reader and the printer of saved traces
# with libFuzzer (clang, AddressSanitizer, UndefinedBehaviorSanitizer), seeded with data/, the
# bad-input corpus, small saved traces (fuzz/seeds/) and the inputs it once found (tests/data/fuzz/).
# Fails on any crash, leak, hang (10 s for one input), sanitizer report or broken invariant.
#
# usage: scripts/fuzz.sh [SECONDS]   (default 120)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
cp data/*.json tests/data/bad/*.json fuzz/seeds/*.json tests/data/fuzz/*.json "$work/corpus/"
echo "fuzz: running for ${seconds} s"
status=0
build/fuzz/fuzz_attention -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" > "$work/log" 2>&1 || status=$?
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^Done' "$work/log" || true
if [ "$status" -ne 0 ] || ls "$work/artifacts/"* >/dev/null 2>&1; then
  grep -v '^    #' "$work/log" | tail -40
  for f in "$work/artifacts/"*; do [ -e "$f" ] && { echo "--- $f"; head -c 2000 "$f"; echo; }; done
  echo "fuzz: FAILED"
  exit 1
fi
echo "fuzz: no crash, leak, hang or sanitizer report"
