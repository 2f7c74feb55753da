#!/usr/bin/env bash
# Quick start, second command: set up, build, and run every test. .ci/run runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release
