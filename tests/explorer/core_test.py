#!/usr/bin/env python3
"""The explorer's WebAssembly core (cmake/explorer_core.cmake) against the tool, in Node.js.

For every example in data/, with each engine (naive, flash, both), the backward pass off and on, in
float32 and float64, the core's trace is compared with `attn-trace run FILE --json -` of the same
options:
  - byte for byte, except where the browser's C library (musl, Emscripten's) computes a function in
    another way than glibc (may_differ): tanhf for softcap in float32, exp and log in float64. A
    float32 trace that should agree and does not fails, and so does softcap's if it agrees (the rule
    says which is which, and must stay true);
  - within compare's rule always: the core's output judged against compare's float64 or long-double
    reference (max|core - ref| <= 2 * max|naive - ref| + noise, noise and naive's error from
    `attn-trace compare FILE --json -`), and every gradient by |core - cli| + naive_error <= bound, which
    implies the rule (|core - ref| <= |core - cli| + |cli - ref|).
Every bad input of tests/data/bad that the page could hold (valid UTF-8) is refused by the core with
the tool's own message (the page's input is named "input", as FILE is in the tool's line).

usage: core_test.py ATTN_TRACE EXPLORER_CORE_JS SOURCE_DIR
"""
import glob
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "report"))
from browser_test import check, failures, flat  # noqa: E402  the report's test's checks, and a trace's numbers

ENGINES = ("naive", "flash", "both")
DTYPES = ("float32", "float64")

# Where the browser's C library (musl, Emscripten's) and the tool's (glibc) may round a function
# differently, and so the traces may differ in the last bits. float32's expf and logf agree on every
# bundled input (both libraries take them from the same code, ARM's optimized-routines), so every other
# float32 trace must be byte for byte the tool's; every trace, these too, within compare's rule.
def may_differ(name, dtype, text):
    if dtype == "float64":
        return "exp and log in float64 (the flash pass's lse, the softmax): musl's and glibc's differ by 1 ulp at times"
    if '"softcap"' in text:
        return "softcap's tanhf: musl's and glibc's differ by 1 ulp on some scores"
    return None


# Traces that must differ, so that the list above stays true: softcap's tanhf in float32.
MUST_DIFFER = {("softcap", "float32")}


def steps(trace):
    return {s["name"]: flat(s["data"]) for s in trace["steps"]}


def max_diff(a, b):
    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for x, y in zip(a, b):
        if math.isnan(x) and math.isnan(y) or x == y:
            continue
        worst = max(worst, abs(x - y))
    return worst


def run_core(core_js, requests):
    text = "".join(json.dumps(r) + "\n" for r in requests)
    r = subprocess.run(["node", os.path.join(HERE, "run_core.js"), core_js], input=text, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"node run_core.js: exit {r.returncode}: {r.stderr.strip()}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def tool(binary, *args, expect=(0,)):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    if r.returncode not in expect:
        raise SystemExit(f"attn-trace {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def within_rule(binary, path, name, dtype, backward, core_trace, cli_trace):
    """The core's output and gradients within compare's rule."""
    args = ["compare", path, "--dtype", dtype, "--json", "-"] + (["--backward"] if backward else [])
    verdict = json.loads(tool(binary, *args, expect=(0, 1)).stdout)["compare"]
    tolerance = verdict["tolerance"]
    core = steps(core_trace)
    error = max_diff(core["output"], flat(verdict["outputs"]["reference"]))
    bound = 2 * tolerance["naive_error"] + tolerance["noise"]
    check(error <= bound, f"{name} {dtype}: the core's output is {error:.3g} from the reference, over {bound:.3g}")
    if backward:
        cli = steps(cli_trace)
        for g in verdict["backward"]["gradients"]:
            if g["step"] not in core:
                continue
            gap = max_diff(core[g["step"]], cli[g["step"]])
            check(gap + g["naive_error"] <= g["bound"],
                  f"{name} {dtype}: {g['step']} is {gap:.3g} from the tool's, over {g['bound'] - g['naive_error']:.3g}")


def check_traces(binary, core_js, source):
    examples = sorted(glob.glob(os.path.join(source, "data", "*.json")))
    cases, requests = [], []
    for path in examples:
        text = open(path, encoding="utf-8").read()
        for engine in ENGINES:
            for dtype in DTYPES:
                for backward in (False, True):
                    cases.append((path, engine, dtype, backward))
                    requests.append({"input": text, "engine": engine, "dtype": dtype, "backward": backward})
    results = run_core(core_js, requests)
    differing = set()
    identical = 0
    for (path, engine, dtype, backward), result in zip(cases, results):
        name = os.path.splitext(os.path.basename(path))[0]
        what = f"{name} --engine {engine} --dtype {dtype}{' --backward' if backward else ''}"
        if not check(result["status"] == 0, f"{what}: the core refused it: {result['error']}"):
            continue
        args = ["run", path, "--engine", engine, "--dtype", dtype, "--json", "-"] + (["--backward"] if backward else [])
        cli_text = tool(binary, *args).stdout
        if result["trace"] == cli_text:
            identical += 1
            continue
        differing.add((name, dtype))
        why = may_differ(name, dtype, open(path, encoding="utf-8").read())
        check(why is not None, f"{what}: the core's trace is not the tool's byte for byte")
        core_trace, cli_trace = json.loads(result["trace"]), json.loads(cli_text)
        within_rule(binary, path, name, dtype, backward, core_trace, cli_trace)
    for name, dtype in MUST_DIFFER:
        check((name, dtype) in differing, f"{name} {dtype}: every trace is the tool's, yet expected to differ: "
              "if musl's tanhf now agrees with glibc's, say so in may_differ")
    print(f"{identical} of {len(cases)} traces byte for byte the tool's; the others, {sorted(differing)}, "
          f"within compare's rule")


def check_errors(binary, core_js, source):
    bad = sorted(glob.glob(os.path.join(source, "tests", "data", "bad", "*.json")))
    paths, requests = [], []
    for path in bad:
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue  # a page's text area holds text: these bytes cannot reach the core
        paths.append(path)
        requests.append({"input": text, "engine": "naive"})
    for path, result in zip(paths, run_core(core_js, requests)):
        r = tool(binary, "run", path, "--max-memory", "1G", expect=(2,))
        line = r.stderr.strip().splitlines()[-1]
        expected = line.removeprefix("attn-trace: error: ").replace(path, "input", 1)
        name = os.path.basename(path)
        check(result["status"] == 2, f"{name}: the core returned {result['status']}, not 2")
        check(result["error"] == expected, f"{name}: the core says {result['error']!r}, the tool {expected!r}")
    print(f"{len(paths)} bad inputs refused with the tool's message")


def main():
    binary, core_js, source = sys.argv[1:4]
    check_traces(binary, core_js, source)
    check_errors(binary, core_js, source)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
