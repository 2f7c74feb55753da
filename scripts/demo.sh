#!/usr/bin/env bash
# Quick start, first command: install what building and running need, build the tool alone (no
# tests), install it (`cmake --install`, prefix /usr/local unless build/release was configured with
# another), and trace the worked example "The cat sat" with the attn-trace found on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

cmake --preset release -DATTN_BUILD_TESTS=OFF >/dev/null
cmake --build --preset release --target attn-trace
# The Python module (import attn_trace), where pybind11 is installed (scripts/setup.sh installs it).
if grep -q '^ATTN_HAS_PYTHON_MODULE:INTERNAL=ON' build/release/CMakeCache.txt 2>/dev/null; then
  cmake --build --preset release --target attn_trace_core
fi

prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' build/release/CMakeCache.txt)
sudo=""
[ "$(id -u)" -eq 0 ] || [ -w "$prefix" ] || sudo="sudo"
if ! $sudo cmake --install build/release > build/release/install.log 2>&1; then
  cat build/release/install.log >&2
  exit 1
fi
# The record of what was installed stays the user's, so that later installs can rewrite it.
[ -z "$sudo" ] || sudo chown "$(id -u):$(id -g)" build/release/install_manifest.txt

if [ "$(command -v attn-trace)" != "$prefix/bin/attn-trace" ]; then
  echo "demo: installed $prefix/bin/attn-trace, but the attn-trace on PATH is" \
       "'$(command -v attn-trace || echo none)': put $prefix/bin first on PATH" >&2
  exit 1
fi
echo "demo: installed attn-trace in $prefix/bin, its examples, guides and bash completion in $prefix/share" \
     "(the list: build/release/install_manifest.txt)"
echo
attn-trace run data/the_cat_sat.json
