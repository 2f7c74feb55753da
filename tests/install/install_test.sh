#!/usr/bin/env bash
# Installs a build into a temporary prefix with `cmake --install`, then checks that everything landed
# under the prefix and nowhere else, and that the installed attn-trace, run from outside the source
# and build trees, traces its installed copy of the worked example; and that the examples, the guides,
# the licence, the changelog and the bash completion are there, byte for byte; and, where the build made
# the Python module, that Debian's python3 imports it from the prefix, in any folder, and that the
# default prefix's folder for it is one python3 looks in.
# usage: install_test.sh CMAKE BUILD_DIR SOURCE_DIR BINDIR DATADIR DOCDIR VERSION [PYTHONDIR]
#   BINDIR, DATADIR, DOCDIR: CMAKE_INSTALL_BINDIR, _DATADIR, _DOCDIR, relative to the prefix; PYTHONDIR
#   ATTN_PYTHON_DIR (cmake/python_module.cmake), given when the module is built.
set -uo pipefail
usage="usage: install_test.sh CMAKE BUILD_DIR SOURCE_DIR BINDIR DATADIR DOCDIR VERSION [PYTHONDIR]"
[[ $# -eq 7 || $# -eq 8 ]] || { echo "$usage"; exit 2; }
cmake=$1 build=$2 source=$3 bindir=$4 datadir=$5 docdir=$6 version=$7 pythondir=${8:-}

# An absolute folder would install outside the temporary prefix, into the machine.
for dir in "$bindir" "$datadir" "$docdir"; do
  [[ $dir != /* ]] || { echo "FAIL: $dir is absolute: it would be installed outside the test's prefix"; exit 1; }
done

failures=0
fail() { echo "FAIL: $*"; ((failures++)); }

work=$(mktemp -d)
prefix=$work/prefix
# cmake --install records what it installed in the build's install_manifest.txt; keep the record of a
# real installation (`cmake --install build/release`), not of this test's.
manifest=$build/install_manifest.txt
[[ -f $manifest ]] && cp -p "$manifest" "$work/manifest.before"
restore() {
  if [[ -f $work/manifest.before ]]; then cp -p "$work/manifest.before" "$manifest"; else rm -f "$manifest"; fi
  rm -rf "$work"
}
trap restore EXIT

if ! "$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1; then
  cat "$work/install.log"
  echo "FAIL: cmake --install $build --prefix $prefix"
  exit 1
fi

# Nothing outside the prefix: every path cmake installed is under it.
[[ -s $manifest ]] || fail "cmake --install wrote no $manifest"
while IFS= read -r path || [[ -n $path ]]; do  # the manifest's last line has no newline
  [[ $path == "$prefix"/* ]] || fail "installed outside the prefix: $path"
done < "$manifest"

# The tool, run by its installed path from a folder that is neither the source nor the build tree.
tool=$prefix/$bindir/attn-trace
example=$prefix/$datadir/attn-trace/examples/the_cat_sat.json
if [[ ! -x $tool ]]; then
  fail "no executable $tool"
else
  if (cd "$work" && "$tool" run "$example" --color never > "$work/run.out" 2> "$work/run.err"); then
    # softmax([4, 0, 2] / √2) = [0.7679, 0.0454, 0.1867]: "cat" attends to "The" with 0.7679.
    grep -q '0\.7679' "$work/run.out" || fail "the trace of $example does not contain 0.7679"
    grep -Eq '^ +cat +0\.7679 +0\.0454 +0\.1867$' "$work/run.out" ||
      fail "the weights row of \"cat\" is not 0.7679 0.0454 0.1867 (The, cat, sat)"
    [[ ! -s $work/run.err ]] || fail "attn-trace run wrote to stderr: $(head -3 "$work/run.err")"
  else
    fail "$tool run $example exited with $?: $(head -3 "$work/run.err")"
  fi
  got_version=$("$tool" --version 2>&1)
  [[ $got_version == "attn-trace $version" ]] || fail "$tool --version says '$got_version', not 'attn-trace $version'"
fi

# same FILE COPY: COPY exists and holds the bytes of FILE.
same() {
  if [[ ! -f $2 ]]; then fail "not installed: $2"
  elif ! cmp -s "$1" "$2"; then fail "$2 differs from $1"
  fi
}

# The examples: every data/*.json, and nothing else.
count=0
for f in "$source"/data/*.json; do
  same "$f" "$prefix/$datadir/attn-trace/examples/${f##*/}"
  ((count++))
done
installed=$(find "$prefix/$datadir/attn-trace/examples" -type f | wc -l)
[[ $installed -eq $count ]] || fail "$installed files in the installed examples, $count in data/"

# The guides, the trace schema, the Python example, the licence and the changelog.
for f in "$source"/docs/*.md "$source"/docs/trace.schema.json; do
  same "$f" "$prefix/$docdir/${f##*/}"
done
same "$source/docs/examples/load_trace.py" "$prefix/$docdir/examples/load_trace.py"
same "$source/docs/notebook.ipynb" "$prefix/$docdir/notebook.ipynb"
for f in "$source"/docs/images/*.png; do same "$f" "$prefix/$docdir/images/$(basename "$f")"; done
same "$source/LICENSE" "$prefix/$docdir/LICENSE"
same "$source/CHANGELOG.md" "$prefix/$docdir/CHANGELOG.md"

# The completion, where bash-completion looks for a command's completion: DATADIR/bash-completion/
# completions/COMMAND. Sourced in a plain bash, it completes example names from the installed tool.
completion=$prefix/$datadir/bash-completion/completions/attn-trace
same "$source/scripts/completion/attn-trace.bash" "$completion"
if [[ -f $completion ]]; then
  names=$(PATH="$prefix/$bindir:$PATH" bash --norc --noprofile -c '
    source "$1" || exit 1
    COMP_WORDS=(attn-trace example the-) COMP_CWORD=2
    _attn_trace attn-trace the- example && printf "%s\n" "${COMPREPLY[@]}"' _ "$completion")
  [[ $names == the-cat-sat ]] || fail "the installed completion completes 'attn-trace example the-' to '$names'"
fi

# The Python module: imported by Debian's python3 from /, where neither the source nor the build is.
if [[ -n $pythondir ]]; then
  if ! weight=$(cd / && PYTHONPATH="$prefix/$pythondir" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import sys, attn_trace
assert attn_trace.__file__.startswith(sys.argv[1]), attn_trace.__file__
print(round(float(attn_trace.run(sys.argv[2])["weights"][0, 1, 0]), 4))' "$prefix" "$example" 2>&1); then
    fail "import attn_trace from $prefix/$pythondir: $weight"
  elif [[ $weight != 0.7679 ]]; then
    fail "the installed attn_trace gives \"cat\" -> \"The\" $weight, not 0.7679"
  fi
  /usr/bin/python3 -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "/usr/local/$pythondir" ||
    fail "/usr/local/$pythondir (the default prefix's) is not on /usr/bin/python3's sys.path"
fi

if ((failures)); then
  echo "$failures failures; installed:"
  sed "s|^$prefix/||" "$manifest"
  echo
  exit 1
fi
echo "installed $(grep -c '' "$manifest") files under the prefix; the installed attn-trace traces the worked example"
