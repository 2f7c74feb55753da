#!/usr/bin/env bash
# attn-trace bench against NumPy + OpenBLAS on the same shapes, in the same run (issue 14).
#
# Debian's NumPy runs on whatever libblas.so.3 the system's alternatives name, by default the reference
# BLAS (about 5 GFLOP/s), which proves nothing. So this script fetches Debian's libopenblas0-openmp with
# `apt-get download` (and any of its dependencies that are not installed), unpacks it with
# `dpkg-deb -x` into a cache folder without installing it (installing would switch the system's BLAS),
# and puts its libblas.so.3 / liblapack.so.3 on LD_LIBRARY_PATH for NumPy's runs alone, with
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for that command alone so that OpenBLAS picks its kernel
# itself; the kernel it picked is reported. Where that is a kernel older than AVX2 on a processor with
# AVX2 or AVX-512 (one that OpenBLAS 0.3.21 does not know), it is told the processor's widest instead
# (Cooperlake, SkylakeX or Haswell), as src/kernel/blis_gemm.cpp tells BLIS. With ATTN_KERNELS=avx2,
# which stands for a processor without AVX-512 (issue 44's targets hold for it on an AVX-512 machine
# too), OpenBLAS is told to run its AVX2 kernels as well (OPENBLAS_CORETYPE=Haswell): where the AVX-512
# units are full width (Zen 5), its AVX-512 kernels have twice the peak of any AVX2 code. For each
# thread count, attn-trace bench (both engines, each mask) then bench/numpy_attention.py run one after
# the other; bench/numpy_report.py prints the table.
# Then the backward, unmasked: attn-trace bench --backward and bench/numpy_backward.py (NumPy's naive
# backward given the forward's weights) one after the other per thread count, and the ratio of the times.
#
# usage: bench/numpy_compare.sh [options] [path/to/attn-trace]   (default: build/release/attn-trace)
#   --n LIST          queries = keys, comma-separated           (default 4096)
#   --d-model D       width of the tokens                       (default 512)
#   --heads H         heads, splitting d_model evenly           (default 8, so d = 64)
#   --threads LIST    thread counts, comma-separated            (default 1,2)
#   --mask LIST       none, causal or none,causal               (default none,causal)
#   --repeat R        runs of each; the median is compared      (default 3)
#   --rounds N        the forward's runs N times over, ours then NumPy's in turn; each figure the median
#                     over the rounds, each ratio the median of the rounds' own (default 1)
#   --block-q B, --block-k B   NumPy tiled's blocks             (default numpy_attention.py's)
#   --stat S          compare each run's median (default) or min, its fastest repeat
#   --cache DIR       where the .deb files are kept and unpacked (default build/openblas)
#   --json OUT        also write every figure as JSON (the backward's beside it, OUT with .backward.json)
#   --no-backward     leave the backward out
#   --backward-only   the backward alone
# bench/README.md says what is measured.
set -euo pipefail
here=$PWD
root=$(cd "$(dirname "$0")/.." && pwd)

ns=4096 d_model=512 heads=8 threads=1,2 masks=none,causal repeat=3 rounds=1 stat=median cache=build/openblas json="" bin=""
forward=1 backward=1
block_args=()
while (( $# )); do
  case $1 in
    --n) ns=$2; shift 2 ;;
    --d-model) d_model=$2; shift 2 ;;
    --heads) heads=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --mask) masks=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --block-q|--block-k) block_args+=("$1" "$2"); shift 2 ;;
    --stat) stat=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --no-backward) backward=0; shift ;;
    --backward-only) forward=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "numpy_compare.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    *) [ -z "$bin" ] || { echo "numpy_compare.sh: one attn-trace at most" >&2; exit 2; }; bin=$1; shift ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "numpy_compare.sh: --rounds takes a whole number from 1, not '$rounds'" >&2; exit 2; }
# Paths given are the caller's; the defaults are the repository's.
absolute() { case $1 in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }
if [ -n "$bin" ]; then bin=$(absolute "$bin"); else bin=$root/build/release/attn-trace; fi
if [ "$cache" = build/openblas ]; then cache=$root/build/openblas; else cache=$(absolute "$cache"); fi
[ -z "$json" ] || json=$(absolute "$json")
cd "$root"
[ -x "$bin" ] || { echo "numpy_compare.sh: no attn-trace at $bin (build it: cmake --build --preset release)" >&2; exit 1; }
python=/usr/bin/python3  # Debian's, the one with NumPy
"$python" -c 'import numpy' 2>/dev/null || { echo "numpy_compare.sh: $python has no NumPy (apt-get install python3-numpy)" >&2; exit 1; }

package=libopenblas0-openmp

# The .deb files of $package and of those of its dependencies that are not installed, into $cache/debs.
fetch() {
  mkdir -p "$cache/debs"
  local log=$cache/apt.log
  local sandbox=()
  [ "$(id -u)" = 0 ] && sandbox=(-o APT::Sandbox::User=root)  # root downloads into a folder _apt can't write
  if ! (cd "$cache/debs" && apt-get "${sandbox[@]}" download "$package") > "$log" 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      echo "numpy_compare.sh: apt-get download failed; updating the package lists once" >&2
      apt-get update -qq >> "$log" 2>&1 || true
    fi
    (cd "$cache/debs" && apt-get "${sandbox[@]}" download "$package") >> "$log" 2>&1 ||
      { cat "$log" >&2; echo "numpy_compare.sh: could not download $package" >&2; exit 1; }
  fi
  local dep
  for dep in $(apt-cache depends "$package" 2>/dev/null | sed -n 's/^ *|\{0,1\}Depends: \([^<][^ ]*\)$/\1/p' | sort -u); do
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$dep" 2>/dev/null)" != installed ]; then
      echo "numpy_compare.sh: $dep is not installed; fetching it beside $package" >&2
      (cd "$cache/debs" && apt-get "${sandbox[@]}" download "$dep") >> "$log" 2>&1 ||
        { cat "$log" >&2; echo "numpy_compare.sh: could not download $dep" >&2; exit 1; }
    fi
  done
}

# Fetched and unpacked once; later runs reuse $cache/root.
if ! find "$cache/root" -path '*openblas*' -name libblas.so.3 2>/dev/null | grep -q .; then
  echo "numpy_compare.sh: fetching $package into $cache (not installing it)" >&2
  rm -rf "$cache/root" "$cache/debs"
  fetch
  for deb in "$cache"/debs/*.deb; do dpkg-deb -x "$deb" "$cache/root"; done
fi
debs=("$cache"/debs/"$package"_*.deb)
deb=${debs[0]}
version=$(dpkg-deb -f "$deb" Version)
blas=$(find "$cache/root" -path '*openblas*' -name libblas.so.3 | head -n 1)
libdir=$(cd "$(dirname "$blas")" && pwd)
[ -e "$libdir/liblapack.so.3" ] ||
  { echo "numpy_compare.sh: $libdir has libblas.so.3 but no liblapack.so.3" >&2; exit 1; }
# The OpenBLAS folder first, then any other folder of shared objects unpacked beside (dependencies).
ld_path=$libdir
while IFS= read -r dir; do
  dir=$(cd "$dir" && pwd)
  [ "$dir" = "$libdir" ] || ld_path+=:$dir
done < <(find "$cache/root" -name '*.so*' -printf '%h\n' | sort -u)

# What the caller had set, recorded: NumPy's runs go without the first two, and keep OpenMP's wait policy.
record() { if [ -n "${!1+set}" ]; then echo "$1=${!1}"; else echo "$1"; fi; }
unset_record=("$(record OPENBLAS_CORETYPE)" "$(record OPENBLAS_L2_SIZE)")
env_record=("$(record OMP_WAIT_POLICY)")
plain_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
           LD_LIBRARY_PATH="$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# OpenBLAS 0.3.21 names its kernels by the processor's family and model, as BLIS does
# (src/kernel/blis_gemm.cpp), and takes its Prescott ones (SSE3) on a processor it does not know: on an
# Intel Xeon of family 6 model 207 (AVX-512) a 2048² product ran at 33 GFLOP/s there, against 156-160 with
# its AVX-512 kernels. Beside that, any figure of ours would flatter us; so where it picks a core older
# than AVX2 on a processor that has AVX2 or AVX-512, it is told the core of the processor's widest set.
best_core() {
  local flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { local f; for f; do [[ $flags == *" $f "* ]] || return 1; done; }
  if has avx512f avx512bw avx512vl avx512dq avx512_bf16; then echo Cooperlake
  elif has avx512f avx512bw avx512vl avx512dq; then echo SkylakeX
  elif has avx2 fma; then echo Haswell
  fi
}
coretype=
if [ "${ATTN_KERNELS:-}" = avx2 ]; then
  coretype=Haswell
else
  picked=$("${plain_env[@]}" OMP_NUM_THREADS=1 "$python" -c '
import sys
sys.path.insert(0, "bench")
import numpy_attention as na
print((na.openblas_info(na.mapped_libraries()) or {}).get("corename", ""))')
  case $picked in
    Haswell | Zen | SkylakeX | Cooperlake | SapphireRapids | "") ;;
    *)
      coretype=$(best_core)
      [ -z "$coretype" ] ||
        echo "numpy_compare.sh: OpenBLAS took its $picked kernels on this processor; told to take $coretype's" >&2
      ;;
  esac
fi
if [ -n "$coretype" ]; then
  unset_record=("$(record OPENBLAS_L2_SIZE)")
  env_record+=(OPENBLAS_CORETYPE="$coretype")
fi
numpy_env=("${plain_env[@]}" ${coretype:+OPENBLAS_CORETYPE="$coretype"})

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ours=() numpys=() ours_back=() numpys_back=()
IFS=, read -r -a n_list <<< "$ns"
IFS=, read -r -a thread_list <<< "$threads"
IFS=, read -r -a mask_list <<< "$masks"
# The forward: per round, per size and thread count, ours (each mask) then NumPy's.
for (( round = 1; forward && round <= rounds; ++round )); do
  (( rounds == 1 )) || echo "round $round of $rounds" >&2
  for n in "${n_list[@]}"; do
    for t in "${thread_list[@]}"; do
      for mask in "${mask_list[@]}"; do
        echo "attn-trace bench: n = $n, $mask, $t thread(s)" >&2
        out=$work/ours-$round-$n-$t-$mask.json
        "$bin" bench --n "$n" --d-model "$d_model" --heads "$heads" --mask "$mask" --engine both \
          --threads "$t" --repeat "$repeat" --color never --json "$out" > /dev/null
        ours+=("$out")
      done
      echo "NumPy + OpenBLAS: n = $n, $masks, $t thread(s)" >&2
      out=$work/numpy-$round-$n-$t.json
      "${numpy_env[@]}" OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
        "$python" bench/numpy_attention.py --n "$n" --d-model "$d_model" --heads "$heads" --mask "$masks" \
          --repeat "$repeat" "${block_args[@]}" --json "$out" > /dev/null
      numpys+=("$out")
    done
  done
done
for n in "${n_list[@]}"; do
  for t in "${thread_list[@]}"; do
    if (( backward )); then
      echo "attn-trace bench --backward: n = $n, $t thread(s)" >&2
      out=$work/ours-back-$n-$t.json
      "$bin" bench --backward --n "$n" --d-model "$d_model" --heads "$heads" --threads "$t" --repeat "$repeat" \
        --color never --json "$out" > /dev/null
      ours_back+=("$out")
      echo "NumPy + OpenBLAS naive backward: n = $n, $t thread(s)" >&2
      out=$work/numpy-back-$n-$t.json
      "${numpy_env[@]}" OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
        "$python" bench/numpy_backward.py --n "$n" --d-model "$d_model" --heads "$heads" --repeat "$repeat" \
          --json "$out" > /dev/null
      numpys_back+=("$out")
    fi
  done
done

echo >&2
if (( forward )); then
  report=("$python" bench/numpy_report.py --ours "${ours[@]}" --numpy "${numpys[@]}" --rounds "$rounds"
          --package "$package=$version" --unset "${unset_record[@]}" --env "${env_record[@]}" --stat "$stat")
  [ -z "$json" ] || report+=(--json "$json")
  "${report[@]}"
fi
if (( backward )); then
  (( forward )) && echo
  report=("$python" bench/numpy_backward.py --report --ours "${ours_back[@]}" --numpy "${numpys_back[@]}")
  [ -z "$json" ] || report+=(--json "${json%.json}.backward.json")
  "${report[@]}"
fi
