#!/usr/bin/env bash
# The bundled examples of real model layers (data/*_layer.json) are exactly what `attn-trace import`
# writes today from tests/data/models: make_examples.sh into a temporary folder, then byte for byte.
#   usage: tests/models/check_examples.sh path/to/attn-trace
set -euo pipefail
bin=$(realpath "$1")
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$src/tests/models/make_examples.sh" "$bin" "$work"
failed=0
for made in "$work"/*.json; do
  name=$(basename "$made")
  if ! cmp -s "$made" "$src/data/$name"; then
    echo "data/$name differs from what import writes now (regenerate: tests/models/make_examples.sh BIN)"
    failed=1
  fi
done
[ "$(ls "$work"/*.json | wc -l)" -eq 4 ] || { echo "expected 4 examples"; failed=1; }
exit $failed
