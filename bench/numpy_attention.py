#!/usr/bin/python3
"""NumPy's side of bench/numpy_compare.sh: attention and multi-head attention in plain NumPy, timed.

Three things are timed, each `--repeat` times (median, min and max kept), in float32, for every mask
asked for:
  naive  attention alone (Q, K, V given, split into heads): per head S = Q·Kᵀ·scale, the row softmax
         of the whole n × m matrix in place, then P·V
  tiled  attention alone, flash-style: per head, query blocks × key blocks, an online softmax (running
         maximum and sum) over the key blocks and one matrix product per block for Q·Kᵀ and for P·V;
         under a causal mask the key blocks wholly above the diagonal are skipped
  mha    the whole multi-head attention from X: X·W_q, X·W_k, X·W_v, split into heads, the attention
         (whichever of naive and tiled was faster above), merge, ·W_o
GFLOP/s use the count attn-trace bench uses: 4·d per allowed query-key pair per head (4·n·m·d
unmasked, 4·d·n(n+1)/2 causal); the softmax's work is not counted.

The inputs are seeded like attn-trace bench's random input (not the same numbers): X uniform in
[-1, 1], the weights uniform in [-1, 1]/√d_model, no biases. Before timing, naive's and tiled's outputs
are checked against each other and against float64 on sampled rows, so the timings are of correct code.

The thread count is OpenBLAS's (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS, set by the caller); NumPy's own
element-wise steps (exp, max, sums) always run on one thread. The script reports which BLAS library is
mapped into the process and, for OpenBLAS, the core it picked; it refuses to time anything when no
OpenBLAS is mapped or a 2048² product is slower than --min-gemm-gflops, unless --allow-any-blas.

usage: numpy_attention.py [--n 4096] [--d-model 512] [--heads 8] [--mask none,causal] [--repeat 3]
                          [--block-q 256] [--block-k 1024] [--json OUT] [--sweep-blocks]
"""

import argparse
import ctypes
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np

DEFAULT_BLOCK_Q = 256
DEFAULT_BLOCK_K = 1024


# ---------------------------------------------------------------------------------------------------
# The BLAS in this process


def mapped_libraries():
    """Paths of the shared objects mapped into this process whose names speak of BLAS or LAPACK."""
    found = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and parts[5].startswith("/"):
                    name = os.path.basename(parts[5]).lower()
                    if "blas" in name or "lapack" in name:
                        found.add(parts[5])
    except OSError:
        pass
    return sorted(found)


def openblas_info(paths):
    """Core name, build configuration and thread count of the OpenBLAS mapped here, or None."""
    for path in paths:
        if "openblas" not in os.path.basename(path).lower():
            continue
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle comes back
        except OSError:
            continue
        info = {"library": os.path.realpath(path)}
        for name in ("openblas_get_corename", "openblas_get_config"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                info[name.removeprefix("openblas_get_")] = fn().decode()
        fn = getattr(lib, "openblas_get_num_threads", None)
        if fn is not None:
            fn.restype = ctypes.c_int
            info["num_threads"] = fn()
        return info
    return None


def gemm_gflops(size=2048, repeat=3):
    """GFLOP/s of the best of `repeat` float32 size × size products (after one untimed one)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = a @ b
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best / 1e9


# ---------------------------------------------------------------------------------------------------
# The attention


def naive_attention(Q, K, V, causal):
    """Per head: the whole score matrix, its row softmax in place, then P·V. Q, K, V: (h, n, d)."""
    h, n, d = Q.shape
    scale = np.float32(1.0 / math.sqrt(d))
    out = np.empty((h, n, V.shape[2]), dtype=np.float32)
    upper = np.triu(np.ones((n, K.shape[1]), dtype=bool), 1) if causal else None
    for i in range(h):
        S = (Q[i] * scale) @ K[i].T
        if upper is not None:
            np.copyto(S, -np.inf, where=upper)
        S -= S.max(axis=1, keepdims=True)
        np.exp(S, out=S)
        S *= (1.0 / S.sum(axis=1, keepdims=True)).astype(np.float32)
        np.matmul(S, V[i], out=out[i])
    return out


class TiledAttention:
    """Flash-style attention in NumPy: query blocks × key blocks with an online softmax."""

    def __init__(self, block_q, block_k):
        self.block_q = block_q
        self.block_k = block_k
        self._masks = {}

    def _mask(self, rows, cols, offset):
        """True where key k0 + j lies after query q0 + i, for offset = q0 - k0."""
        key = (rows, cols, offset)
        mask = self._masks.get(key)
        if mask is None:
            mask = np.triu(np.ones((rows, cols), dtype=bool), offset + 1)
            self._masks[key] = mask
        return mask

    def __call__(self, Q, K, V, causal):
        h, n, d = Q.shape
        m = K.shape[1]
        dv = V.shape[2]
        bq, bk = self.block_q, self.block_k
        scale = np.float32(1.0 / math.sqrt(d))
        out = np.empty((h, n, dv), dtype=np.float32)
        for i in range(h):
            Qi = Q[i] * scale
            Ki, Vi = K[i], V[i]
            for q0 in range(0, n, bq):
                q1 = min(q0 + bq, n)
                rows = q1 - q0
                Qt = Qi[q0:q1]
                row_max = np.full((rows, 1), -np.inf, dtype=np.float32)
                row_sum = np.zeros((rows, 1), dtype=np.float32)
                acc = np.zeros((rows, dv), dtype=np.float32)
                k_end = min(m, q1) if causal else m
                for k0 in range(0, k_end, bk):
                    k1 = min(k0 + bk, k_end)
                    S = Qt @ Ki[k0:k1].T
                    if causal and k1 - 1 > q0:
                        np.copyto(S, -np.inf, where=self._mask(rows, k1 - k0, q0 - k0))
                    new_max = np.maximum(row_max, S.max(axis=1, keepdims=True))
                    S -= new_max
                    np.exp(S, out=S)
                    alpha = np.exp(row_max - new_max)
                    row_sum *= alpha
                    row_sum += S.sum(axis=1, keepdims=True)
                    acc *= alpha
                    acc += S @ Vi[k0:k1]
                    row_max = new_max
                np.divide(acc, row_sum, out=out[i, q0:q1])
        return out


def split_heads(Y, heads):
    """(n, heads·d) → a (heads, n, d) view."""
    n, width = Y.shape
    return Y.reshape(n, heads, width // heads).transpose(1, 0, 2)


def multi_head_attention(X, W_q, W_k, W_v, W_o, heads, attention, causal):
    Q = split_heads(X @ W_q, heads)
    K = split_heads(X @ W_k, heads)
    V = split_heads(X @ W_v, heads)
    O = attention(Q, K, V, causal)
    merged = O.transpose(1, 0, 2).reshape(X.shape[0], -1)
    return merged @ W_o


def attention_flops(n, m, d, heads, causal):
    pairs = n * (n + 1) // 2 if causal else n * m
    return 4.0 * d * pairs * heads


def close(x, y):
    """allclose with an absolute floor scaled to the outputs: random inputs give small, even weights."""
    return np.allclose(x, y, rtol=1e-3, atol=1e-5 * float(np.max(np.abs(y))))


def reference_rows(Q, K, V, causal, rows):
    """float64 attention of the sampled query rows, all heads: (h, len(rows), d)."""
    Q64, K64, V64 = (a.astype(np.float64) for a in (Q, K, V))
    d = Q.shape[2]
    out = np.empty((Q.shape[0], len(rows), V.shape[2]))
    for r, q in enumerate(rows):
        S = np.einsum("hd,hmd->hm", Q64[:, q, :], K64) / math.sqrt(d)
        if causal:
            S[:, q + 1:] = -np.inf
        S -= S.max(axis=1, keepdims=True)
        P = np.exp(S)
        P /= P.sum(axis=1, keepdims=True)
        out[:, r, :] = np.einsum("hm,hmd->hd", P, V64)
    return out


# ---------------------------------------------------------------------------------------------------
# Timing


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def make_inputs(n, d_model, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, d_model)).astype(np.float32)
    bound = 1.0 / math.sqrt(d_model)
    W = [rng.uniform(-bound, bound, (d_model, d_model)).astype(np.float32) for _ in range(4)]
    return X, W


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4096, help="queries = keys (default 4096)")
    p.add_argument("--d-model", type=int, default=512, help="width of the tokens (default 512)")
    p.add_argument("--heads", type=int, default=8, help="heads, splitting d_model evenly (default 8)")
    p.add_argument("--mask", default="none,causal", help="comma-separated: none, causal (default both)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each (default 3)")
    p.add_argument("--block-q", type=int, default=DEFAULT_BLOCK_Q, help=f"tiled: query rows a block ({DEFAULT_BLOCK_Q})")
    p.add_argument("--block-k", type=int, default=DEFAULT_BLOCK_K, help=f"tiled: keys a block ({DEFAULT_BLOCK_K})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON to this file")
    p.add_argument("--no-mha", action="store_true", help="time the attention alone")
    p.add_argument("--sweep-blocks", action="store_true",
                   help="time only tiled, over a grid of block sizes, and print them (to choose the default)")
    p.add_argument("--sweep-q", default="64,128,256,512,1024,2048,4096", help="--sweep-blocks: query blocks")
    p.add_argument("--sweep-k", default="64,128,256,512,1024,2048,4096", help="--sweep-blocks: key blocks")
    p.add_argument("--min-gemm-gflops", type=float, default=20.0,
                   help="refuse to time when a 2048² float32 product is slower than this (default 20)")
    p.add_argument("--allow-any-blas", action="store_true", help="time whatever BLAS is loaded")
    args = p.parse_args(argv)
    args.masks = [m.strip() for m in args.mask.split(",") if m.strip()]
    if not args.masks or any(m not in ("none", "causal") for m in args.masks):
        p.error("--mask takes none, causal or none,causal")
    if args.d_model % args.heads:
        p.error("--heads must divide --d-model")
    try:
        args.sweep_q = [int(b) for b in args.sweep_q.split(",")]
        args.sweep_k = [int(b) for b in args.sweep_k.split(",")]
    except ValueError:
        p.error("--sweep-q and --sweep-k take comma-separated block sizes")
    if min(args.n, args.repeat, args.block_q, args.block_k, *args.sweep_q, *args.sweep_k) < 1:
        p.error("--n, --repeat and the blocks must be at least 1")
    return args


def blas_report(args):
    libs = mapped_libraries()
    ob = openblas_info(libs)
    blas = {"mapped": libs, "openblas": ob}
    if ob is None and not args.allow_any_blas:
        sys.exit("numpy_attention.py: no OpenBLAS is mapped into this process (mapped: "
                 + (", ".join(libs) or "no BLAS library") + "); LD_LIBRARY_PATH should name its directory")
    blas["gemm_2048_gflops"] = gemm_gflops()
    if blas["gemm_2048_gflops"] < args.min_gemm_gflops and not args.allow_any_blas:
        sys.exit(f"numpy_attention.py: a 2048² float32 product ran at {blas['gemm_2048_gflops']:.1f} GFLOP/s, "
                 f"below {args.min_gemm_gflops}: this is not an optimised BLAS")
    return blas


def sweep_blocks(args, Q, K, V, threads):
    n, d = Q.shape[1], Q.shape[2]
    q_sizes = [b for b in args.sweep_q if b <= n] or [n]
    k_sizes = [b for b in args.sweep_k if b <= n] or [n]
    print(f"tiled attention, n = {n}, d = {d}, h = {args.heads}, float32, {threads} OpenBLAS thread(s): "
          f"GFLOP/s, median of {args.repeat}")
    for mask in args.masks:
        causal = mask == "causal"
        flops = attention_flops(n, n, d, args.heads, causal)
        print(f"mask {mask}; rows: block_q, columns: block_k")
        print("block_q " + "".join(f"{b:>8}" for b in k_sizes))
        for bq in q_sizes:
            cells = []
            for bk in k_sizes:
                tiled = TiledAttention(bq, bk)
                tiled(Q, K, V, causal)  # fills the mask cache
                s = timed(lambda: tiled(Q, K, V, causal), args.repeat)
                cells.append(f"{flops / s['median'] / 1e9:8.1f}")
            print(f"{bq:>7} " + "".join(cells), flush=True)


def main(argv):
    args = parse_args(argv)
    blas = blas_report(args)
    ob = blas["openblas"] or {}
    threads = ob.get("num_threads")
    print(f"NumPy {np.__version__}, BLAS mapped: {', '.join(blas['mapped']) or 'none found'}", file=sys.stderr)
    if ob:
        print(f"OpenBLAS core {ob.get('corename')}, {threads} thread(s); {ob.get('config')}", file=sys.stderr)
    print(f"2048² float32 product: {blas['gemm_2048_gflops']:.1f} GFLOP/s", file=sys.stderr)

    n, heads = args.n, args.heads
    d = args.d_model // heads
    X, (W_q, W_k, W_v, W_o) = make_inputs(n, args.d_model, args.seed)
    Q = np.ascontiguousarray(split_heads(X @ W_q, heads))
    K = np.ascontiguousarray(split_heads(X @ W_k, heads))
    V = np.ascontiguousarray(split_heads(X @ W_v, heads))

    if args.sweep_blocks:
        sweep_blocks(args, Q, K, V, threads)
        return 0

    tiled = TiledAttention(args.block_q, args.block_k)
    sample = sorted({0, 1, n // 3, n // 2, (2 * n) // 3, n - 2, n - 1} & set(range(n)))
    checks, runs = [], []
    for mask in args.masks:
        causal = mask == "causal"
        # Correctness first: naive against tiled everywhere, both against float64 on sampled rows.
        a = naive_attention(Q, K, V, causal)
        b = tiled(Q, K, V, causal)
        ref = reference_rows(Q, K, V, causal, sample)
        check = {
            "mask": mask,
            "naive_vs_tiled_max_abs": float(np.max(np.abs(a - b))),
            "naive_vs_float64_max_abs": float(np.max(np.abs(a[:, sample, :] - ref))),
            "tiled_vs_float64_max_abs": float(np.max(np.abs(b[:, sample, :] - ref))),
            "allclose": bool(close(a, b) and close(a[:, sample, :], ref) and close(b[:, sample, :], ref)),
        }
        checks.append(check)
        if not check["allclose"]:
            sys.exit(f"numpy_attention.py: naive and tiled disagree ({mask}): {check}")
        del a, b

        flops = attention_flops(n, n, d, heads, causal)
        best = None
        for kind, fn in (("naive", naive_attention), ("tiled", tiled)):
            print(f"  NumPy {kind}, {mask}, {threads} thread(s)...", file=sys.stderr, flush=True)
            s = timed(lambda: fn(Q, K, V, causal), args.repeat)
            runs.append({"kind": kind, "mask": mask, "seconds": s, "flops": flops,
                         "gflops": flops / s["median"] / 1e9})
            if best is None or s["median"] < best[1]:
                best = (kind, s["median"], fn)
        if not args.no_mha:
            kind, _, fn = best
            print(f"  NumPy multi-head attention ({kind}), {mask}, {threads} thread(s)...", file=sys.stderr, flush=True)
            s = timed(lambda: multi_head_attention(X, W_q, W_k, W_v, W_o, heads, fn, causal), args.repeat)
            runs.append({"kind": "mha", "attention": kind, "mask": mask, "seconds": s,
                         "flops": flops + 8.0 * n * args.d_model * args.d_model})

    result = {
        "format": "attn-trace.numpy-bench", "version": 1,
        "numpy": np.__version__, "python": platform.python_version(), "blas": blas,
        "threads": threads, "n": n, "m": n, "d_model": args.d_model, "heads": heads, "d": d,
        "dtype": "float32", "repeat": args.repeat, "seed": args.seed,
        "block_q": args.block_q, "block_k": args.block_k, "checks": checks, "runs": runs,
    }
    for r in runs:
        extra = f" ({r['attention']})" if "attention" in r else ""
        rate = f", {r['gflops']:.1f} GFLOP/s" if "gflops" in r else ""
        print(f"{r['kind']}{extra} {r['mask']}: {r['seconds']['median']:.3f} s{rate}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
