#!/usr/bin/env bash
# Fuzzes the loader, both engines, compare, the trace writer/reader, the printer of saved traces and
# the readers of tensor dumps (.npy, .safetensors, JSON nested arrays) (fuzz/fuzz_attention.cpp), and
# diff on folders of dumps (fuzz/fuzz_diff.cpp), each for SECONDS, with libFuzzer (clang,
# AddressSanitizer, UndefinedBehaviorSanitizer), seeded with data/, the bad-input corpus, small saved
# traces and tensor dumps (fuzz/seeds/), the inputs it once found (tests/data/fuzz/,
# tests/data/compare/), the RoPE and ALiBi inputs (tests/data/positions/) and the input of every
# PyTorch golden case (tests/conformance/golden/).
# Fails on any crash, leak, hang (10 s for one input), sanitizer report or broken invariant.
#
# usage: scripts/fuzz.sh [SECONDS]   (default 120)
#   FUZZ_PRESET=sanitize scripts/fuzz.sh 30   fuzzes with the target of the sanitizer build that CI has
#                                             just built and tested (the default preset is fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
preset=${FUZZ_PRESET:-fuzz}
max_len=4096  # bytes of one input: the fuzzer is after wrong code paths, not big matrices
# Without the explorer's WebAssembly core, which no target here needs (the sanitize preset has one already).
cmake --preset "$preset" -DATTN_EXPLORER=OFF >/dev/null
cmake --build --preset "$preset" --target fuzz_attention fuzz_diff attn-trace
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
cp data/*.json tests/data/bad/*.json fuzz/seeds/*.json fuzz/seeds/*.npy fuzz/seeds/*.safetensors tests/data/fuzz/*.json tests/data/compare/*.json \
  tests/data/positions/*.json "$work/corpus/"
# Each golden file is {"input": {...}, ...}: its input, written compactly, joins the corpus. One longer
# than max_len would be cut short by the fuzzer (and refused as JSON), so its numbers are rounded to the
# most significant digits that fit; one that fits at none of them is left out, with its name.
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - tests/conformance/golden "$work/corpus" "$max_len" <<'PY'
import json, pathlib, sys

golden, corpus, limit = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])

def rounded(x, digits):
    if isinstance(x, float):
        return float(f"{x:.{digits}g}")  # 17 digits give back every double exactly
    if isinstance(x, list):
        return [rounded(v, digits) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v, digits) for k, v in x.items()}
    return x

exact, shortened, left_out = 0, 0, []
for path in sorted(golden.glob("*.json")):
    case = json.loads(path.read_text(encoding="utf-8"))["input"]
    for digits in (17, 8, 6, 5, 4, 3):
        text = json.dumps(rounded(case, digits), separators=(",", ":"), ensure_ascii=False)
        if len(text.encode("utf-8")) <= limit:
            break
    else:
        left_out.append(path.name)
        continue
    (corpus / f"golden_{path.name}").write_text(text, encoding="utf-8")
    exact, shortened = (exact + 1, shortened) if digits == 17 else (exact, shortened + 1)
note = f"; over {limit} bytes even with 3 digits, left out: {', '.join(left_out)}" if left_out else ""
print(f"fuzz: {exact + shortened} golden inputs in the corpus ({exact} exact, {shortened} with rounded numbers){note}")
PY
else
  echo "fuzz: /usr/bin/python3 not found: the golden cases' inputs are not in the corpus"
fi
# fuzz_diff's corpus: the bundled examples' own steps and gradients as dumps (fuzz/fuzz_diff.cpp says
# how its bytes are laid out), all of them, the forward steps and the gradients, in float64 JSON.
mkdir -p "$work/diff-corpus"
/usr/bin/python3 fuzz/diff_seeds.py "build/$preset/attn-trace" "$work/diff-corpus"

# One target's run: its figures, and on a finding the log and the inputs that found it.
fuzz() {
  local target=$1 corpus=$2 length=$3 status=0
  echo "fuzz: $target for ${seconds} s"
  rm -rf "$work/artifacts" && mkdir -p "$work/artifacts"
  "build/$preset/$target" -max_total_time="$seconds" -max_len="$length" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$corpus" > "$work/log" 2>&1 || status=$?
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^Done' "$work/log" || true
  if [ "$status" -ne 0 ] || ls "$work/artifacts/"* >/dev/null 2>&1; then
    grep -v '^    #' "$work/log" | tail -40
    for f in "$work/artifacts/"*; do [ -e "$f" ] && { echo "--- $f"; head -c 2000 "$f"; echo; }; done
    echo "fuzz: $target FAILED"
    exit 1
  fi
}
fuzz fuzz_attention "$work/corpus" "$max_len"
fuzz fuzz_diff "$work/diff-corpus" 65536  # a dump of every step of an example takes some kilobytes
echo "fuzz: no crash, leak, hang or sanitizer report"
