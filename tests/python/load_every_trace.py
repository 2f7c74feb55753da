#!/usr/bin/python3
"""docs/examples/load_trace.py reads every kind of trace attn-trace writes and agrees with PyTorch.

usage: load_every_trace.py ATTN_TRACE

Runs the script on
- every stored trace of tests/data/traces/: each input of data/ with the engines naive, flash, both
  and with compare, in float32 and float64;
- traces made now with ATTN_TRACE: `--head 1` of data/gpt_causal.json and data/gqa.json, a few other
  options (--head, --steps, tile sizes), and the inputs of tests/python/inputs/ (the masks, batches
  and empty rows that data/ does not have) and tests/data/positions/ (RoPE and ALiBi), each with every
  engine and compare in both dtypes;
and requires each one to pass. Then it plants one mistake at a time in copies of stored traces and
requires the script to report each (exit status 1), and to refuse a trace of a newer version, so that
a check that cannot fail does not go unnoticed.

The script runs in this process (imported, its main() called with the same arguments as its command
line), so that PyTorch is loaded once. Prints one line per case, then "N passed, N failed"; exits 1
if any case failed.
"""

import contextlib
import copy
import importlib.util
import io
import json
import pathlib
import subprocess
import sys
import tempfile
import traceback

REPO = pathlib.Path(__file__).resolve().parents[2]
STORED = REPO / "tests/data/traces"
ENGINES = ["naive", "flash", "both"]
DTYPES = ["float32", "float64"]


def import_script():
    spec = importlib.util.spec_from_file_location("load_trace", REPO / "docs/examples/load_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(script, trace_path):
    """The script's exit status on one trace (what `load_trace.py TRACE` would exit with), and all it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = script.main([str(trace_path)])
        except SystemExit as e:  # a refusal: sys.exit("message")
            print(e.code)
            status = 0 if e.code in (None, 0) else (e.code if isinstance(e.code, int) else 1)
        except Exception:  # a crash counts as a failure, with its traceback
            traceback.print_exc()
            status = 2
    return status, out.getvalue()


def stored_traces():
    """Every stored trace, after checking that each input of data/ has all eight."""
    expected = sorted(f"{inp.stem}.{kind}.{dtype}.json" for inp in (REPO / "data").glob("*.json")
                      for kind in ENGINES + ["compare"] for dtype in DTYPES)
    found = sorted(p.name for p in STORED.glob("*.json"))
    if found != expected:
        sys.exit(f"tests/data/traces/ should hold {len(expected)} traces (each input of data/ × naive, flash, "
                 f"both, compare × float32, float64): missing {sorted(set(expected) - set(found))}, "
                 f"unexpected {sorted(set(found) - set(expected))}")
    return [STORED / name for name in found]


def fresh_traces(binary, folder):
    """Traces made now: every engine and compare, both dtypes, for `--head 1` of two multi-head inputs and
    for the inputs of tests/python/inputs/; and a few more options."""
    runs = [(REPO / "data/gpt_causal.json", ["--head", "1"]), (REPO / "data/gqa.json", ["--head", "1"])]
    runs += [(inp, []) for inp in sorted((REPO / "tests/python/inputs").glob("*.json"))]
    # rotary positions and ALiBi, with positions that do not start at 0 (tests/data/positions)
    runs += [(inp, []) for inp in sorted((REPO / "tests/data/positions").glob("*.json"))]
    made = []  # (file name, arguments of the binary)
    for inp, options in runs:
        for dtype in DTYPES:
            for kind in ENGINES + ["compare"]:
                command = ["compare", str(inp)] if kind == "compare" else ["run", str(inp), "--engine", kind]
                made.append((f"{inp.stem}.{kind}.{dtype}{''.join(options)}.json", command + ["--dtype", dtype] + options))
    made += [
        ("gqa.naive.float32--head3.json", ["run", str(REPO / "data/gqa.json"), "--head", "3"]),
        ("gqa.flash.float32--head2--block-q1--block-k3.json",
         ["run", str(REPO / "data/gqa.json"), "--engine", "flash", "--head", "2", "--block-q", "1", "--block-k", "3"]),
        ("padded_batch.both.float64--steps.json",
         ["run", str(REPO / "data/padded_batch.json"), "--engine", "both", "--dtype", "float64",
          "--steps", "q_heads,weights,output"]),
        ("gqa.flash.float32--steps-q-output.json",  # no tiles: its lse is [] (see load_trace.py)
         ["run", str(REPO / "data/gqa.json"), "--engine", "flash", "--steps", "q,output"]),
        ("gqa.compare.float64--steps-q.json", ["compare", str(REPO / "data/gqa.json"), "--dtype", "float64", "--steps", "q"]),
        ("gqa.both.float64--steps-tiles.json",
         ["run", str(REPO / "data/gqa.json"), "--engine", "both", "--dtype", "float64", "--steps", "tiles"]),
        ("custom_batch.naive.float32--head1--steps.json",
         ["run", str(REPO / "tests/python/inputs/custom_batch.json"), "--head", "1", "--steps", "masked,weights,concat"]),
    ]
    paths = []
    for name, arguments in made:
        path = folder / name
        subprocess.run([binary, *arguments, "--json", str(path)], check=True, stdout=subprocess.DEVNULL)
        paths.append(path)
    return paths


def set_at(trace, keys, change):
    """Change the value at trace[k0][k1]... by `change` (a function of the old value)."""
    *outer, last = keys
    for key in outer:
        trace = trace[key]
    trace[last] = change(trace[last])


def step_index(trace, name):
    return next(i for i, step in enumerate(trace["steps"]) if step["name"] == name)


def planted_mistakes():
    """(what, stored trace, how to break a copy of it, what the report must say): each must make the
    script exit with status 1 and name the mistake."""
    def nudge(relative):
        return lambda x: x * (1 + relative) if x != 0 else relative

    def first_tile(trace, skipped):
        return next(i for i, t in enumerate(trace["flash"]["tiles"]) if t["skipped"] == skipped)

    def skip(tile):  # a skipped tile holds only where it is
        return {**{key: tile[key] for key in ("batch", "head", "i", "j", "rows", "cols")}, "skipped": True}

    return [
        ("a weight, one part in 10^4 (float32)", "the_cat_sat.naive.float32.json",
         lambda t: set_at(t, ["steps", step_index(t, "weights"), "data", 0, 0, 1], nudge(1e-4)),
         "weights: softmax of the trace's masked scores"),
        ("a key of head 1, one part in 10^9 (float64)", "gqa.naive.float64.json",
         lambda t: set_at(t, ["steps", step_index(t, "k_heads"), "data", 1, 2, 0], nudge(1e-9)),
         "step k_heads"),
        ("an output of batch item 1 (float32)", "padded_batch.both.float32.json",
         lambda t: set_at(t, ["steps", step_index(t, "output"), "data", 1, 3, 1], nudge(1e-4)),
         "step output"),
        ("a key outside the window shown: its -inf in masked replaced by its scaled score",
         "sliding_window.naive.float32.json",
         lambda t: set_at(t, ["steps", step_index(t, "masked"), "data", 0, 2, 0],
                          lambda _: t["steps"][step_index(t, "scaled")]["data"][0][2][0]),
         "weights: softmax of the trace's masked scores"),
        ("flash.lse (float64)", "sliding_window.flash.float64.json",
         lambda t: set_at(t, ["flash", "lse", 0, 3], nudge(1e-9)),
         "flash.lse"),
        ("flash.output of batch item 1 (float32)", "padded_batch.flash.float32.json",
         lambda t: set_at(t, ["flash", "output", 1, 0, 1], nudge(1e-4)),
         "flash.output"),
        ("S of a flash tile", "kv_cache.flash.float32.json",
         lambda t: set_at(t, ["flash", "tiles", 0, "S", 0, 0], nudge(1e-4)),
         "j 0: S"),
        ("a tile marked skipped where the mask allows keys", "gpt_causal.flash.float32.json",
         lambda t: set_at(t, ["flash", "tiles", first_tile(t, skipped=False)], skip),
         "skipped, but the mask allows some of it"),
        ("the lse of a flash final", "gqa.both.float64.json",
         lambda t: set_at(t, ["flash", "finals", 1, "lse", 0], nudge(1e-9)),
         "i 1: lse"),
        ("compare.outputs.reference (float64 for a float32 run)", "bert_bias.compare.float32.json",
         lambda t: set_at(t, ["compare", "outputs", "reference", 2, 1], nudge(1e-9)),
         "compare.outputs.reference"),
        ("config.mask.offset that does not match its align", "kv_cache.naive.float32.json",
         lambda t: set_at(t, ["config", "mask", "offset"], lambda x: x - 1),
         "config.mask: offset 2, but align bottom_right"),
        ("empty_rows naming a row that has keys", "the_cat_sat.naive.float32.json",
         lambda t: set_at(t, ["empty_rows"], lambda rows: rows + [{"batch": 0, "query": 1}]),
         "empty_rows: the trace lists [[0, 1]]"),
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    binary = sys.argv[1]
    script = import_script()
    failed = []
    passed = 0

    def expect(name, status, output, wanted, says=()):
        nonlocal passed
        if status == wanted and all(words in output for words in says):
            passed += 1
            print(f"ok    {name}")
        else:
            failed.append(name)
            print(f"FAIL  {name}: exit status {status}, expected {wanted}" + (f" saying {' and '.join(map(repr, says))}" if says else "") + f"\n{output}")

    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        for path in stored_traces() + fresh_traces(binary, folder):
            expect(path.name, *run_script(script, path), 0)

        for what, name, plant, says in planted_mistakes():
            trace = json.loads((STORED / name).read_text(encoding="utf-8"))
            broken = copy.deepcopy(trace)
            plant(broken)
            assert broken != trace, what
            path = folder / f"planted.{name}"
            path.write_text(json.dumps(broken), encoding="utf-8")
            expect(f"a mistake is reported: {what} ({name})", *run_script(script, path), 1, says=("MISMATCH", says))

        newer = json.loads((STORED / "the_cat_sat.naive.float32.json").read_text(encoding="utf-8"))
        newer["version"] += 1
        path = folder / "newer.json"
        path.write_text(json.dumps(newer), encoding="utf-8")
        expect("a trace of a newer version is refused", *run_script(script, path), 1, says=("knows version 1 only",))

    print(f"{passed} passed, {len(failed)} failed")
    for name in failed:
        print(f"failed: {name}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
