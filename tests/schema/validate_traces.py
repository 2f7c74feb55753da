#!/usr/bin/python3
"""Every trace that attn-trace writes for data/*.json (and tests/data/positions/*.json) satisfies
docs/trace.schema.json, decode's among them.

usage: validate_traces.py REPO_ROOT ATTN_TRACE_BINARY

For each bundled input: `run FILE --json OUT` in float32 and in float64, and with --steps/--head on
every multi-head input; `run --engine flash` (float32, float64, other tile sizes), `run --engine both`
(and with --head on every multi-head input, and in float16); `compare --json OUT` in float32, float64
and bfloat16. Each trace is validated with Draft202012Validator, and checked for what JSON Schema cannot say: each step's
`data` nests exactly as `shape`, `dims` has one name per axis and the step's dtype is the run's; each
flash tile lies inside the input and within the tile sizes, its matrices nest as its rows, columns and
d_v; `lse` and `output` have their shapes; the compare object's outputs have the output's shape and
its verdict is its rule applied to its own numbers. The schema must also refuse a few broken traces.
Prints every failure and exits 1 if there is one.
"""

import copy
import json
import pathlib
import subprocess
import sys
import tempfile

import jsonschema

# The pipeline's steps, as the tool's one table lists them (`attn-trace steps --json`): filled in main().
STEP_NAMES = []
STEP_DIMS = {}
PARAMETERS = set()


def nesting_errors(data, shape, where):
    """Where `data` does not nest exactly as `shape` (an empty list when it does)."""
    if not shape:
        return [] if not isinstance(data, list) else [f"{where}: a list where the shape has no axis left"]
    if not isinstance(data, list):
        return [f"{where}: expected a list of {shape[0]}, found {json.dumps(data)}"]
    if len(data) != shape[0]:
        return [f"{where}: expected a list of {shape[0]} (its shape), found {len(data)} items"]
    errors = []
    for i, item in enumerate(data):
        errors += nesting_errors(item, shape[1:], f"{where}/{i}")
        if len(errors) > 5:
            break
    return errors


def step_errors(trace):
    """What the schema cannot check about the steps of a (schema-valid) trace."""
    errors = []
    dtype = trace["config"]["dtype"]
    for i, step in enumerate(trace["steps"]):
        where = f"/steps/{i} ({step['name']})"
        shape = step["shape"]
        if len(step["dims"]) != len(shape):
            errors.append(f"{where}: dims {step['dims']} name {len(step['dims'])} axes, shape {shape} has {len(shape)}")
        table_dims = STEP_DIMS[step["name"]]
        if step["name"] in PARAMETERS:  # a parameter's gradient: no batch axis, in the input's layout
            if trace["config"]["layout"] == "out_in" and len(table_dims) == 2:
                table_dims = table_dims[::-1]
        elif trace["config"]["batch"] is not None:
            table_dims = ["batch"] + table_dims
        if step["dims"] != table_dims:
            errors.append(f"{where}: dims {step['dims']}, but the step table (attn-trace steps) says {table_dims}")
        if step["dtype"] != dtype:
            errors.append(f"{where}: dtype {step['dtype']}, but config/dtype is {dtype}")
        # data of rank 0 or with an extent of 0 is written as [] nested as far as the extents allow
        if shape and all(d > 0 for d in shape):
            errors += nesting_errors(step["data"], shape, f"{where}/data")
    names = [s["name"] for s in trace["steps"]]
    if names != sorted(names, key=STEP_NAMES.index):
        errors.append(f"/steps: not in the order of docs/trace-format.md: {names}")
    return errors


def schema_errors(validator, trace):
    return [f"{'/' + '/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in sorted(validator.iter_errors(trace), key=lambda e: list(map(str, e.absolute_path)))]


def run_trace(binary, args, out, command="run"):
    """The trace of `attn-trace COMMAND ARGS --json OUT`; compare must pass (exit 0) on the bundled inputs."""
    done = subprocess.run([binary, command, *args, "--json", str(out)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"attn-trace {command} {' '.join(args)} --json {out} -> exit {done.returncode}: "
                           f"{done.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def as_float(x):
    """A trace number: a JSON number or one of the strings "-inf", "inf", "nan"."""
    return float(x) if isinstance(x, str) else x


def sizes(trace):
    c = trace["config"]
    heads = 1 if c.get("head") is not None else c["n_heads"]
    return c["batch"], heads, c["n"], c["m"], c["d_v"], c["d_out"]


def batched_shape(batch, shape):
    return [batch, *shape] if batch is not None else shape


def flash_errors(trace, engine):
    """What the schema cannot check about the flash object of a (schema-valid) trace."""
    errors = []
    config = trace["config"]
    if config["engine"] != engine:
        errors.append(f"/config/engine: {config['engine']!r}, but the run was {engine!r}")
    if "flash" not in trace:
        return errors + ["/flash: missing, but the flash pass ran"]
    flash = trace["flash"]
    batch, heads, n, m, d_v, d_out = sizes(trace)
    bq, bk = flash["block_q"], flash["block_k"]
    kept_head = config.get("head")
    for k, tile in enumerate(flash["tiles"]):
        where = f"/flash/tiles/{k}"
        (r0, r1), (c0, c1) = tile["rows"], tile["cols"]
        if not (r0 < r1 <= n and c0 < c1 <= m):
            errors.append(f"{where}: rows {tile['rows']} or cols {tile['cols']} outside n = {n}, m = {m}")
            continue
        if r1 - r0 > bq or c1 - c0 > bk or r0 != tile["i"] * bq or c0 != tile["j"] * bk:
            errors.append(f"{where}: tile i {tile['i']} j {tile['j']} rows {tile['rows']} cols {tile['cols']} "
                          f"do not fit blocks of {bq} × {bk}")
        if tile["batch"] >= (batch or 1):
            errors.append(f"{where}: batch {tile['batch']} of {batch or 1}")
        if kept_head is not None and tile["head"] != kept_head:
            errors.append(f"{where}: head {tile['head']}, but only head {kept_head} was kept")
        if kept_head is None and tile["head"] >= heads:
            errors.append(f"{where}: head {tile['head']} of {heads}")
        if tile["skipped"]:
            continue
        rows, cols = r1 - r0, c1 - c0
        for name, shape in [("S", [rows, cols]), ("m_prev", [rows]), ("m_new", [rows]), ("alpha", [rows]),
                            ("P", [rows, cols]), ("l_prev", [rows]), ("l_new", [rows]), ("O", [rows, d_v])]:
            errors += nesting_errors(tile[name], shape, f"{where}/{name}")
        # what the tile's own numbers must satisfy: m_new >= m_prev, 0 <= alpha <= 1, 0 <= P <= 1
        for r in range(rows):
            m_prev, m_new, alpha = (as_float(tile[key][r]) for key in ("m_prev", "m_new", "alpha"))
            if m_new < m_prev or not 0 <= alpha <= 1:
                errors.append(f"{where}: row {r}: m_prev {m_prev}, m_new {m_new}, alpha {alpha}")
            for p in tile["P"][r]:
                if not 0 <= as_float(p) <= 1:
                    errors.append(f"{where}/P/{r}: {p} outside [0, 1]")
        if len(errors) > 20:
            return errors
    query_tiles = (n + bq - 1) // bq
    expected_finals = (batch or 1) * heads * query_tiles
    if len(flash["finals"]) != expected_finals:
        errors.append(f"/flash/finals: {len(flash['finals'])}, expected one per query tile: {expected_finals}")
    for k, final in enumerate(flash["finals"]):
        where = f"/flash/finals/{k}"
        r0, r1 = final["rows"]
        if not r0 < r1 <= n:
            errors.append(f"{where}: rows {final['rows']} outside n = {n}")
            continue
        errors += nesting_errors(final["O"], [r1 - r0, d_v], f"{where}/O")
        errors += nesting_errors(final["lse"], [r1 - r0], f"{where}/lse")
    errors += nesting_errors(flash["lse"], batched_shape(batch, [heads, n]), "/flash/lse")
    errors += nesting_errors(flash["output"], batched_shape(batch, [n, d_out]), "/flash/output")
    return errors


def compare_errors(trace):
    """What the schema cannot check about the compare object: shapes, and that its verdict follows from its numbers."""
    if "compare" not in trace:
        return ["/compare: missing from a trace of compare"]
    errors = []
    c = trace["compare"]
    batch, _, n, _, _, d_out = sizes(trace)
    if c["dtype"] != trace["config"]["dtype"]:
        errors.append(f"/compare/dtype: {c['dtype']}, but config/dtype is {trace['config']['dtype']}")
    if (c["block_q"], c["block_k"]) != (trace["flash"]["block_q"], trace["flash"]["block_k"]):
        errors.append(f"/compare: blocks {c['block_q']} × {c['block_k']}, flash ran "
                      f"{trace['flash']['block_q']} × {trace['flash']['block_k']}")
    for name in ("naive", "flash", "reference"):
        errors += nesting_errors(c["outputs"][name], batched_shape(batch, [n, d_out]), f"/compare/outputs/{name}")
    t = c["tolerance"]
    if all(is_number(t[k]) for k in ("flash_error", "naive_error", "noise", "bound")):
        if abs(t["bound"] - (2 * t["naive_error"] + t["noise"])) > 1e-12 * max(1.0, t["bound"]):
            errors.append(f"/compare/tolerance: bound {t['bound']} is not 2 · {t['naive_error']} + {t['noise']}")
        if t["pass"] != (t["flash_error"] <= t["bound"]):
            errors.append(f"/compare/tolerance: pass is {t['pass']} for {t['flash_error']} against the bound {t['bound']}")
    if t["flash_error"] != c["flash_vs_reference"]["max_abs"] or t["naive_error"] != c["naive_vs_reference"]["max_abs"]:
        errors.append("/compare/tolerance: flash_error and naive_error are not the max_abs of flash_vs_reference "
                      "and naive_vs_reference")
    if not t["pass"]:
        errors.append("/compare/tolerance/pass: false on a bundled input")
    return errors


def decodable(path):
    """Whether attn-trace decode takes the input: causal self-attention without dropout."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    mask = doc.get("mask", "none")
    kind = mask if isinstance(mask, str) else mask.get("type")
    align = "top_left" if isinstance(mask, str) else mask.get("align", "top_left")
    return (kind in ("causal", "sliding_window") or str(kind).startswith("sliding_window")) and align == "top_left" \
        and "context" not in doc and "dropout" not in doc


def decode_errors(trace):
    """What the schema cannot check about a decode trace: every step object nests as its shape, the output
    step holds every token's row and each decode step's row is its own, the caches grow by one key a step,
    and the verdict follows from its numbers."""
    d = trace["decode"]
    errors = step_errors({"config": trace["config"], "steps": (d["prefill"] or {"steps": []})["steps"]})
    output = trace["steps"][0]
    if len(trace["steps"]) != 1 or output["name"] != "output":
        errors.append("/steps: a decode trace holds one step, output")
        return errors
    n = trace["config"]["n"]
    batched = trace["config"]["batch"] is not None
    if [s["position"] for s in d["steps"]] != list(range(d["prompt"], n)):
        errors.append(f"/decode/steps: positions are not {d['prompt']} … {n - 1}")
    for k, s in enumerate(d["steps"]):
        where = f"/decode/steps/{k}"
        for i, step in enumerate(s["steps"]):
            errors += nesting_errors(step["data"], step["shape"], f"{where}/steps/{i} ({step['name']})")
            if len(step["dims"]) != len(step["shape"]):
                errors.append(f"{where}/steps/{i}: dims and shape differ in length")
        names = [step["name"] for step in s["steps"]]
        for name in ("k_cache", "v_cache", "output"):
            if name not in names:
                errors.append(f"{where}: no {name} step")
                return errors
        cache = s["steps"][names.index("k_cache")]["shape"]
        if cache[-2] != s["position"] + 1 or s["cache_length"] != s["position"] + 1:
            errors.append(f"{where}: a cache of {cache[-2]} keys (cache_length {s['cache_length']}) at position "
                          f"{s['position']}")
        row = s["steps"][names.index("output")]["data"]
        mine = [item[0] for item in row] if batched else row[0]
        whole = [item[s["position"]] for item in output["data"]] if batched else output["data"][s["position"]]
        if mine != whole:
            errors.append(f"{where}: its output row is not row {s['position']} of the output step")
        if "split" in s and "weights" in names:
            errors.append(f"{where}: a split step formed its weights whole")
    t = d["check"]["tolerance"]
    if t["pass"] != (as_float(t["decode_error"]) <= as_float(t["bound"])):
        errors.append(f"/decode/check/tolerance: pass is {t['pass']} for {t['decode_error']} against {t['bound']}")
    if not t["pass"]:
        errors.append("/decode/check/tolerance/pass: false on a bundled input")
    return errors


def broken_traces(good):
    """(what is wrong, a copy of `good` with that wrong): the schema must refuse each one."""
    def changed(what, edit):
        t = copy.deepcopy(good)
        edit(t)
        return what, t

    def set_first_value(t, value):
        data = t["steps"][0]["data"]
        while isinstance(data[0], list):
            data = data[0]
        data[0] = value

    return [
        changed("another format", lambda t: t.update(format="some-other.trace")),
        changed("version 2", lambda t: t.update(version=2)),
        changed("version \"1\" as a string", lambda t: t.update(version="1")),
        changed("an unknown step name", lambda t: t["steps"][0].update(name="attention")),
        changed("a data value that is the bare string \"x\"", lambda t: set_first_value(t, "x")),
        changed("a data value that is null", lambda t: set_first_value(t, None)),
        changed("the dtype float8", lambda t: t["steps"][0].update(dtype="float8")),
        changed("a negative extent in a shape", lambda t: t["steps"][0].update(shape=[-1, 2])),
        changed("a step without data", lambda t: t["steps"][0].pop("data")),
        changed("no steps at all", lambda t: t.pop("steps")),
        changed("a dim that is not a string", lambda t: t["steps"][0].update(dims=[0, 1])),
        changed("an unknown top-level key", lambda t: t.update(extra=True)),
    ]


def broken_compare_traces(good):
    """Like broken_traces, for a compare trace (naive steps, flash and compare): what its schema must refuse."""
    def changed(what, edit):
        t = copy.deepcopy(good)
        edit(t)
        return what, t

    def first_tile(t, skipped):
        return next(tile for tile in t["flash"]["tiles"] if tile["skipped"] == skipped)

    def skip_a_tile_that_ran(t):
        first_tile(t, False)["skipped"] = True

    def tile_without(key):
        return lambda t: first_tile(t, False).pop(key)

    return [
        changed("a tile that ran without S", tile_without("S")),
        changed("a tile that ran without alpha", tile_without("alpha")),
        changed("a skipped tile that holds S", skip_a_tile_that_ran),
        changed("a tile without skipped", lambda t: t["flash"]["tiles"][0].pop("skipped")),
        changed("a tile with an unknown key", lambda t: t["flash"]["tiles"][0].update(extra=1)),
        changed("a tile whose rows are one number", lambda t: t["flash"]["tiles"][0].update(rows=[0])),
        changed("a tile whose S is a flat list", lambda t: first_tile(t, False).update(S=[0.5])),
        changed("a tile whose alpha holds null", lambda t: first_tile(t, False).update(alpha=[None])),
        changed("a negative head in a tile", lambda t: t["flash"]["tiles"][0].update(head=-1)),
        changed("flash without block_q", lambda t: t["flash"].pop("block_q")),
        changed("block_k of 0", lambda t: t["flash"].update(block_k=0)),
        changed("flash without lse", lambda t: t["flash"].pop("lse")),
        changed("flash without finals", lambda t: t["flash"].pop("finals")),
        changed("a final without lse", lambda t: t["flash"]["finals"][0].pop("lse")),
        changed("an unknown key in flash", lambda t: t["flash"].update(extra=1)),
        changed("compare without flash", lambda t: t.pop("flash")),
        changed("compare without tolerance", lambda t: t["compare"].pop("tolerance")),
        changed("tolerance.pass as a string", lambda t: t["compare"]["tolerance"].update({"pass": "true"})),
        changed("tolerance without bound", lambda t: t["compare"]["tolerance"].pop("bound")),
        changed("a negative noise", lambda t: t["compare"]["tolerance"].update(noise=-1e-7)),
        changed("negative peak bytes", lambda t: t["compare"]["memory"].update(naive_peak_bytes=-1)),
        changed("an error without max_ulp", lambda t: t["compare"]["flash_vs_naive"].pop("max_ulp")),
        changed("a max_ulp of 0.5", lambda t: t["compare"]["flash_vs_naive"].update(max_ulp=0.5)),
        changed("compare in float8", lambda t: t["compare"].update(dtype="float8")),
        changed("compare without the reference output", lambda t: t["compare"]["outputs"].pop("reference")),
        changed("an unknown key in compare", lambda t: t["compare"].update(extra=1)),
        changed("an unknown engine in config", lambda t: t["config"].update(engine="turbo")),
    ]


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root, binary = pathlib.Path(sys.argv[1]), sys.argv[2]
    schema_path = root / "docs" / "trace.schema.json"
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        print(f"FAIL {schema_path} is not a valid draft 2020-12 schema: {e.message}", file=sys.stderr)
        return 1
    validator = jsonschema.Draft202012Validator(schema)

    table = json.loads(subprocess.run([binary, "steps", "--json"], check=True, capture_output=True, text=True).stdout)
    STEP_NAMES.extend(s["name"] for s in table["steps"])
    STEP_DIMS.update((s["name"], s["dims"]) for s in table["steps"])
    PARAMETERS.update(s["name"] for s in table["steps"] if s["parameter"])
    schema_names = schema["$defs"]["step"]["properties"]["name"]["enum"]
    if schema_names != STEP_NAMES:
        print(f"FAIL {schema_path}: the step names {schema_names} are not the step table's {STEP_NAMES}", file=sys.stderr)
        return 1

    inputs = sorted((root / "data").glob("*.json"))
    # and the inputs with RoPE and ALiBi (their extra steps, the rotation table, the input's rope and alibi)
    inputs += sorted((root / "tests" / "data" / "positions").glob("*.json"))
    if not inputs:
        print(f"FAIL no inputs in {root / 'data'}", file=sys.stderr)
        return 1

    failures = []
    checked = 0
    cat_trace = None
    cat_compare = None
    gpt_decode = None
    with tempfile.TemporaryDirectory(prefix="attn-trace-schema-") as tmp:
        out = pathlib.Path(tmp) / "trace.json"
        for path in inputs:
            with open(path, encoding="utf-8") as f:
                heads = json.load(f).get("n_heads", 1)
            file = str(path)
            # (command, arguments, which engine made it)
            runs = [("run", [file], "naive"), ("run", [file, "--dtype", "float64"], "naive")]
            if heads > 1:
                runs.append(("run", [file, "--steps", "scores,masked,weights", "--head", str(heads - 1)], "naive"))
            runs += [("run", [file, "--engine", "flash"], "flash"),
                     ("run", [file, "--engine", "flash", "--dtype", "float64"], "flash"),
                     ("run", [file, "--engine", "flash", "--block-q", "3", "--block-k", "2"], "flash"),
                     ("run", [file, "--engine", "both"], "both"),
                     ("compare", [file], "both"),
                     ("compare", [file, "--dtype", "float64", "--block-q", "1", "--block-k", "3"], "both"),
                     ("run", [file, "--engine", "both", "--dtype", "float16"], "both"),
                     ("compare", [file, "--dtype", "bfloat16"], "both")]
            if heads > 1:
                runs.append(("run", [file, "--engine", "both", "--head", str(heads - 1)], "both"))
            # the backward pass: its steps, the flash backward's tiles, and compare's gradients
            runs += [("run", [file, "--backward"], "naive"),
                     ("run", [file, "--backward", "--engine", "both", "--grad-seed", "3"], "both"),
                     ("compare", [file, "--backward", "--block-q", "2", "--block-k", "3"], "both")]
            if decodable(path):
                runs += [("decode", [file], "decode"),
                         ("decode", [file, "--split-kv", "3", "--dtype", "float64"], "decode"),
                         ("decode", [file, "--page-size", "2", "--prompt", "0", "--dtype", "bfloat16"], "decode")]
            for command, args, engine in runs:
                label = f"{command} " + " ".join([path.name, *args[1:]])
                try:
                    trace = run_trace(binary, args, out, command)
                except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                    failures.append(f"{label}: {e}")
                    continue
                errors = schema_errors(validator, trace)
                if not errors:
                    errors += step_errors(trace)
                    if engine == "decode":
                        errors += decode_errors(trace)
                    elif engine != "naive":
                        errors += flash_errors(trace, engine)
                    elif "flash" in trace or "compare" in trace:
                        errors.append("a naive run wrote a flash or compare object")
                    if command == "compare":
                        errors += compare_errors(trace)
                failures += [f"{label}: {e}" for e in errors]
                checked += 1
                if path.name == "gpt_causal.json" and command == "decode" and len(args) == 1:
                    gpt_decode = trace
                if path.name == "the_cat_sat.json" and len(args) == 1:
                    if command == "run":
                        cat_trace = trace
                    else:
                        cat_compare = trace

    broken = []
    if cat_trace is None:
        failures.append("no trace of data/the_cat_sat.json to break")
    else:
        broken += broken_traces(cat_trace)
    if cat_compare is None:
        failures.append("no compare trace of data/the_cat_sat.json to break")
    else:
        if not any(tile["skipped"] for tile in cat_compare["flash"]["tiles"]):
            # the worked example has no mask: skip its last tile (and strip it) so that both kinds are there
            tile = cat_compare["flash"]["tiles"][-1]
            for key in ("S", "m_prev", "m_new", "alpha", "P", "l_prev", "l_new", "O"):
                tile.pop(key)
            tile["skipped"] = True
            if not validator.is_valid(cat_compare):
                failures.append("the schema refuses a compare trace with a skipped tile")
        broken += broken_compare_traces(cat_compare)
    if gpt_decode is None:
        failures.append("no decode trace of data/gpt_causal.json to break")
    else:
        def changed(what, edit):
            t = copy.deepcopy(gpt_decode)
            edit(t)
            return what, t
        broken += [
            changed("decode without its check", lambda t: t["decode"].pop("check")),
            changed("a split of 0 chunks", lambda t: t["decode"].update(split_kv=0)),
            changed("a decode step without its position", lambda t: t["decode"]["steps"][0].pop("position")),
            changed("an unknown step name in a decode step",
                    lambda t: t["decode"]["steps"][0]["steps"][6].update(name="k_cached")),
            changed("bit_exact as a string", lambda t: t["decode"]["check"].update(bit_exact="yes")),
        ]
        if decode_errors(gpt_decode):
            failures.append("decode_errors finds fault with a good decode trace")
        wrong = copy.deepcopy(gpt_decode)
        wrong["decode"]["steps"][-1]["steps"][-1]["data"][0][0] += 1
        if not decode_errors(wrong):
            failures.append("decode_errors misses a decode step's row that is not the output step's")
    for what, trace in broken:
        if validator.is_valid(trace):
            failures.append(f"the schema accepts a broken trace: {what}")

    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} failure(s)", file=sys.stderr)
        return 1
    print(f"ok: {checked} traces of {len(inputs)} inputs satisfy {schema_path.name}; "
          f"{len(broken)} broken traces are refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
