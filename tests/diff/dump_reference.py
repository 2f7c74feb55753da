"""An input of docs/input-format.md read back as float64 arrays, the attention it means computed with NumPy
apart from PyTorch, and how far a dumped step may lie from that reference: what make_dumps.py and
make_fused_dumps.py check every dump against.

The reference is written separately from the PyTorch computation of the dumps (einsum, its own softmax and
mask). A row that the mask leaves with nothing to see gets zero weights, as attn-trace gives it.
"""

import math

import numpy as np

# Machine epsilon of each dtype; the tolerances of the checks are multiples of it.
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
# At `masked`, a finite value this low where the reference has -inf counts as masked (docs of diff).
MASKED_FINITE = -1e4


# ------------------------------------------------------------------- reading the input back (both paths)

class Problem:
    """The input document as arrays: X (B, n, d), C (B, m, d_ctx), weights in × out, allowed (B, n, m)."""

    def __init__(self, doc):
        X = np.array(doc["X"], dtype=np.float64)
        self.batched = X.ndim == 3
        self.X = X if self.batched else X[None]
        C = np.array(doc["context"]["X"], dtype=np.float64) if "context" in doc else None
        self.C = self.X if C is None else (C if self.batched else C[None])
        out_in = doc.get("layout", "in_out") == "out_in"
        for key in ("W_q", "W_k", "W_v", "W_o"):
            w = np.array(doc[key], dtype=np.float64) if key in doc else None
            setattr(self, key, w.T.copy() if (w is not None and out_in) else w)
        for key in ("b_q", "b_k", "b_v", "b_o"):
            setattr(self, key, np.array(doc[key], dtype=np.float64) if key in doc else None)
        self.h = int(doc.get("n_heads", 1))
        self.g = int(doc.get("n_kv_heads", self.h))
        self.B, self.n = self.X.shape[0], self.X.shape[1]
        self.m = self.C.shape[1]
        self.d_k = self.W_q.shape[1] // self.h
        self.d_v = self.W_v.shape[1] // self.g
        self.scale = float(doc.get("scale", 1.0 / math.sqrt(self.d_k)))
        self.mask = doc.get("mask", "none")
        self.allowed = allowed(self.mask, self.B, self.n, self.m)


def allowed(mask, B, n, m, align=None, reach=0):
    """(B, n, m) booleans: may query i see key j (docs/input-format.md, "Masks").

    align overrides the mask's alignment and reach lets a causal query see `reach` more keys: the
    planted mask mistakes use them."""
    kind = mask if isinstance(mask, str) else mask["type"]
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    if kind == "none":
        a = np.ones((n, m), dtype=bool)
    elif kind == "causal":
        al = align or ("top_left" if isinstance(mask, str) else mask.get("align", "top_left"))
        offset = m - n if al == "bottom_right" else 0
        a = j <= i + offset + reach
    elif kind == "padding":
        keep = np.array(mask["keep"]) == 1
        a = np.broadcast_to(keep.reshape(-1, 1, m), (keep.reshape(-1, m).shape[0], n, m))
    elif kind == "custom":
        a = np.array(mask["allow"], dtype=bool)
    else:
        raise ValueError(f"mask type {kind} is not used by these cases")
    return np.broadcast_to(a, (B, n, m)).copy()


# ---------------------------------------------------------------------- NumPy, float64, written apart

def reference(P):
    """The attention of docs/input-format.md in float64 NumPy, each (B, ...), heads (B, h, n, d)."""
    def proj(x, w, b):
        y = np.einsum("bti,io->bto", x, w)
        return y if b is None else y + b

    r = {"q": proj(P.X, P.W_q, P.b_q), "k": proj(P.C, P.W_k, P.b_k), "v": proj(P.C, P.W_v, P.b_v)}
    r["q_heads"] = r["q"].reshape(P.B, P.n, P.h, P.d_k).transpose(0, 2, 1, 3)
    r["k_heads"] = r["k"].reshape(P.B, P.m, P.g, P.d_k).transpose(0, 2, 1, 3)
    r["v_heads"] = r["v"].reshape(P.B, P.m, P.g, P.d_v).transpose(0, 2, 1, 3)
    kv = np.arange(P.h) // (P.h // P.g)
    r["scores"] = np.einsum("bhid,bhjd->bhij", r["q_heads"], r["k_heads"][:, kv])
    r["scaled"] = r["scores"] * P.scale
    r["masked"] = np.where(P.allowed[:, None], r["scaled"], -np.inf)
    r["weights"] = softmax(r["masked"], axis=-1)
    r["head_outputs"] = np.einsum("bhij,bhjd->bhid", r["weights"], r["v_heads"][:, kv])
    r["concat"] = r["head_outputs"].transpose(0, 2, 1, 3).reshape(P.B, P.n, P.h * P.d_v)
    r["output"] = proj(r["concat"], P.W_o, P.b_o) if P.W_o is not None else r["concat"]
    return r


def softmax(x, axis):
    """Softmax with -inf for hidden entries; a line of only -inf gets zeros."""
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(x - top)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


# ----------------------------------------------------------- how far a dump may lie from the reference

def tolerance(dtype):
    """How far a step in `dtype` may lie from the float64 reference: generous multiples of epsilon
    (errors grow through the steps), still far below what any planted mistake moves."""
    return {"float64": 1e-12, "float32": 2e-5, "float16": 2e-2, "bfloat16": 1.2e-1}[dtype]


def divergence(step, got, want, dtype):
    """None if `got` agrees with `want` at this step, else a sentence saying where it does not."""
    tol = tolerance(dtype)
    hidden = np.isneginf(want)
    if step == "masked":
        bad = hidden & ~(np.isneginf(got) | (np.isfinite(got) & (got <= MASKED_FINITE)))
        if bad.any():
            return f"a hidden entry is {got[bad][0]!r} at {np.argwhere(bad)[0].tolist()}"
    elif hidden.any():
        raise AssertionError(f"{step}: -inf in the reference")
    seen = ~hidden
    if (np.isneginf(got) & seen).any():
        return "-inf where the reference is finite"
    limit = tol * np.maximum(1.0, np.abs(want[seen]))
    err = np.abs(got[seen] - want[seen])
    if not (err <= limit).all():
        worst = int(np.argmax(err - limit))
        return f"off by {err[worst]:.3g} (tolerance {limit[worst]:.3g})"
    return None
