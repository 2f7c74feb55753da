#!/usr/bin/env python3
"""Writes a random attention input (input-format.md) of a given size, for benchmarks.

usage: make_input.py N D_MODEL N_HEADS [SEED] > input.json
"""
import json
import random
import sys


def main() -> None:
    n, d_model, heads = (int(a) for a in sys.argv[1:4])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 0)

    def matrix(rows: int, cols: int, scale: float) -> list:
        return [[round(rng.gauss(0.0, scale), 4) for _ in range(cols)] for _ in range(rows)]

    w = 1.0 / d_model ** 0.5
    doc = {
        "description": f"random: n = {n}, d_model = {d_model}, {heads} heads",
        "X": matrix(n, d_model, 1.0),
        "W_q": matrix(d_model, d_model, w),
        "W_k": matrix(d_model, d_model, w),
        "W_v": matrix(d_model, d_model, w),
        "W_o": matrix(d_model, d_model, w),
        "n_heads": heads,
        "mask": "causal",
    }
    json.dump(doc, sys.stdout)


if __name__ == "__main__":
    main()
