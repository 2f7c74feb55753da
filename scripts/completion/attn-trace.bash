# bash completion for attn-trace                                  -*- shell-script -*-
#
# Installed as ${datadir}/bash-completion/completions/attn-trace, where bash-completion 2 loads it on
# first use; or source it from ~/.bashrc. It needs nothing but bash 4 and its builtins (complete,
# compgen, compopt, mapfile): not bash-completion's helpers.
#
# Completes the commands, each command's options, the values of --engine, --dtype, --mask, --color, --view, --color-scale,
# --format, --mistake, --steps (a comma list) and --step (the names of `attn-trace steps --names`), the names of
# `attn-trace example`, and *.json files (or -) for FILE.

# The options of each command, as apps/attn-trace/*.cpp declares them.
_attn_trace_display_options='--max-memory --precision --color --max-rows --max-cols --view --color-scale'
_attn_trace_trace_options="--dtype --block-q --block-k --steps --head --json $_attn_trace_display_options"
_attn_trace_plot_options='--step --head --all-heads --batch -o --output --engine --dtype --grad-seed --max-memory --color-scale --max-cells --help'

# The step names: `attn-trace steps --names` of the attn-trace being completed (the pipeline's one
# table), found as for the example names below.
_attn_trace_step_names() {
  local program=${1/#\~\//$HOME/}
  [[ $program == */* && -x $program ]] || program=attn-trace
  "$program" steps --names 2>/dev/null
}

# Sets COMPREPLY to the words of the list $1 that start with $2.
_attn_trace_words() {
  mapfile -t COMPREPLY < <(compgen -W "$1" -- "$2")
}

# Sets COMPREPLY to the *.json files and the folders that start with $1, and "-" (standard input).
_attn_trace_json_files() {
  mapfile -t COMPREPLY < <(compgen -f -X '!*.json' -- "$1"; compgen -d -- "$1")
  [[ -z $1 || $1 == - ]] && COMPREPLY+=(-)
  # Let readline quote names with spaces and mark folders with a slash.
  compopt -o filenames 2>/dev/null
  return 0
}

# The example names: the first word of each line of `attn-trace example --list` that does not start
# with a space (a description too long for the width continues on indented lines), from the attn-trace
# being completed when it was typed as a path, else from PATH.
_attn_trace_examples() {
  local program=${1/#\~\//$HOME/} line
  [[ $program == */* && -x $program ]] || program=attn-trace
  "$program" example --list 2>/dev/null | while IFS= read -r line; do
    [[ $line == [![:space:]]* ]] && printf '%s\n' "${line%% *}"
  done
}

_attn_trace() {
  COMPREPLY=()
  local cword=$COMP_CWORD
  local cur=${COMP_WORDS[cword]} prev=''
  ((cword > 0)) && prev=${COMP_WORDS[cword - 1]}

  # --option=value: bash splits it at "=" (COMP_WORDBREAKS), into "--option" "=" "value".
  local eq_prefix=''
  if [[ $cur == = ]]; then
    cur=''
  elif [[ $prev == = ]] && ((cword > 1)); then
    prev=${COMP_WORDS[cword - 2]}
  elif [[ $cur == --*=* ]]; then  # "=" taken out of COMP_WORDBREAKS: one word
    prev=${cur%%=*}
    eq_prefix=$prev=
    cur=${cur#*=}
  fi

  # The command, and how many of its positional arguments come before the word being completed.
  local command='' positionals=0 i word after_dashdash=0 takes_value=0
  for ((i = 1; i < cword; i++)); do
    word=${COMP_WORDS[i]}
    if [[ -z $command ]]; then
      case $word in run | compare | properties | scaling | explain | diff | import | bench | show | plot | report | explore | example | new | steps) command=$word ;; esac
      continue
    fi
    if ((takes_value)); then
      takes_value=0
      [[ $word == = ]] && takes_value=1  # "--opt" "=" "value"
      continue
    fi
    if ((after_dashdash)) || [[ $word == - || $word != -* ]]; then
      positionals=$((positionals + 1))
    elif [[ $word == -- ]]; then
      after_dashdash=1
    elif [[ $word != *=* && $word != --help && $word != -h && $word != --list && $word != --all-heads &&
            $word != --integers && $word != --output-projection && $word != --bfloat16 ]]; then
      takes_value=1
    fi
  done

  if [[ -z $command ]]; then
    if [[ $cur == -* ]]; then
      _attn_trace_words '--help --version' "$cur"
    else
      _attn_trace_words 'run compare properties scaling explain diff import bench show plot report explore example new steps' "$cur"
    fi
    return 0
  fi

  # The value of an option.
  if [[ $prev == --* || $prev == -o ]] && ((!after_dashdash)); then
    local values='' value_kind=words
    case $prev in
      --engine)
        [[ $command == run || $command == plot || $command == report || $command == explore || $command == bench ]] &&
          values='naive flash both'
        [[ $command == explain ]] && values='naive flash' ;;
      --dtype)
        values='float32 float64'
        [[ $command == run || $command == compare || $command == diff || $command == bench || $command == explore ]] &&
          values='float32 float64 float16 bfloat16' ;;
      --color) values='auto always never' ;;
      --view) values='numbers heatmap auto' ;;
      --color-scale) values='auto absolute row log' ;;
      --format) [[ $command == run || $command == show ]] && values='text markdown latex csv' ;;
      --mistake)
        [[ $command == run || $command == report ]] &&
          values='list no-scale no-mask mask-after-softmax softmax-columns shared-qkv wrong-reshape minus-1e9' ;;
      --steps) value_kind=steps ;;
      --step) values=$(_attn_trace_step_names "${COMP_WORDS[0]}") ;;
      --grad) [[ $command == explain ]] && values=$(_attn_trace_step_names "${COMP_WORDS[0]}" | grep '^d_') ;;
      --x) value_kind=output ;;  # a .npy file
      --json | -o | --output)
        [[ $command == explain && $prev == --output ]] && return 0  # a column number
        value_kind=output ;;
      --mask) [[ $command == new || $command == import || $command == bench ]] && values='none causal' ;;  # or sliding_window:W
      --style) [[ $command == import ]] && values='gpt2 llama bert torch-mha' ;;
      --block-q | --block-k | --head | --batch | --max-memory | --precision | --max-rows | --max-cols | --max-cells | --seed | \
        --samples | --d-k | --d-model | --heads | --kv-heads | --tokens | --context-tokens | --query | --key | --name | \
        --prefix | --seed | --grad-seed | --index | --n | --rope-theta | --m | --repeat | --threads | --sweep)
        return 0 ;;  # a number: nothing to offer
      *) value_kind=none ;;
    esac
    case $value_kind in
      words)
        _attn_trace_words "$values" "$cur"
        [[ -n $eq_prefix ]] && COMPREPLY=("${COMPREPLY[@]/#/$eq_prefix}")
        return 0
        ;;
      steps)
        # A comma list: complete the last name, keep what comes before it, skip names already given.
        local done_part='' last=$cur step remaining=''
        if [[ $cur == *,* ]]; then
          done_part=${cur%,*},
          last=${cur##*,}
        fi
        for step in $(_attn_trace_step_names "${COMP_WORDS[0]}") tiles; do
          [[ ,$done_part == *,$step,* ]] || remaining+=" $step"
        done
        _attn_trace_words "$remaining" "$last"
        COMPREPLY=("${COMPREPLY[@]/#/$eq_prefix$done_part}")
        compopt -o nospace 2>/dev/null  # so that ",next" can follow
        return 0
        ;;
      output)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        [[ -z $cur || $cur == - ]] && COMPREPLY+=(-)
        compopt -o filenames 2>/dev/null
        return 0
        ;;
    esac
  fi

  # An option name, or a positional argument.
  local options
  case $command in
    run) options="--engine $_attn_trace_trace_options --format --backward --grad-seed --mistake --help" ;;
    compare) options="$_attn_trace_trace_options --backward --grad-seed --help" ;;
    show) options="--steps --head $_attn_trace_display_options --format --help" ;;
    plot) options=$_attn_trace_plot_options ;;
    report) options='--engine --dtype --block-q --block-k --steps --head --backward --grad-seed --max-memory -o --output --mistake --color-scale --help' ;;
    explore) options='--engine --dtype --block-q --block-k --backward --max-memory -o --output --help' ;;
    example) options='--list --help' ;;
    properties) options='--dtype --seed --json --max-memory --help' ;;
    scaling) options='--d-k --samples --seed --json --max-memory --precision --help' ;;
    explain) options='--query --key --head --batch --output --grad --index --grad-seed --engine --dtype --block-q
                      --block-k --json --max-memory --precision --color --help' ;;
    import) options='--style --prefix --x --seed --n --heads --kv-heads --tokens --mask --rope-theta -o --output
                     --max-memory --help' ;;
    diff) options='--name --dtype --bfloat16 --json --grad-seed --max-memory --precision --color --help' ;;
    bench) options='--n --m --d-model --heads --kv-heads --mask --engine --dtype --repeat --threads --seed --sweep --json
                    --max-memory --backward --color --help' ;;
    steps) options='--names --json --help' ;;
    new) options='--tokens --context-tokens --d-model --heads --kv-heads --d-k --mask --output-projection --integers
                  --seed -o --output --max-memory --help' ;;
  esac
  if [[ $cur == -* ]] && ((!after_dashdash)); then
    _attn_trace_words "$options" "$cur"
    # A lone "-" may also be FILE: standard input.
    [[ $cur == - && $command != example && $command != scaling && $command != new && $command != import ]] &&
      ((positionals == 0)) &&
      COMPREPLY+=(-)
    return 0
  fi
  if ((positionals == 0)); then
    case $command in
      run | compare | properties | explain | diff | bench | show | plot | report | explore) _attn_trace_json_files "$cur" ;;
      example) _attn_trace_words "$(_attn_trace_examples "${COMP_WORDS[0]}")" "$cur" ;;
      scaling | new) _attn_trace_words "$options" "$cur" ;;  # no FILE: only options
      import)  # WEIGHTS: a .safetensors file, or a folder of .npy files
        mapfile -t COMPREPLY < <(compgen -d -- "$cur"; compgen -f -X '!*.safetensors' -- "$cur")
        compopt -o filenames 2>/dev/null ;;
    esac
  elif [[ $command == diff ]] && ((positionals == 1)); then
    # DUMPS: a folder, or a .safetensors file
    mapfile -t COMPREPLY < <(compgen -d -- "$cur"; compgen -f -X '!*.safetensors' -- "$cur")
    compopt -o filenames 2>/dev/null
  elif [[ -z $cur ]]; then
    _attn_trace_words "$options" ''  # the one positional is given: only options remain
  fi
  return 0
}

complete -F _attn_trace attn-trace
