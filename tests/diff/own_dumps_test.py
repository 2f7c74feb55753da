#!/usr/bin/env python3
"""diff on our own dumps: every bundled example's trace (run --backward --json), its steps and its
gradients written out as dumps, must be found to agree: `attn-trace diff` exits 0 on each, and never
crashes (a signal is a failure like any other exit code).

For each example in data/, in float32 (.npy files of float32) and float64 (.json files, which diff
reads as float64, of a float64 run), the dump folders are: every step and gradient; the forward steps
only; the gradients only; and three seeded random subsets of either.

usage: own_dumps_test.py ATTN_TRACE SOURCE_DIR
Needs Debian's python3-numpy.
"""
import glob
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np


def number(x):
    return float(x) if isinstance(x, str) else x  # "inf", "-inf", "nan" as a trace writes them


def array(data, dtype):
    def walk(x):
        return [walk(y) for y in x] if isinstance(x, list) else number(x)
    return np.array(walk(data), dtype=dtype)


def write(folder, trace, names, dtype):
    os.makedirs(folder)
    steps = {s["name"]: s for s in trace["steps"]}
    for name in names:
        if dtype == "float32":
            np.save(os.path.join(folder, name + ".npy"), array(steps[name]["data"], np.float32))
        else:
            with open(os.path.join(folder, name + ".json"), "w") as f:
                json.dump(steps[name]["data"], f)


def main():
    binary, source = sys.argv[1], sys.argv[2]
    failures, runs = [], 0
    rng = random.Random(20261204)
    with tempfile.TemporaryDirectory() as work:
        for path in sorted(glob.glob(os.path.join(source, "data", "*.json"))):
            name = os.path.splitext(os.path.basename(path))[0]
            for dtype in ("float32", "float64"):
                r = subprocess.run([binary, "run", path, "--backward", "--dtype", dtype, "--json", "-"],
                                   capture_output=True, text=True, timeout=120)
                if r.returncode != 0:
                    failures.append(f"{name} {dtype}: run --backward exit {r.returncode}: {r.stderr.strip()}")
                    continue
                trace = json.loads(r.stdout)
                every = [s["name"] for s in trace["steps"]]
                forward = [s for s in every if not s.startswith("d_")]
                gradients = [s for s in every if s.startswith("d_")]
                subsets = {"every step": every, "the forward steps": forward, "the gradients": gradients}
                for k in range(3):
                    subsets[f"random subset {k}"] = sorted(rng.sample(every, rng.randint(1, len(every))))
                for label, names in subsets.items():
                    folder = os.path.join(work, f"{name}-{dtype}-{label.replace(' ', '-')}")
                    write(folder, trace, names, dtype)
                    d = subprocess.run([binary, "diff", path, folder], capture_output=True, text=True, timeout=300)
                    runs += 1
                    if d.returncode != 0:
                        what = f"signal {-d.returncode}" if d.returncode < 0 else f"exit {d.returncode}"
                        tail = (d.stderr.strip() or d.stdout.strip()[-600:])
                        failures.append(f"{name} {dtype}, {label} ({', '.join(names)}): diff {what}: {tail}")
                        print(f"FAIL: {failures[-1]}", flush=True)
    print(f"{runs} diffs of our own dumps, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
