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
shot "$work/terminal.html" "$out/terminal-heatmap.png" 960,700

# The SVG figures of `attn-trace plot`, at twice their size in user units (sharp on a high-density screen).
svg_shot() {
  local svg=$1 png=$2 size
  size=$(python3 -c 'import re,sys; s=open(sys.argv[1]).read(); print("%s,%s" % re.search(r"<svg[^>]*\swidth=\"([\d.]+)\"[^>]*\sheight=\"([\d.]+)\"", s).groups())' "$svg")
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=2 \
    --window-size="$size" --screenshot="$png" "file://$(realpath "$svg")" 2>/dev/null
  echo "pictures: $png"
}
"$bin" plot data/the_cat_sat.json -o "$work/plot-weights.svg"
svg_shot "$work/plot-weights.svg" "$out/plot-weights.png"
"$bin" plot data/gpt_causal.json --all-heads -o "$work/plot-all-heads.svg"
svg_shot "$work/plot-all-heads.svg" "$out/plot-all-heads.png"
"$bin" plot data/the_cat_sat.json --step scaled -o "$work/plot-scaled.svg"
svg_shot "$work/plot-scaled.svg" "$out/plot-scaled.png"

# The HTML report: the worked example, a weight under the pointer, the tile walk, the dark theme; and the
# explorer (attn-trace explore) once its core has computed the worked example in the page.
/usr/bin/python3 scripts/report_pictures.py "$bin" "$out"
