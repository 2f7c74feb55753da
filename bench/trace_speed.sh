#!/usr/bin/env bash
# How long a large trace takes to write and to read back: n = 512 tokens, 8 heads, d_model = 512,
# causal. Prints the best of three wall-clock times for each command, and the trace's size.
#
# usage: bench/trace_speed.sh [path/to/attn-trace]   (default: build/release/attn-trace)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/attn-trace}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 bench/make_input.py 512 512 8 > "$work/input.json"

# Microseconds of the fastest of three runs of the command.
best_of_three() {
  local best="" start t
  for _ in 1 2 3; do
    start=${EPOCHREALTIME/./}
    "$@" > /dev/null
    t=$(( ${EPOCHREALTIME/./} - start ))
    if [ -z "$best" ] || (( t < best )); then best=$t; fi
  done
  echo "$best"
}
seconds() { printf '%d.%02d' $(( $1 / 1000000 )) $(( $1 % 1000000 / 10000 )); }

compute=$(best_of_three "$bin" run "$work/input.json" --steps output)
with_json=$(best_of_three "$bin" run "$work/input.json" --json "$work/trace.json")
show=$(best_of_three "$bin" show "$work/trace.json")
size=$(du -m "$work/trace.json" | cut -f1)

echo "trace of n = 512, h = 8, d_model = 512 (causal), float32, $(nproc) cores"
echo "  run, no trace file (load + compute):   $(seconds "$compute") s"
echo "  run --json (load + compute + write):   $(seconds "$with_json") s"
echo "  writing the trace alone (difference):  $(seconds $(( with_json - compute ))) s"
echo "  show (read + print):                   $(seconds "$show") s"
echo "  trace size:                            ${size} MiB"
