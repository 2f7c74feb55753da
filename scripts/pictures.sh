#!/usr/bin/env bash
# Makes the pictures of docs/pictures.md from real output, with headless Chromium: the terminal heatmaps
# (the colour output of attn-trace, turned into a page by scripts/ansi_to_html.py), the SVG figures of
# `attn-trace plot`, and the HTML report of `attn-trace report`.
#
# usage: scripts/pictures.sh [path/to/attn-trace]   (default: build/release/attn-trace)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/release/attn-trace}")
out=docs/images
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A screenshot of a page (a file path) at a window size.
shot() {
  local page=$1 png=$2 size=$3
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --window-size="$size" --screenshot="$png" "file://$(realpath "$page")" 2>/dev/null
  echo "pictures: $png"
}

# The terminal: the weights of every head of the grouped-query example in 24-bit colour.
COLUMNS=100 COLORTERM=truecolor LC_ALL=C.UTF-8 "$bin" run data/gqa.json --steps masked,weights --head 1 \
  --view heatmap --color always | python3 scripts/ansi_to_html.py > "$work/terminal.html"
shot "$work/terminal.html" "$out/terminal-heatmap.png" 860,700
