"""The inputs of the large-logit cases of golden_backward/ (large_logits_1e3 and large_logits_5e5), which
make_backward.py takes from large_logits below: scale 1 and scores up to about 1e3 and 5e5, built from dyadic
numbers so that every score is exact in float64 whatever the order of the sums (exact_scores checks that with
integer arithmetic), with near-duplicate keys that keep some rows soft.
"""

import math
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backward_model import DT, Problem, forward, leaves_of  # noqa: E402  (it also sets one thread, deterministic)
import make_golden  # noqa: E402  (uniform)


def exact_scores(p, doc, x_bits, c_bits, w_bits):
    """Checks that float64 computes the scores exactly, whatever the order of the sums, and returns them
    (h, n, m). X is made of multiples of 2^-x_bits, the context of 2^-c_bits, W_q and W_k of 2^-w_bits:
    every q, k and score is then an integer times a power of two, and every partial sum of any order is
    such a number below the sum of the terms' magnitudes; below 2^53 units it is a double, with no rounding."""
    def ints(x, bits):
        x = np.asarray(x, dtype=np.float64) * 2.0 ** bits
        if not np.array_equal(x, np.round(x)):
            raise AssertionError("not dyadic")
        return [[int(v) for v in row] for row in x.reshape(-1, x.shape[-1])]

    def exact_dot(a, b):
        if sum(abs(u * v) for u, v in zip(a, b)) >= 2 ** 53:
            raise AssertionError("a sum needs more than 53 bits")
        return sum(u * v for u, v in zip(a, b))

    def matmul(A, B):
        return [[exact_dot(row, col) for col in zip(*B)] for row in A]

    def io(key):
        W = np.asarray(doc[key], dtype=np.float64)
        return W.T if p.out_in else W

    X = ints(doc["X"], x_bits)
    C = ints(doc["context"]["X"], c_bits) if p.cross else X
    q = matmul(X, ints(io("W_q"), w_bits))  # in units of 2^-(x_bits + w_bits)
    k = matmul(C, ints(io("W_k"), w_bits))  # in units of 2^-(c_bits + w_bits)
    unit = 2.0 ** -(x_bits + (c_bits if p.cross else x_bits) + 2 * w_bits)
    rep = p.h // p.g
    S = np.zeros((p.h, p.n, p.m))
    for hd in range(p.h):
        kv = hd // rep
        for i in range(p.n):
            for j in range(p.m):
                S[hd, i, j] = exact_dot(q[i][hd * p.d_k:(hd + 1) * p.d_k], k[j][kv * p.d_k:(kv + 1) * p.d_k]) * unit
    with torch.no_grad():
        torch_S = forward(p, {key: x.detach() for key, x in leaves_of(doc).items()})["scores"][0].numpy()
    if not np.array_equal(torch_S, S):
        raise AssertionError("torch's scores are not the exact ones")
    return S


def dyadic(gen, shape, bits, lo=-1.0, hi=1.0):
    return torch.round(make_golden.uniform(gen, *shape, lo=lo, hi=hi) * 2 ** bits) / 2 ** bits


def large_logits(name, target, input_seed, *, n, d_model, h, g, d_k, d_v, m=None, step_bits, near, mask=None,
                 layout="in_out", what):
    """Scores up to about `target` (scale 1) from exact dyadic numbers, with near-duplicate keys that keep
    some rows soft and give them distinct values.

    The key rows (X, or the context for cross-attention) are multiples of 1/16; a near-duplicate row
    (`near`: copy -> original) is its original plus a few 2^-step_bits in every feature but the last, and a
    fresh last feature. W_k's last row is 0, so the last feature moves only the values: the two keys' scores
    differ by about 1, their values by about 1. W_q and W_k are multiples of 1/8, scaled so that the largest
    allowed |S'| is near `target`, and signed so that it is a positive score: that row's log-sum-exp is about
    +target. W_v, W_o, b_v and b_o are multiples of 1/64."""
    gen = torch.Generator().manual_seed(input_seed)
    cross = m is not None
    keys = dyadic(gen, (m if cross else n, d_model), 4)
    for dst, src in near.items():
        steps = torch.randint(-3, 4, (d_model - 1,), generator=gen).to(DT)
        keys[dst, :-1] = keys[src, :-1] + steps * 2.0 ** -step_bits
        keys[dst, -1] = dyadic(gen, (1,), 4)[0]
    X = dyadic(gen, (n, d_model), 4) if cross else keys
    Wq_raw = make_golden.uniform(gen, d_model, h * d_k)
    Wk_raw = make_golden.uniform(gen, d_model, g * d_k)
    Wk_raw[-1] = 0.0  # the last feature reaches the values only
    Wv = dyadic(gen, (d_model, g * d_v), 6)
    Wo = dyadic(gen, (h * d_v, d_model), 6)
    bv = dyadic(gen, (g * d_v,), 6)
    bo = dyadic(gen, (d_model,), 6)

    def doc_with(Wq, Wk):
        def w_file(W):  # W is in_out here
            return W.t().tolist() if layout == "out_in" else W.tolist()
        doc = {"description": what, "X": X.tolist(), "W_q": w_file(Wq), "W_k": w_file(Wk), "W_v": w_file(Wv),
               "W_o": w_file(Wo), "b_v": bv.tolist(), "b_o": bo.tolist()}
        if h != 1 or g != h:
            doc["n_heads"] = h
        if g != h:
            doc["n_kv_heads"] = g
        doc["scale"] = 1
        if mask is not None:
            doc["mask"] = mask
        doc["layout"] = layout
        if cross:
            doc["context"] = {"X": keys.tolist()}
        return doc

    def largest(f):
        Wq, Wk = torch.round(Wq_raw * f * 8) / 8, torch.round(Wk_raw * f * 8) / 8
        doc = doc_with(Wq, Wk)
        p = Problem(doc)
        S = exact_scores(p, doc, 4 if cross else step_bits, step_bits, 3)
        allow = p.allow[0].numpy()[None].repeat(h, axis=0)
        i = np.argmax(np.where(allow, np.abs(S), -1.0))
        return S.reshape(-1)[i], Wq, Wk

    f = 1.0
    for _ in range(4):  # the rounding to 1/8 moves the scores a little: fit the factor again
        top, _, _ = largest(f)
        f *= math.sqrt(target / abs(top))
    top, Wq, Wk = largest(f)
    if top < 0:
        Wq = -Wq  # the largest |S'| becomes a positive score
    doc = doc_with(Wq, Wk)
    p = Problem(doc)
    S = exact_scores(p, doc, 4 if cross else step_bits, step_bits, 3)
    allow = p.allow[0].numpy()[None].repeat(h, axis=0)
    top = float(np.where(allow, np.abs(S), -1.0).max())
    if not (0.98 * target <= top <= 1.02 * target) or float(np.where(allow, S, -np.inf).max()) != top:
        raise AssertionError(f"{name}: the largest |S'| is {top}, not a score of about {target:g}")
    masked = np.where(allow, S, -np.inf)
    row_max = masked.max(axis=-1)
    lse = row_max + np.log(np.exp(masked - row_max[..., None]).sum(axis=-1))
    w = np.exp(masked - lse[..., None])
    second = np.sort(w, axis=-1)[..., -2]
    soft = int((second >= 1e-3).sum())
    if soft == 0:
        raise AssertionError(f"{name}: the softmax is one-hot in every row")
    facts = {"max_scaled": top, "max_abs_lse": float(np.abs(lse).max()), "soft_rows": soft, "rows": int(lse.size),
             "second": float(second.max())}
    if abs(facts["max_abs_lse"] - target) > 0.02 * target:
        raise AssertionError(f"{name}: the largest |lse| is {facts['max_abs_lse']}, not about {target:g}")
    extra = (f". Input: dyadic numbers from a torch.Generator seeded {input_seed}: the key rows "
             f"({'the context' if cross else 'X'}) multiples of 1/16, near-duplicate rows "
             f"{', '.join(f'{d} of {s}' for d, s in near.items())} a few 2^-{step_bits} from the original in every "
             "feature but the last, which W_k ignores (its last row is 0) and which gives them other values; "
             f"W_q and W_k multiples of 1/8, the rest of 1/64. So every score is exact in float64 whatever the order "
             f"of the sums (checked with integer arithmetic). The largest |S'| is {top!r}, a score; the largest "
             f"|log-sum-exp| of a row is {facts['max_abs_lse']:.9g}; {soft} of {lse.size} rows (over heads) keep a "
             f"second weight >= 1e-3 (at most {facts['second']:.3g}); in the others every weight but the largest "
             "is below 1e-3")
    return doc, extra, facts
