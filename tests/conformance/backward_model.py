"""The forward pass of docs/input-format.md in torch, on leaves that hold an input file's own tensors, and the
gradients that autograd gives for it: what make_backward.py computes its goldens with, and what make_extras.py
builds soft-capping, sinks and dropout on.

Problem reads what the forward needs from an input document beyond its tensors: the shapes, the heads, the
scale, the mask as booleans, RoPE's positions and pairs, ALiBi's slopes. leaves_of gives the file's tensors as
float64 leaves in the file's own layout and shapes, so their gradients come out in those shapes. forward
computes every step with a batch axis (1 for a single sequence); a row that the mask leaves with nothing to
attend gets 0 scores before the softmax and its weights multiplied by 0, so autograd sees no NaN. autograd
gives the gradient of L = Σ Y ⊙ dY at every step and every leaf.
"""

import math
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import golden_common  # noqa: E402  (allowed, empty_rows; it also sets one thread, deterministic)
import make_positions  # noqa: E402  (get_slopes)

DT = torch.float64
LEAVES = ("X", "context", "W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")


# ------------------------------------------------------------------------------------------ the problem

class Problem:
    """What the forward pass needs from an input document, beyond its tensors."""

    def __init__(self, doc):
        X = np.asarray(doc["X"], dtype=np.float64)
        self.batched = X.ndim == 3
        self.cross = "context" in doc
        C = np.asarray(doc["context"]["X"], dtype=np.float64) if self.cross else X
        if C.ndim != X.ndim:
            raise ValueError("the context must be a batch exactly when X is")
        self.B = X.shape[0] if self.batched else 1
        self.n = X.shape[-2]
        self.m = C.shape[-2]
        self.d_model = X.shape[-1]
        self.d_context = C.shape[-1]
        self.out_in = doc.get("layout", "in_out") == "out_in"
        self.h = doc.get("n_heads", 1)
        self.g = doc.get("n_kv_heads", self.h)

        def width(key):  # the output width of a weight, in either layout
            W = np.asarray(doc[key])
            return W.shape[0] if self.out_in else W.shape[1]

        self.d_k = width("W_q") // self.h
        self.d_v = width("W_v") // self.g
        self.has_wo = "W_o" in doc
        self.d_out = width("W_o") if self.has_wo else self.h * self.d_v
        self.scale = float(doc.get("scale", 1.0 / math.sqrt(self.d_k)))
        self.allow = golden_common.allowed(doc.get("mask"), self.B, self.n, self.m)  # (B, n, m)
        self.empty = golden_common.empty_rows(self.allow)  # (B, n)
        n, m = self.n, self.m
        self.rope = doc.get("rope")
        if self.rope is not None:
            self.pos_q = [float(p) for p in self.rope.get("positions", range(n))]
            self.pos_k = [float(p) for p in self.rope.get("context_positions", range(m))] if self.cross else self.pos_q
            self.theta = float(self.rope.get("theta", 10000.0))
            self.dims = self.rope.get("dims", self.d_k)
            self.style = self.rope.get("style", "half")
        else:  # ALiBi's positions without rope: keys 0 … m-1, the last query at the last key
            self.pos_q = [float(m - n + i) for i in range(n)]
            self.pos_k = [float(j) for j in range(m)]
        alibi = doc.get("alibi")
        self.slopes = None
        if alibi is not None and alibi is not False:
            self.slopes = [float(s) for s in (make_positions.get_slopes(self.h) if alibi is True else alibi)]

    def pairs(self):
        """The feature pairs (a, b) that RoPE turns together, with θ_i = theta^(-2i/dims)."""
        half = self.dims // 2
        for i in range(half):
            a, b = (i, i + half) if self.style == "half" else (2 * i, 2 * i + 1)
            yield a, b, self.theta ** (-2.0 * i / self.dims)


def leaves_of(doc):
    """The file's tensors as float64 leaves that require gradients, in the file's own shapes."""
    t = {}
    for key in LEAVES:
        if key == "context":
            if "context" in doc:
                t[key] = torch.tensor(doc["context"]["X"], dtype=DT, requires_grad=True)
        elif key in doc:
            t[key] = torch.tensor(doc[key], dtype=DT, requires_grad=True)
    return t


# ------------------------------------------------------------------------------- the forward, in torch

def rope_tables(p, pos):
    """cos and sin tables and the pair permutation for RoPE at positions pos: x_rot = x·c + x[perm]·s."""
    T = len(pos)
    pos = torch.tensor(pos, dtype=DT)
    c = torch.ones(T, p.d_k, dtype=DT)
    s = torch.zeros(T, p.d_k, dtype=DT)
    perm = list(range(p.d_k))
    for a, b, th in p.pairs():
        ang = pos * th
        c[:, a] = c[:, b] = torch.cos(ang)
        s[:, a] = -torch.sin(ang)  # rot[a] = x[a]·cos − x[b]·sin
        s[:, b] = torch.sin(ang)   # rot[b] = x[b]·cos + x[a]·sin
        perm[a], perm[b] = b, a
    return c, s, perm


def forward(p, t):
    """Every step of the forward pass, from the leaves t. Tensors carry a batch axis (1 for one sequence)."""
    def batch(x):
        return x if p.batched else x.unsqueeze(0)

    def io(W):  # the math convention, d_in × d_out
        return W.t() if p.out_in else W

    def project(x, key, bkey):
        y = x @ io(t[key])
        return y + t[bkey] if bkey in t else y

    B, n, m, h, g, d_k, d_v = p.B, p.n, p.m, p.h, p.g, p.d_k, p.d_v
    X = batch(t["X"])
    C = batch(t["context"]) if p.cross else X
    s = {}
    s["q"] = project(X, "W_q", "b_q")  # (B, n, h·d_k)
    s["k"] = project(C, "W_k", "b_k")  # (B, m, g·d_k)
    s["v"] = project(C, "W_v", "b_v")  # (B, m, g·d_v)
    s["q_heads"] = s["q"].view(B, n, h, d_k).transpose(1, 2)  # (B, h, n, d_k)
    s["k_heads"] = s["k"].view(B, m, g, d_k).transpose(1, 2)  # (B, g, m, d_k)
    s["v_heads"] = s["v"].view(B, m, g, d_v).transpose(1, 2)  # (B, g, m, d_v)
    if p.rope is not None:
        cq, sq_, perm = rope_tables(p, p.pos_q)
        ck, sk, _ = rope_tables(p, p.pos_k)
        s["q_rot"] = s["q_heads"] * cq + s["q_heads"][..., perm] * sq_
        s["k_rot"] = s["k_heads"] * ck + s["k_heads"][..., perm] * sk
        Qr, Kr = s["q_rot"], s["k_rot"]
    else:
        Qr, Kr = s["q_heads"], s["k_heads"]
    rep = h // g  # query head hd reads kv head hd // rep
    s["scores"] = Qr @ Kr.repeat_interleave(rep, dim=1).transpose(-1, -2)  # (B, h, n, m)
    s["scaled"] = s["scores"] * p.scale
    pre = s["scaled"]
    if p.slopes is not None:
        slopes = torch.tensor(p.slopes, dtype=DT).view(h, 1, 1)
        dist = torch.tensor(p.pos_q, dtype=DT).view(1, n, 1) - torch.tensor(p.pos_k, dtype=DT).view(1, 1, m)
        s["bias"] = s["scaled"] + (-slopes * dist).unsqueeze(0)
        pre = s["bias"]
    allow = p.allow.unsqueeze(1)  # (B, 1, n, m)
    empty = p.empty.view(B, 1, n, 1)
    # -inf where not allowed; a row with nothing to attend gets 0 instead, and its weights are multiplied by 0
    fill = torch.where(empty, torch.tensor(0.0, dtype=DT), torch.tensor(-math.inf, dtype=DT)).expand(B, 1, n, m)
    s["masked"] = torch.where(allow, pre, fill)
    s["weights"] = torch.softmax(s["masked"], dim=-1) * (~empty).to(DT)
    s["head_outputs"] = s["weights"] @ s["v_heads"].repeat_interleave(rep, dim=1)  # (B, h, n, d_v)
    s["concat"] = s["head_outputs"].transpose(1, 2).reshape(B, n, h * d_v)
    s["output"] = project(s["concat"], "W_o", "b_o") if p.has_wo else s["concat"]
    return s


def loss(p, t, dY):
    Y = forward(p, t)["output"]
    return (Y * (dY if p.batched else dY.unsqueeze(0))).sum()


# ------------------------------------------------------------------------------------ autograd gradients

def autograd(p, doc, dY):
    """The gradients of L = Σ Y ⊙ dY, by name, each in the golden's shape (a batch axis only for a batch)."""
    t = leaves_of(doc)
    s = forward(p, t)
    for x in s.values():
        x.retain_grad()
    (s["output"] * (dY if p.batched else dY.unsqueeze(0))).sum().backward()

    def sq(x):
        return x if p.batched else x[0]

    grads = {"d_output": sq(s["output"].grad), "d_concat": sq(s["concat"].grad),
             "d_head_outputs": sq(s["head_outputs"].grad), "d_weights": sq(s["weights"].grad),
             "d_v_heads": sq(s["v_heads"].grad), "d_masked": sq(s["masked"].grad), "d_scaled": sq(s["scaled"].grad),
             "d_scores": sq(s["scores"].grad)}
    if p.rope is not None:
        grads["d_q_rot"], grads["d_k_rot"] = sq(s["q_rot"].grad), sq(s["k_rot"].grad)
    grads.update({"d_q_heads": sq(s["q_heads"].grad), "d_k_heads": sq(s["k_heads"].grad),
                  "d_q": sq(s["q"].grad), "d_k": sq(s["k"].grad), "d_v": sq(s["v"].grad)})
    for key in LEAVES:
        if key in t:
            grads[f"d_{key}"] = t[key].grad
    return {k: v.detach() for k, v in grads.items()}, {k: v.detach() for k, v in s.items()}
