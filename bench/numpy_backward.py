#!/usr/bin/python3
"""NumPy's side of bench/numpy_compare.sh --backward: attention's naive backward in plain NumPy, timed.

Per head, in float32, the formulas of attn-trace's backward (docs/backward.md) with every n × n matrix
whole:
  dV = Pᵀ·dO,  dP = dO·Vᵀ,  D = rowsum(dO ⊙ O),  dS = P ⊙ (dP − D),  dQ = dS·K·scale,  dK = dSᵀ·Q·scale
Two ways, each timed: "given P", the weights P (and O) from the forward pass, not timed, as a naive
autograd keeps them, so that NumPy does four n × n products where FlashAttention-2's backward does five;
and "recomputed P", P = exp(S·scale − lse) from the forward's log-sum-exp first, as FlashAttention-2's
backward does (five products and the exponentials). The time of a repeat is the sum over the heads, each head's P made just before
its backward (so that one head's n × n matrices are held at a time). The work is counted as
FlashAttention counts a backward, 2.5 × the forward's 4·n²·d per head, so that GFLOP/s compare with
attn-trace bench --backward's; the ratio of the times is what the comparison rests on.

Before timing, the float32 gradients of one head are checked against float64, and Σ_j dS[i][j] = 0 (the
softmax's backward keeps the row sums) on every row.

It refuses to time anything when no OpenBLAS is mapped into the process, unless --allow-any-blas.

usage: numpy_backward.py [--n 4096] [--d-model 512] [--heads 8] [--repeat 3] [--json OUT]
       numpy_backward.py --report --ours A.json [B.json ...] --numpy X.json [Y.json ...]
"""

import argparse
import json
import math
import statistics
import sys
import time

import os

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_attention import mapped_libraries, openblas_info  # noqa: E402  (the BLAS in this process)


def softmax_rows(S):
    S -= S.max(axis=1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=1, keepdims=True)
    return S


def forward_head(q, k, v, dtype):
    """P (n, n) and O (n, d) of one head, unmasked."""
    scale = dtype(1.0 / math.sqrt(q.shape[1]))
    P = softmax_rows((q * scale) @ k.T)
    return P, P @ v


def lse_head(q, k):
    """The forward's log-sum-exp of every row of one head."""
    S = (q * np.float32(1.0 / math.sqrt(q.shape[1]))) @ k.T
    top = S.max(axis=1)
    S -= top[:, None]
    np.exp(S, out=S)
    return (top + np.log(S.sum(axis=1))).astype(np.float32)


def recomputed_weights(q, k, lse):
    """P = exp(S·scale − lse), FlashAttention-2's recomputation, whole."""
    P = (q * np.float32(1.0 / math.sqrt(q.shape[1]))) @ k.T
    P -= lse[:, None]
    np.exp(P, out=P)
    return P


def backward_head(q, k, v, P, O, dO, dtype):
    """dQ, dK, dV of one head from the forward's P and O."""
    scale = dtype(1.0 / math.sqrt(q.shape[1]))
    dV = P.T @ dO
    dS = dO @ v.T                                   # dP
    D = np.einsum("ij,ij->i", dO, O)                # rowsum(dO ⊙ O)
    dS -= D[:, None]
    dS *= P                                         # dS = P ⊙ (dP − D)
    dQ = (dS @ k) * scale
    dK = (dS.T @ q) * scale
    return dQ, dK, dV, dS


def check(Q, K, V, dO):
    """One head in float32 against float64; the rows of dS sum to 0."""
    got = forward_head(Q[0], K[0], V[0], np.float32)
    g32 = backward_head(Q[0], K[0], V[0], *got, dO[0], np.float32)
    q, k, v, do = (a[0].astype(np.float64) for a in (Q, K, V, dO))
    g64 = backward_head(q, k, v, *forward_head(q, k, v, np.float64), do, np.float64)
    worst = 0.0
    for a, b in zip(g32[:3], g64[:3]):
        worst = max(worst, float(np.max(np.abs(a - b)) / max(1e-30, float(np.max(np.abs(b))))))
    row_sums = float(np.max(np.abs(g64[3].sum(axis=1))))
    return {"max_relative_error_vs_float64": worst, "max_abs_row_sum_dS": row_sums,
            "ok": bool(worst < 1e-3 and row_sums < 1e-9)}


def time_backward(Q, K, V, dO, repeat, recompute):
    times = []
    for _ in range(repeat):
        total = 0.0
        for i in range(Q.shape[0]):
            P, O = forward_head(Q[i], K[i], V[i], np.float32)
            lse = lse_head(Q[i], K[i]) if recompute else None
            if recompute:
                del P
            t0 = time.perf_counter()
            if recompute:
                P = recomputed_weights(Q[i], K[i], lse)
            backward_head(Q[i], K[i], V[i], P, O, dO[i], np.float32)
            total += time.perf_counter() - t0
            del P, O
        times.append(total)
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def measure(args):
    mapped = mapped_libraries()
    blas = openblas_info(mapped)
    if blas is None and not args.allow_any_blas:
        sys.exit(f"numpy_backward.py: no OpenBLAS in this process ({', '.join(mapped) or 'no BLAS found'}); "
                 "run it from bench/numpy_compare.sh, or pass --allow-any-blas")
    rng = np.random.default_rng(args.seed)
    n, h = args.n, args.heads
    d = args.d_model // h
    Q, K, V, dO = (rng.standard_normal((h, n, d)).astype(np.float32) * np.float32(0.5) for _ in range(4))
    checked = check(Q, K, V, dO)
    if not checked["ok"]:
        sys.exit(f"numpy_backward.py: the NumPy backward is not right: {checked}")
    flops = 2.5 * 4.0 * n * n * d * h
    given = time_backward(Q, K, V, dO, args.repeat, False)
    recomputed = time_backward(Q, K, V, dO, args.repeat, True)
    result = {"format": "attn-trace.numpy-backward", "version": 1, "numpy": np.__version__, "n": n, "heads": h,
              "d": d, "dtype": "float32", "repeat": args.repeat, "blas": {"mapped": mapped, "openblas": blas},
              "check": checked, "flops": flops,
              "given_p": {"seconds": given, "gflops": flops / given["median"] / 1e9},
              "recomputed_p": {"seconds": recomputed, "gflops": flops / recomputed["median"] / 1e9}}
    for kind in ("given_p", "recomputed_p"):
        print(f"NumPy naive backward ({kind}), n = {n}, {h} heads of d {d}: "
              f"{result[kind]['seconds']['median']:.3f} s, {result[kind]['gflops']:.1f} GFLOP/s "
              "(counted as FlashAttention counts a backward)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


def report(args):
    """One line per n and thread count: ours (bench --backward) against NumPy both ways, the ratios of the times."""
    ours = [json.load(open(p)) for p in args.ours]
    numpys = [json.load(open(p)) for p in args.numpy]
    print("backward, float32, no mask, medians: ours = attn-trace bench --backward (FlashAttention-2's backward); "
          "NumPy naive backward given the forward's P (four products) and with P recomputed from lse (five)")
    print(f"{'n':>6} {'threads':>7} {'ours':>9} {'GFLOP/s':>8} {'% peak':>7} {'bwd/fwd':>8} {'NumPy, P given':>15} "
          f"{'÷ ours':>7} {'NumPy, P recomputed':>20} {'÷ ours':>7}")
    rows = []
    for o, p in zip(ours, numpys):
        run = o["runs"][0]
        if run["refused"]:
            continue
        mine = run["backward_s"]["median"]
        given, recomputed = p["given_p"]["seconds"]["median"], p["recomputed_p"]["seconds"]["median"]
        share = run.get("backward_peak_share") or 0
        row = {"n": run["n"], "threads": run["threads"], "ours_forward_s": run["attention_s"]["median"], "ours_s": mine, "ours_gflops": run["backward_gflops"],
               "peak_share": share, "backward_over_forward": run["backward_over_forward"],
               "fma_peak_gflops": o["machine"]["fma_peak"]["gflops"], "numpy_given_p_s": given,
               "numpy_recomputed_p_s": recomputed, "numpy_given_p_over_ours": given / mine,
               "numpy_recomputed_p_over_ours": recomputed / mine}
        rows.append(row)
        print(f"{row['n']:>6} {row['threads']:>7} {mine:>8.3f}s {row['ours_gflops']:>8.1f} {100 * share:>6.0f}% "
              f"{row['backward_over_forward']:>8.2f} {given:>14.3f}s {given / mine:>6.2f}× {recomputed:>19.3f}s "
              f"{recomputed / mine:>6.2f}×")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"format": "attn-trace.numpy-backward-report", "version": 1, "rows": rows}, f, indent=2)
            f.write("\n")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--allow-any-blas", action="store_true", help="time whatever BLAS is loaded")
    p.add_argument("--report", action="store_true", help="compare JSON files instead of measuring")
    p.add_argument("--ours", nargs="*", default=[])
    p.add_argument("--numpy", nargs="*", default=[])
    args = p.parse_args(argv)
    if args.report:
        report(args)
    else:
        measure(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
