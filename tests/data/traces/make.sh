#!/usr/bin/env bash
# Writes the stored traces of tests/data/traces/ (see README.md there) with the given binary.
# usage: tests/data/traces/make.sh path/to/attn-trace
set -euo pipefail
bin=$(realpath "${1:?usage: make.sh path/to/attn-trace}")
cd "$(dirname "$0")/../../.."
for input in data/*.json; do
  name=$(basename "$input" .json)
  for dtype in float32 float64; do
    for engine in naive flash both; do
      "$bin" run "$input" --engine "$engine" --dtype "$dtype" --json "tests/data/traces/$name.$engine.$dtype.json" > /dev/null
    done
    "$bin" compare "$input" --dtype "$dtype" --json "tests/data/traces/$name.compare.$dtype.json" > /dev/null
  done
done
