#!/usr/bin/env bash
# Quick start, first command: set up, build, and trace the worked example "The cat sat".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
./build/release/attn-trace run data/the_cat_sat.json
