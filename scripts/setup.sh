#!/usr/bin/env bash
# Installs what attn-trace needs from Debian 12's packages, when it is missing. Run as root (or as a
# user who may sudo); on a machine that has everything it does nothing.
#
# usage: scripts/setup.sh            what building and running the tool need (scripts/demo.sh), with
#                                    Emscripten for the explorer's WebAssembly core (attn-trace explore)
#                                    and pybind11 with Python's headers and numpy for the Python module
#                                    (import attn_trace)
#        scripts/setup.sh --tests    that, and what the tests need (scripts/check.sh): Catch2, clang
#                                    and its sanitizer runtimes for fuzzing, clang-format and
#                                    clang-tidy, Python with numpy, jsonschema and PyTorch, Chromium
#                                    with its driver and Selenium for the HTML report's browser tests,
#                                    Google Benchmark for the kernels' micro-benchmarks, and Node.js
#                                    for the explorer's core, pytest, nbconvert and ipykernel for the
#                                    Python module and its notebook
set -euo pipefail

build_packages=(g++ make cmake libcli11-dev libfmt-dev nlohmann-json3-dev libblis-pthread-dev emscripten
                pybind11-dev python3-dev python3-numpy)
test_packages=(catch2 clang libclang-rt-14-dev clang-format clang-tidy python3 python3-numpy python3-jsonschema
               python3-torch chromium chromium-driver python3-selenium libbenchmark-dev nodejs python3-pytest
               jupyter-nbconvert python3-ipykernel)

case ${1:-} in
  '') packages=("${build_packages[@]}") ;;
  --tests) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
