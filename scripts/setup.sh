#!/usr/bin/env bash
# Installs what attn-trace needs to build and test, from Debian 12's packages, when it is missing.
# Run as root (or with sudo) on a fresh machine; on a machine that has everything it does nothing.
set -euo pipefail

packages=(g++ make cmake libcli11-dev libfmt-dev nlohmann-json3-dev catch2
          clang libclang-rt-14-dev
          python3 python3-numpy python3-jsonschema python3-torch)
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
