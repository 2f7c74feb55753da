#!/usr/bin/env bash
# Runs every command line of README.md's code blocks ("    attn-trace ...") with the built binary, in a
# temporary folder holding a copy of data/, one after the other (a later line may read what an earlier
# one wrote), and fails when any exits with a code other than 0 or when there are none.
# usage: readme_commands.sh path/to/attn-trace path/to/source
set -euo pipefail
bin=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/data" "$work/data"
mkdir "$work/bin"
ln -s "$bin" "$work/bin/attn-trace"
export PATH="$work/bin:$PATH"
cd "$work"
count=0
failed=0
while IFS= read -r line; do
  command=$(sed -E 's/^    //; s/ {2,}.*$//' <<<"$line")  # what follows two or more spaces is a comment
  count=$((count + 1))
  if ! bash -c "$command" >/dev/null 2>"$work/stderr"; then
    echo "FAILED: $command"
    cat "$work/stderr"
    failed=$((failed + 1))
  fi
done < <(grep -E '^    attn-trace [a-z-]' "$src/README.md")
echo "$count README command lines run, $failed failed"
[ "$count" -ge 5 ] && [ "$failed" -eq 0 ]
