#!/usr/bin/env bash
# Sources the bash completion in a plain, non-interactive bash (no bash-completion helpers), completes
# command lines by setting COMP_WORDS and COMP_CWORD as bash does, and checks COMPREPLY.
# usage: completion_test.sh scripts/completion/attn-trace.bash path/to/attn-trace
set -uo pipefail
completion=${1:?usage: completion_test.sh COMPLETION_FILE ATTN_TRACE}
attn_trace=$(realpath "${2:?usage: completion_test.sh COMPLETION_FILE ATTN_TRACE}")

# The step names come from `attn-trace steps --names` of the attn-trace on PATH: the one under test.
PATH="$(dirname "$attn_trace"):$PATH"

# shellcheck source=/dev/null
source "$completion" || { echo "FAIL: sourcing $completion"; exit 1; }

# The function that `complete -p` says completes attn-trace.
spec=$(complete -p attn-trace 2>/dev/null)
[[ $spec =~ -F\ ([^ ]+)\ attn-trace$ ]] || { echo "FAIL: no 'complete -F FUNCTION attn-trace' (got: '$spec')"; exit 1; }
function=${BASH_REMATCH[1]}

failures=0
checks=0

# complete WORD...: the words of the line as bash splits them, the last one being completed.
# Leaves the sorted completions in $got, one line each.
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  "$function" attn-trace "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]:-}"
  got=$(printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort)
}

show_line() { local w out=''; for w in "${COMP_WORDS[@]}"; do out+="'$w' "; done; printf '%s' "$out"; }

# expect_lines $'a\nb c' WORD...: the completions are exactly these lines (names with spaces).
expect_lines() {
  local want
  want=$(printf '%s\n' "$1" | grep -v '^$' | LC_ALL=C sort)
  shift
  complete_words "$@"
  ((checks++))
  if [[ $got != "$want" ]]; then
    ((failures++))
    echo "FAIL: $(show_line)"
    echo "  expected: ${want//$'\n'/ | }"
    echo "  got:      ${got//$'\n'/ | }"
  fi
}

# expect_exactly "a b c" WORD...: the completions are exactly these words.
expect_exactly() {
  local words=$1
  shift
  expect_lines "${words//[[:space:]]/$'\n'}" "$@"
}

# expect_has "a b" "x y" WORD...: the completions include every word of the first list and none of the
# second.
expect_has() {
  local present=$1 absent=$2 w bad=''
  shift 2
  complete_words "$@"
  ((checks++))
  for w in $present; do grep -qxF -- "$w" <<<"$got" || bad+=" missing $w;"; done
  for w in $absent; do grep -qxF -- "$w" <<<"$got" && bad+=" unexpected $w;"; done
  if [[ -n $bad ]]; then
    ((failures++))
    echo "FAIL: $(show_line):$bad"
    echo "  got: ${got//$'\n'/ | }"
  fi
}

# The commands and the top-level options.
expect_exactly "report run" attn-trace r
expect_exactly "explain explore" attn-trace exp
expect_exactly "run" attn-trace ru
expect_exactly "bench compare decode diff example explain explore import new plot properties report run scaling show steps" attn-trace ''
expect_exactly "--names --json --help" attn-trace steps --
expect_exactly "properties plot" attn-trace p
expect_exactly "--dtype --seed --json --max-memory --help" attn-trace properties x.json --
expect_exactly "--d-k --samples --seed --json --max-memory --precision --help" attn-trace scaling ''
expect_exactly "--d-k --d-model" attn-trace new --d-
expect_exactly "none causal" attn-trace new --heads 2 --integers --mask ''
expect_exactly "--output --output-projection" attn-trace new --output
expect_exactly "" attn-trace scaling --samples ''
expect_exactly "--help --version" attn-trace --
expect_exactly "--version" attn-trace --v

# Each command's options.
trace_options="--dtype --block-q --block-k --steps --head --json --max-memory --precision --color
               --max-rows --max-cols --view --color-scale"
expect_exactly "--engine $trace_options --format --backward --grad-seed --dropout --dropout-seed --mistake --help" \
  attn-trace run x.json --
expect_exactly "$trace_options --backward --grad-seed --dropout --dropout-seed --help" attn-trace compare x.json --
expect_exactly "--prompt --split-kv --page-size --page-seed --layers --dtype --json --report --max-memory --precision --color
                --max-rows --max-cols --view --color-scale --help" attn-trace decode x.json --
expect_exactly "--prompt --page-size --page-seed --precision" attn-trace decode x.json --p
expect_exactly "--steps --head --max-memory --precision --color --max-rows --max-cols --view --color-scale --format --help" \
  attn-trace show t.json --
expect_exactly "--list --help" attn-trace example --
expect_exactly "--step --head --all-heads --batch -o --output --engine --dtype --grad-seed --max-memory --color-scale --max-cells --help" \
  attn-trace plot x.json -
expect_exactly "--engine --dtype --block-q --block-k --steps --head --backward --grad-seed --dropout --dropout-seed
                --max-memory --output --mistake --color-scale --help" attn-trace report x.json --
expect_exactly "naive flash both" attn-trace report x.json --engine ''
expect_exactly "--engine --dtype --block-q --block-k --backward --max-memory --output --help" attn-trace explore x.json --
expect_exactly "float32 float64 float16 bfloat16" attn-trace explore --dtype ''
expect_exactly "naive flash both" attn-trace explore --engine ''
expect_exactly "text markdown latex csv" attn-trace show t.json --format ''
expect_exactly "--query --key --head --batch --output --decode --grad --index --grad-seed --engine --dtype --block-q --block-k
                --json --max-memory --precision --color --help" attn-trace explain x.json --
expect_exactly "d_W_q d_W_k d_W_v d_W_o" attn-trace explain x.json --grad d_W
expect_exactly "naive flash" attn-trace explain x.json --engine ''
expect_exactly "--name --dtype --bfloat16 --json --grad-seed --max-memory --precision --color --help" attn-trace diff x.json d/ --
expect_exactly "float32 float64 float16 bfloat16" attn-trace diff x.json d/ --dtype ''
expect_exactly "--n --m --d-model --heads --kv-heads --mask --engine --dtype --repeat --threads --seed --sweep --json --max-memory --backward --decode --split-kv --color --help" attn-trace bench --
expect_exactly "naive flash both" attn-trace bench --engine ''
expect_exactly "none causal" attn-trace bench --mask ''
expect_exactly "float32 float64 float16 bfloat16" attn-trace bench --dtype ''
expect_exactly "" attn-trace bench --threads ''
expect_exactly "float32 float64 float16 bfloat16" attn-trace compare x.json --dtype ''
expect_exactly "bfloat16" attn-trace run x.json --dtype b
expect_exactly "float32 float64" attn-trace explain x.json --dtype ''
expect_exactly "" attn-trace diff x.json d/ --name ''
expect_exactly "gpt2 llama bert torch-mha gemma2" attn-trace import w.safetensors --style ''
expect_exactly "--style" attn-trace import w.safetensors --st
expect_exactly "--prefix" attn-trace import w.safetensors --style gpt2 --pr
expect_exactly "" attn-trace explain x.json --output ''
expect_exactly "mask-after-softmax minus-1e9" attn-trace run x.json --mistake m
expect_exactly "list" attn-trace run --mistake l
expect_exactly "no-scale no-mask" attn-trace report x.json --mistake no
expect_exactly "dropout-unscaled" attn-trace run x.json --mistake d
expect_exactly "" attn-trace report x.json --mistake l  # report has no --mistake list
expect_exactly "--max-memory --max-rows --max-cols" attn-trace run x.json --max-
expect_exactly "--backward --block-q --block-k" attn-trace compare - --b

# Every option that a command's --help names is offered, for every command --help lists: the lists above
# are written out by hand; this reads the binary's own help (another reader than the completion's).
for command in $(COLUMNS=200 "$attn_trace" --help | sed -n '/^Subcommands:/,/^$/p' | grep -oE '^  [a-z]+'); do
  options=$(COLUMNS=200 "$attn_trace" "$command" --help | grep -oE '^  (-[A-Za-z],)?--[a-z0-9-]+' | sed 's/^ *//; s/^-.,//')
  [[ -n $options ]] || { ((failures++)); echo "FAIL: attn-trace $command --help lists no option"; }
  expect_has "$options" "" attn-trace "$command" x.json --
done

# Option values, as separate words and after "=" (which bash splits into a word of its own).
expect_exactly "naive flash both" attn-trace run x.json --engine ''
expect_exactly "flash" attn-trace run x.json --engine f
expect_exactly "naive flash both" attn-trace run x.json --engine = ''
expect_exactly "both" attn-trace run --engine = b
expect_exactly "" attn-trace compare x.json --engine ''
expect_exactly "float64" attn-trace run x.json --dtype float6
expect_exactly "auto always never" attn-trace show t.json --color ''
expect_exactly "numbers heatmap auto" attn-trace run x.json --view ''
expect_exactly "auto absolute row log" attn-trace plot x.json --color-scale ''
expect_exactly "" attn-trace plot x.json --max-cells ''
expect_exactly "heatmap" attn-trace compare x.json --view h
expect_exactly "auto always" attn-trace run x.json --color a
expect_exactly "" attn-trace run x.json --head ''
expect_exactly "" attn-trace run x.json --max-memory ''
expect_exactly "naive flash both" attn-trace plot x.json --engine ''
expect_exactly "q k v q_heads k_heads v_heads q_rot k_rot scores scaled capped bias masked weights sink_weights dropped head_outputs concat output
                d_output d_concat d_head_outputs d_dropped d_weights d_v_heads d_masked d_capped d_scaled d_scores d_q_rot d_k_rot d_q_heads d_k_heads d_q d_k d_v d_X d_context d_W_q d_W_k d_W_v d_W_o d_b_q d_b_k d_b_v d_b_o d_sinks" attn-trace plot x.json --step ''
expect_exactly "weights" attn-trace plot x.json --step w
expect_exactly "" attn-trace plot x.json --batch ''

# --steps: a comma list; the names already given are not offered again.
expect_exactly "q k v q_heads k_heads v_heads q_rot k_rot scores scaled capped bias masked weights sink_weights dropped head_outputs concat output
                d_output d_concat d_head_outputs d_dropped d_weights d_v_heads d_masked d_capped d_scaled d_scores d_q_rot d_k_rot d_q_heads d_k_heads d_q d_k d_v d_X d_context d_W_q d_W_k d_W_v d_W_o d_b_q d_b_k d_b_v d_b_o d_sinks tiles" attn-trace run x.json --steps ''
expect_exactly "q q_heads q_rot" attn-trace run x.json --steps q
expect_exactly "d_q d_q_heads d_q_rot" attn-trace run x.json --steps d_q
expect_exactly "scores,weights" attn-trace run x.json --steps scores,w
expect_exactly "q,k q,k_heads q,k_rot" attn-trace run x.json --steps q,k
expect_exactly "scores,weights,scaled scores,weights,sink_weights" attn-trace run x.json --steps scores,weights,s
expect_exactly "q,k,v,q_heads q,k,v,k_heads q,k,v,v_heads q,k,v,q_rot q,k,v,k_rot q,k,v,scores q,k,v,scaled
                q,k,v,capped q,k,v,bias q,k,v,masked q,k,v,weights q,k,v,sink_weights q,k,v,dropped q,k,v,head_outputs q,k,v,concat q,k,v,output q,k,v,d_output q,k,v,d_concat q,k,v,d_head_outputs q,k,v,d_dropped q,k,v,d_weights q,k,v,d_v_heads q,k,v,d_masked q,k,v,d_capped q,k,v,d_scaled q,k,v,d_scores q,k,v,d_q_rot q,k,v,d_k_rot q,k,v,d_q_heads q,k,v,d_k_heads q,k,v,d_q q,k,v,d_k q,k,v,d_v q,k,v,d_X q,k,v,d_context q,k,v,d_W_q q,k,v,d_W_k q,k,v,d_W_v q,k,v,d_W_o q,k,v,d_b_q q,k,v,d_b_k q,k,v,d_b_v q,k,v,d_b_o q,k,v,d_sinks q,k,v,tiles" \
  attn-trace run x.json --steps q,k,v,
expect_exactly "scores,scaled" attn-trace compare x.json --steps = scores,sc

# The example names come from the binary's `example --list`: the first word of its lines that do not
# start with a space, since a narrow width wraps the descriptions onto indented lines.
export COLUMNS=60
names=$("$attn_trace" example --list | grep -v '^ ' | while read -r name _; do echo "$name"; done)
[[ $(wc -l <<<"$names") -ge 9 ]] || { echo "FAIL: '$attn_trace example --list' listed too few examples"; exit 1; }
COMP_WORDS_0=$attn_trace
expect_exactly "$names" "$COMP_WORDS_0" example ''
expect_has "the-cat-sat gpt-causal gqa" "run" "$COMP_WORDS_0" example ''
expect_exactly "the-cat-sat" "$COMP_WORDS_0" example the-
expect_exactly "gpt-causal gpt2-layer gqa" "$COMP_WORDS_0" example g
expect_exactly "bert-bias bert-layer" "$COMP_WORDS_0" example be  # not bert.encoder… of a wrapped description
expect_exactly "--list --help" "$COMP_WORDS_0" example gqa ''
# Typed by name, attn-trace is looked up on PATH.
PATH="$(dirname "$attn_trace"):$PATH" expect_has "the-cat-sat" "" attn-trace example ''

# Files: *.json, folders and "-" for FILE; any file for --json; the option values are not FILE.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/inputs" "$work/two words"
touch "$work/a.json" "$work/b.json" "$work/notes.txt" "$work/two words/c.json" "$work/model.safetensors"
cd "$work" || exit 1
expect_lines $'a.json\nb.json\ninputs\ntwo words\n-' attn-trace run ''
expect_exactly "a.json" attn-trace compare a
expect_lines "two words/c.json" attn-trace show "two words/"
expect_lines $'a.json\nb.json\ninputs\ntwo words\n-' attn-trace run --engine flash --dtype = float64 ''
expect_has "- --engine --dtype" "a.json" attn-trace run -
expect_has "--engine" "-" attn-trace run a.json -
expect_has "--engine --dtype --help" "a.json b.json" attn-trace run a.json ''
expect_has "--precision" "a.json" attn-trace show - ''
expect_lines $'a.json\nb.json\ninputs\nmodel.safetensors\nnotes.txt\ntwo words\n-' attn-trace run a.json --json ''
expect_exactly "notes.txt" attn-trace run a.json --json n
expect_exactly "notes.txt" attn-trace plot a.json -o n
expect_lines $'a.json\nb.json\ninputs\ntwo words\n-' attn-trace plot --all-heads ''
expect_has "--step --all-heads" "a.json" attn-trace plot a.json --all-heads ''
expect_lines $'inputs\ntwo words\nmodel.safetensors' attn-trace diff a.json ''
expect_lines $'a.json\nb.json\ninputs\ntwo words\n-' attn-trace diff --bfloat16 ''
expect_lines $'inputs\ntwo words\nmodel.safetensors' attn-trace import ''

if ((failures)); then
  echo "$failures of $checks completions wrong"
  exit 1
fi
echo "all $checks completions right"
