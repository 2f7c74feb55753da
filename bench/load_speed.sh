#!/usr/bin/env bash
# How long loading a 23 MB input takes (issue 14), against Python's json.load on the same file: n = 4096
# tokens, d_model = 512, 8 heads from bench/make_input.py, 26 MB of text holding 3,145,728 numbers.
# Ours is load_problem_file, what every command that takes an input runs: read the file, parse it and
# turn it into a checked Problem. Both sides are the best of three runs and include freeing what they
# built; Python is Debian's (/usr/bin/python3), timed as `json.load(open(path))`.
#
# usage: bench/load_speed.sh [path/to/load_bench]   (default: build/release/bench/load_bench)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/bench/load_bench}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 bench/make_input.py 4096 512 8 > "$work/input.json"

report=$("$bin" "$work/input.json" 3)
ours=$(awk '/load_problem_file:/ { print $2 }' <<< "$report")
python=$(/usr/bin/python3 - "$work/input.json" <<'PY'
import json
import sys
import time

best = None
for _ in range(3):
    start = time.perf_counter()
    json.load(open(sys.argv[1]))
    took = time.perf_counter() - start
    best = took if best is None else min(best, took)
print(f"{best:.3f}")
PY
)

echo "loading make_input.py 4096 512 8 ($(du -m "$work/input.json" | cut -f1) MiB), best of 3, $(nproc) cores"
tail -n +2 <<< "$report"
echo "  Python json.load:         $python s"
echo "  ours / Python:            $(awk -v a="$ours" -v b="$python" 'BEGIN { printf "%.2f", a / b }')"
