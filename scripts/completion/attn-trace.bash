# bash completion for attn-trace                                  -*- shell-script -*-
#
# Installed as ${datadir}/bash-completion/completions/attn-trace, where bash-completion 2 loads it on
# first use; or source it from ~/.bashrc. It needs nothing but bash 4 and its builtins (complete,
# compgen, compopt, mapfile): not bash-completion's helpers.
#
# Everything it offers comes from the attn-trace being completed, so that it never falls behind the
# command line: the commands from `attn-trace --help`, each command's options, which of them take a
# value and the choices of those that have them (`--engine TEXT:{naive,flash,both}`) from
# `attn-trace COMMAND --help`, the step names for --steps (a comma list), --step and --grad from
# `attn-trace steps --names`, and the names of `attn-trace example --list`. Files are offered for FILE
# (*.json, or -), for the outputs (--json, -o, --output, --x) and for import's WEIGHTS and diff's DUMPS.

# The attn-trace being completed: the path typed, when it is one, else the one on PATH.
_attn_trace_program() {
  local program=${1/#\~\//$HOME/}
  [[ $program == */* && -x $program ]] || program=attn-trace
  printf '%s' "$program"
}

# The step names: `attn-trace steps --names` (the pipeline's one table).
_attn_trace_step_names() {
  "$(_attn_trace_program "$1")" steps --names 2>/dev/null
}

# The commands: the first word of each line of `attn-trace --help` under "Subcommands:".
_attn_trace_commands() {
  local line in=0
  COLUMNS=10000 "$(_attn_trace_program "$1")" --help 2>/dev/null | while IFS= read -r line; do
    if [[ $line == Subcommands:* ]]; then
      in=1
    elif ((in)) && [[ -z $line ]]; then
      break
    elif ((in)) && [[ $line =~ ^\ \ ([a-z][a-z0-9-]*) ]]; then
      printf '%s\n' "${BASH_REMATCH[1]}"
    fi
  done
}

# The options of COMMAND, one line each, "NAME KIND CHOICES", read from `attn-trace COMMAND --help`:
# KIND is "flag", or "value" when a type follows the name (`--head UINT`), and CHOICES the comma list of
# `TYPE:{a,b,c}` (or `{a, b, c}`), or "-". Both names of `-o,--output`; not -h, which --help stands for.
_attn_trace_options() {
  local line name short type kind set
  COLUMNS=10000 "$(_attn_trace_program "$1")" "$2" --help 2>/dev/null | while IFS= read -r line; do
    [[ $line =~ ^\ \ (-([A-Za-z]),)?(--[a-z0-9][a-z0-9-]*)(\ ([^ ]+))? ]] || continue
    short=${BASH_REMATCH[2]} name=${BASH_REMATCH[3]} type=${BASH_REMATCH[5]}
    kind=value set=-
    case $type in '' | Excludes: | Needs: | REQUIRED) kind=flag ;; esac
    [[ $kind == value && $line =~ :\{([^}]*)\} ]] && set=${BASH_REMATCH[1]// /}
    printf '%s %s %s\n' "$name" "$kind" "$set"
    [[ -n $short && $short != h ]] && printf '%s %s %s\n' "-$short" "$kind" "$set"
  done
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

# Sets COMPREPLY to the folders and the *.safetensors files that start with $1 (import's WEIGHTS, diff's DUMPS).
_attn_trace_tensor_files() {
  mapfile -t COMPREPLY < <(compgen -d -- "$1"; compgen -f -X '!*.safetensors' -- "$1")
  compopt -o filenames 2>/dev/null
  return 0
}

# The example names: the first word of each line of `attn-trace example --list` that does not start
# with a space (a description too long for the width continues on indented lines).
_attn_trace_examples() {
  local line
  "$(_attn_trace_program "$1")" example --list 2>/dev/null | while IFS= read -r line; do
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

  local commands
  commands=$(_attn_trace_commands "${COMP_WORDS[0]}")

  # The command, its options, and how many of its positional arguments come before the word being
  # completed.
  local command='' positionals=0 i word after_dashdash=0 takes_value=0 options=''
  local -A kind_of=() set_of=()
  for ((i = 1; i < cword; i++)); do
    word=${COMP_WORDS[i]}
    if [[ -z $command ]]; then
      if [[ $'\n'$commands$'\n' == *$'\n'$word$'\n'* ]]; then
        command=$word
        local name kind set
        while read -r name kind set; do
          options+="$name "
          kind_of[$name]=$kind
          set_of[$name]=$set
        done < <(_attn_trace_options "${COMP_WORDS[0]}" "$command")
      fi
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
    elif [[ $word != *=* && ${kind_of[$word]:-} == value ]]; then
      takes_value=1
    fi
  done

  if [[ -z $command ]]; then
    if [[ $cur == -* ]]; then
      _attn_trace_words '--help --version' "$cur"
    else
      _attn_trace_words "$commands" "$cur"
    fi
    return 0
  fi

  # The value of an option.
  if [[ $prev == -* && ${kind_of[$prev]:-} == value ]] && ((!after_dashdash)); then
    local values=''
    case $prev in
      --steps)
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
      --step) values=$(_attn_trace_step_names "${COMP_WORDS[0]}") ;;
      --grad) values=$(_attn_trace_step_names "${COMP_WORDS[0]}" | grep '^d_') ;;
      --json | -o | --output | --x)
        [[ $command == explain && $prev == --output ]] && return 0  # a column number
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        [[ -z $cur || $cur == - ]] && COMPREPLY+=(-)
        compopt -o filenames 2>/dev/null
        return 0
        ;;
      *)
        # The choices --help lists, but a pattern such as sliding_window:W; none for a number or a name.
        local choice
        local -a choices=()
        IFS=, read -r -a choices <<<"${set_of[$prev]}"
        for choice in "${choices[@]}"; do
          [[ $choice == - || $choice == *:* ]] || values+="$choice "
        done
        ;;
    esac
    _attn_trace_words "$values" "$cur"
    [[ -n $eq_prefix ]] && COMPREPLY=("${COMPREPLY[@]/#/$eq_prefix}")
    return 0
  fi

  # After an option this attn-trace's command does not have, nothing: whether it takes a value is unknown.
  [[ $prev == -?* && $prev != -- && -z ${kind_of[$prev]:-} ]] && ((!after_dashdash)) && return 0

  # An option name, or a positional argument.
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
      example) _attn_trace_words "$(_attn_trace_examples "${COMP_WORDS[0]}")" "$cur" ;;
      scaling | new | steps) _attn_trace_words "$options" "$cur" ;;  # no FILE: only options
      import) _attn_trace_tensor_files "$cur" ;;                     # WEIGHTS
      *) _attn_trace_json_files "$cur" ;;                              # FILE
    esac
  elif [[ $command == diff ]] && ((positionals == 1)); then
    _attn_trace_tensor_files "$cur"  # DUMPS
  elif [[ -z $cur ]]; then
    _attn_trace_words "$options" ''  # the one positional is given: only options remain
  fi
  return 0
}

complete -F _attn_trace attn-trace
