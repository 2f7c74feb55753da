#!/usr/bin/python3
"""Every trace that attn-trace writes for data/*.json satisfies docs/trace.schema.json.

usage: validate_traces.py REPO_ROOT ATTN_TRACE_BINARY

For each bundled input: `run FILE --json OUT` in float32 and in float64, and with --steps/--head on
every multi-head input; each trace is validated with Draft202012Validator, and each step is checked
for what JSON Schema cannot say: `data` nests exactly as `shape`, `dims` has one name per axis and
the step's dtype is the run's. The schema must also refuse a few broken traces. Prints every failure
and exits 1 if there is one.
"""

import copy
import json
import pathlib
import subprocess
import sys
import tempfile

import jsonschema

STEP_NAMES = ["q", "k", "v", "q_heads", "k_heads", "v_heads", "scores", "scaled", "masked", "weights",
              "head_outputs", "concat", "output"]


def nesting_errors(data, shape, where):
    """Where `data` does not nest exactly as `shape` (an empty list when it does)."""
    if not shape:
        return [] if not isinstance(data, list) else [f"{where}: a list where the shape has no axis left"]
    if not isinstance(data, list):
        return [f"{where}: expected a list of {shape[0]}, found {json.dumps(data)}"]
    if len(data) != shape[0]:
        return [f"{where}: expected a list of {shape[0]} (the step's shape), found {len(data)} items"]
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
        if step["dtype"] != dtype:
            errors.append(f"{where}: dtype {step['dtype']}, but config/dtype is {dtype}")
        # data of rank 0 or with an extent of 0 is written as [] nested as far as the extents allow
        if shape and all(d > 0 for d in shape):
            errors += nesting_errors(step["data"], shape, f"{where}/data")
    names = [s["name"] for s in trace["steps"]]
    if names != sorted(names, key=STEP_NAMES.index):
        errors.append(f"/steps: not in the order of trace-format.md: {names}")
    return errors


def schema_errors(validator, trace):
    return [f"{'/' + '/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in sorted(validator.iter_errors(trace), key=lambda e: list(map(str, e.absolute_path)))]


def run_trace(binary, args, out):
    done = subprocess.run([binary, "run", *args, "--json", str(out)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"attn-trace run {' '.join(args)} --json {out} -> exit {done.returncode}: {done.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)


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
        changed("the dtype float16", lambda t: t["steps"][0].update(dtype="float16")),
        changed("a negative extent in a shape", lambda t: t["steps"][0].update(shape=[-1, 2])),
        changed("a step without data", lambda t: t["steps"][0].pop("data")),
        changed("no steps at all", lambda t: t.pop("steps")),
        changed("a dim that is not a string", lambda t: t["steps"][0].update(dims=[0, 1])),
        changed("an unknown top-level key", lambda t: t.update(extra=True)),
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

    inputs = sorted((root / "data").glob("*.json"))
    if not inputs:
        print(f"FAIL no inputs in {root / 'data'}", file=sys.stderr)
        return 1

    failures = []
    checked = 0
    cat_trace = None
    with tempfile.TemporaryDirectory(prefix="attn-trace-schema-") as tmp:
        out = pathlib.Path(tmp) / "trace.json"
        for path in inputs:
            with open(path, encoding="utf-8") as f:
                heads = json.load(f).get("n_heads", 1)
            runs = [[str(path)], [str(path), "--dtype", "float64"]]
            if heads > 1:
                runs.append([str(path), "--steps", "scores,masked,weights", "--head", str(heads - 1)])
            for args in runs:
                label = "run " + " ".join([path.name, *args[1:]])
                try:
                    trace = run_trace(binary, args, out)
                except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                    failures.append(f"{label}: {e}")
                    continue
                errors = schema_errors(validator, trace)
                errors += step_errors(trace) if not errors else []
                failures += [f"{label}: {e}" for e in errors]
                checked += 1
                if path.name == "the_cat_sat.json" and len(args) == 1:
                    cat_trace = trace

    if cat_trace is None:
        failures.append("no trace of data/the_cat_sat.json to break")
    else:
        for what, trace in broken_traces(cat_trace):
            if validator.is_valid(trace):
                failures.append(f"the schema accepts a broken trace: {what}")

    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} failure(s)", file=sys.stderr)
        return 1
    print(f"ok: {checked} traces of {len(inputs)} inputs satisfy {schema_path.name}; "
          f"{len(broken_traces(cat_trace))} broken traces are refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
