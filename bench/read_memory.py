#!/usr/bin/env python3
"""How much memory loading an input or a trace takes, against what attn-trace budgets for it.

attn-trace refuses input whose loading would pass --max-memory, counting the cost from the bytes as
they arrive (src/io/read.hpp, JsonCost): the text, 48 bytes a value, 160 a list or object, 128 a
string and 4 a string byte. This script makes inputs of very different shapes, loads each with the
real binary, and prints the peak resident memory measured (/usr/bin/time) next to that budget. The
budget must stay above the measurement for every shape; docs/reliability.md quotes the figures.

usage: bench/read_memory.py [path/to/attn-trace]   (default: build/release/attn-trace)
"""
import os
import random
import subprocess
import sys
import tempfile

PER_VALUE, PER_CONTAINER, PER_STRING, PER_STRING_BYTE = 48, 160, 128, 4


def budget(data: bytes) -> int:
    """JsonCost::total, written again from its description."""
    commas = containers = strings = string_bytes = 0
    in_string = escaped = False
    for c in data:
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                in_string = False
            else:
                string_bytes += 1
            continue
        if c == 0x22:
            in_string, strings = True, strings + 1
        elif c == 0x2C:
            commas += 1
        elif c in (0x5B, 0x7B):
            containers += 1
    values = commas + containers + 1
    return (len(data) + PER_VALUE * values + PER_CONTAINER * containers + PER_STRING * strings
            + PER_STRING_BYTE * string_bytes)


def matrix(rows: int, cols: int, rng: random.Random, digits: int) -> str:
    return "[" + ",".join("[" + ",".join(f"{rng.gauss(0, 1):.{digits}f}" for _ in range(cols)) + "]"
                          for _ in range(rows)) + "]"


def identity(d: int) -> str:
    return "[" + ",".join("[" + ",".join("1" if i == j else "0" for j in range(d)) + "]" for i in range(d)) + "]"


def problem(n: int, d: int, digits: int, tokens=None, description="") -> str:
    rng = random.Random(0)
    w = identity(d)
    extra = ""
    if tokens is not None:
        extra += ',"tokens":[' + ",".join(f'"{t}"' for t in tokens) + "]"
    if description:
        extra += f',"description":"{description}"'
    return f'{{"X":{matrix(n, d, rng, digits)},"W_q":{w},"W_k":{w},"W_v":{w}{extra}}}'


def peak_kib(command: list) -> int:
    run = subprocess.run(["/usr/bin/time", "-f", "%M"] + command, capture_output=True, text=True)
    return int(run.stderr.strip().splitlines()[-1])


def main() -> None:
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/release/attn-trace"
    inputs = {
        "numbers, 256 wide": lambda: problem(40_000, 256, 4),
        "numbers, 16 wide": lambda: problem(400_000, 16, 2),
        "one number a row": lambda: problem(3_000_000, 1, 0),
        "short tokens": lambda: problem(1_500_000, 1, 0, tokens=[f"t{i}" for i in range(1_500_000)]),
        "long tokens": lambda: problem(600_000, 1, 0, tokens=[f"a longer label, number {i}" for i in range(600_000)]),
        "one long string": lambda: problem(1, 1, 0, description="x" * 60_000_000),
    }
    print(f"{'input':<22} {'size':>9} {'measured':>10} {'budget':>10} {'budget/measured':>16}")
    with tempfile.TemporaryDirectory() as work:
        rows = [(name, make(), "run") for name, make in inputs.items()]
        trace = os.path.join(work, "trace.json")
        subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "make_input.py"), "256", "64", "4"],
                       stdout=open(os.path.join(work, "small.json"), "w"), check=True)
        subprocess.run([binary, "run", os.path.join(work, "small.json"), "--engine", "both", "--json", trace],
                       stdout=subprocess.DEVNULL, check=True)
        rows.append(("a trace (show)", open(trace).read(), "show"))
        for name, text, command in rows:
            path = os.path.join(work, "input.json")
            data = text.encode()
            with open(path, "wb") as f:
                f.write(data)
            if command == "run":  # --head 65535 stops right after loading: only the load is measured
                kib = peak_kib([binary, "run", path, "--head", "65535", "--max-memory", "64G"])
            else:
                kib = peak_kib([binary, "show", path, "--max-rows", "1", "--max-cols", "1", "--max-memory", "64G"])
            measured, need = kib * 1024, budget(data)
            print(f"{name:<22} {len(data) / 2**20:7.1f}Mi {measured / 2**20:8.1f}Mi {need / 2**20:8.1f}Mi "
                  f"{need / measured:16.2f}")


if __name__ == "__main__":
    main()
