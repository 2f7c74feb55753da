#!/usr/bin/python3
"""Writes the goldens of soft-capping, attention sinks and dropout: attention inputs with the keys "softcap",
"sinks" and "dropout", an upstream gradient dY, every forward step and every gradient, computed by PyTorch
autograd in float64.

Run it from anywhere with Debian's Python, which has python3-torch and python3-numpy:

    /usr/bin/python3 tests/conformance/make_extras.py

It rewrites tests/conformance/golden_extras/*.json and removes the files of cases that no longer exist.

The three keys, in the order of the forward steps (q, k, v, q_heads, k_heads, v_heads, q_rot, k_rot, scores,
scaled, capped, bias, masked, weights, dropped, head_outputs, concat, output):
- "softcap": c > 0. capped = c·tanh(S'/c), right after scaled and before ALiBi's bias and the mask, as Gemma 2
  caps its logits. ALiBi's bias is added to the capped scores, then the mask, then the softmax.
- "sinks": one logit per query head, in the space of the masked scores (not scaled, capped or biased). A row
  of head hd: m = max(sink_hd, max_j s_ij), l = exp(sink_hd − m) + Σ_j exp(s_ij − m) (masked keys add 0),
  A_ij = exp(s_ij − m)/l, and the sink's share exp(sink_hd − m)/l is the expected key sink_weights (h × n,
  B × h × n for a batch). The sink has no value, so head_outputs = A·V; a row the mask empties puts all its
  weight on the sink. Here the softmax runs over the row with the sink as one more column (torch.cat) and the
  column is split off again.
- "dropout": {"p", "seed"}. dropped = A ⊙ Z · (1/(1−p)) and head_outputs = dropped·V, where the keep mask Z is
  a pure function of (seed, b, hd, i, j): Philox4x32-10 (Salmon et al., "Parallel random
  numbers: as easy as 1, 2, 3", SC 2011; the Random123 generator), written out below, with key
  (seed & 0xffffffff, seed >> 32) and counter (j, i, hd, b); the first output word x0 keeps the entry iff
  x0 ≥ floor(p·2^32), an exact integer. Each dropout golden carries Z as "keep_mask" (B × h × n × m, 0/1,
  always with the batch axis). F.dropout cannot be seeded to this mask, so the forward multiplies by Z.

Each file is {name, what, how, dY_seed, input, expected, keep_mask (dropout only)}; expected holds every forward
step that applies, sink_weights with sinks, and every gradient that applies, in this order: d_output,
d_concat, d_head_outputs, d_dropped, d_weights, d_v_heads, d_masked, d_capped, d_scaled, d_scores, d_q_rot,
d_k_rot, d_q_heads, d_k_heads, d_q, d_k, d_v, d_X, d_context, d_W_q … d_W_o, d_b_q … d_b_o, d_sinks. Shapes are
make_backward.py's (no batch axis for a single sequence; parameters' gradients never have one, the weights'
in the file's layout; d_sinks has h numbers, summed over the batch and the queries). The masked step holds
"-inf" (a string, as the trace writes it) at every entry the mask forbids, in empty rows too.

Checks, each of which stops the script when it fails:
- Philox4x32-10 gives Random123's known-answer vectors;
- a NumPy forward and backward written out by hand (the sink softmax with m and l, the softcap's derivative
  1 − tanh²(S'/c), the keep mask, d_sinks = Σ_{b,i} −a_sink·D with D = Σ_j dA_ij·A_ij, ...) gives every
  expected key, forward and backward, to 1e-12·max(1, |value|), and the same "-inf" entries in masked;
- central differences (step 1e-5) on the first, middle and last entry of every leaf, the sinks included,
  agree with autograd to 1e-7·max(1, |value|), except where the largest |S'| or |masked| of an allowed entry
  is 100 or more (as make_backward.py);
- no NaN or infinity anywhere but the masked step's "-inf"; d_output is dY; d_masked is 0 at masked entries
  and in empty rows; every row of weights plus its sink share sums to 1 (a row without a key and without a
  sink sums to 0); with p = 0 the keep mask is all ones, dropped equals weights exactly, and make_backward.py's
  own autograd on the input without "dropout" gives every gradient; a sink whose share underflows to 0 leaves
  its head's weights those of the input without sinks.
"""

import fractions
import json
import math
import pathlib
import sys

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_backward  # noqa: E402  (Problem, leaves_of, rope_tables, draw_dY, describe_empty)
import make_golden  # noqa: E402  (make_case, custom_mask, to_text; it also sets one thread, deterministic)

DT = torch.float64
OUT_DIR = HERE / "golden_extras"
DATA_DIR = make_backward.DATA_DIR
TOL = make_backward.TOL          # autograd against the hand-written NumPy pass
FD_STEP = make_backward.FD_STEP
FD_TOL = make_backward.FD_TOL
ROW_SUM_TOL = 1e-14

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

FORWARD = ("q", "k", "v", "q_heads", "k_heads", "v_heads", "q_rot", "k_rot", "scores", "scaled", "capped", "bias",
           "masked", "weights", "sink_weights", "dropped", "head_outputs", "concat", "output")
GRADIENTS = ("d_output", "d_concat", "d_head_outputs", "d_dropped", "d_weights", "d_v_heads", "d_masked",
             "d_capped", "d_scaled", "d_scores", "d_q_rot", "d_k_rot", "d_q_heads", "d_k_heads", "d_q", "d_k", "d_v",
             "d_X", "d_context", "d_W_q", "d_W_k", "d_W_v", "d_W_o", "d_b_q", "d_b_k", "d_b_v", "d_b_o", "d_sinks")
LEAVES = make_backward.LEAVES + ("sinks",)
BATCH_FREE = {"d_W_q", "d_W_k", "d_W_v", "d_W_o", "d_b_q", "d_b_k", "d_b_v", "d_b_o", "d_sinks"}


# --------------------------------------------------------------------------------------- Philox4x32-10

MASK32 = 0xFFFFFFFF
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85  # the Weyl increments of the key (golden ratio, sqrt(3) - 1)


def philox4x32_10(ctr, key):
    """Random123's philox4x32_R with R = 10: ten rounds, the key bumped between rounds (nine times)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        p0 = PHILOX_M0 * c0  # a 64-bit product: hi and lo words
        p1 = PHILOX_M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
    return c0, c1, c2, c3


PHILOX_KATS = (  # Random123's kat_vectors for philox4x32_10
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32, MASK32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
)


def check_philox():
    for ctr, key, want in PHILOX_KATS:
        got = philox4x32_10(ctr, key)
        if got != want:
            raise AssertionError(f"Philox4x32-10 of ctr {ctr} key {key}: {[hex(x) for x in got]}, "
                                 f"Random123 {[hex(x) for x in want]}")


def threshold(p):
    """floor(p · 2^32) exactly: p is a double, so Fraction(p) is its exact value."""
    return math.floor(fractions.Fraction(p) * 2 ** 32)


def keep_mask(seed, p, B, h, n, m):
    """Z[b][hd][i][j] = 1 iff x0 of Philox4x32-10(ctr (j, i, hd, b), key (seed lo, seed hi)) ≥ floor(p·2^32)."""
    if not (isinstance(seed, int) and 0 <= seed < 2 ** 64):
        raise ValueError(f"a dropout seed is an integer 0 … 2^64 − 1, not {seed!r}")
    if not 0 <= p < 1:
        raise ValueError(f"dropout p must be in [0, 1), not {p!r}")
    t = threshold(p)
    key = (seed & MASK32, seed >> 32)
    return [[[[int(philox4x32_10((j, i, hd, b), key)[0] >= t) for j in range(m)] for i in range(n)]
             for hd in range(h)] for b in range(B)]


# ------------------------------------------------------------------------------------------ the problem

class Problem(make_backward.Problem):
    """make_backward.py's problem, with the three new keys."""

    def __init__(self, doc):
        super().__init__(doc)
        self.softcap = float(doc["softcap"]) if "softcap" in doc else None
        if self.softcap is not None and not self.softcap > 0:
            raise ValueError("softcap must be > 0")
        self.sinks = [float(s) for s in doc["sinks"]] if "sinks" in doc else None
        if self.sinks is not None and len(self.sinks) != self.h:
            raise ValueError("one sink per query head")
        self.dropout = doc.get("dropout")
        self.keep = None
        if self.dropout is not None:
            self.p_drop = float(self.dropout["p"])
            self.seed = self.dropout["seed"]
            self.keep = torch.tensor(keep_mask(self.seed, self.p_drop, self.B, self.h, self.n, self.m), dtype=DT)
            self.inv_keep = 1.0 / (1.0 - self.p_drop)


def leaves_of(doc):
    t = make_backward.leaves_of(doc)
    if "sinks" in doc:
        t["sinks"] = torch.tensor(doc["sinks"], dtype=DT, requires_grad=True)
    return t


# ------------------------------------------------------------------------------- the forward, in torch

def forward(p, t):
    """Every step of the forward pass from the leaves t, each with a batch axis (1 for one sequence).
    Without the new keys this is make_backward.forward step for step."""
    def batch(x):
        return x if p.batched else x.unsqueeze(0)

    def io(W):
        return W.t() if p.out_in else W

    def project(x, key, bkey):
        y = x @ io(t[key])
        return y + t[bkey] if bkey in t else y

    B, n, m, h, g, d_k, d_v = p.B, p.n, p.m, p.h, p.g, p.d_k, p.d_v
    X = batch(t["X"])
    C = batch(t["context"]) if p.cross else X
    s = {}
    s["q"] = project(X, "W_q", "b_q")
    s["k"] = project(C, "W_k", "b_k")
    s["v"] = project(C, "W_v", "b_v")
    s["q_heads"] = s["q"].view(B, n, h, d_k).transpose(1, 2)
    s["k_heads"] = s["k"].view(B, m, g, d_k).transpose(1, 2)
    s["v_heads"] = s["v"].view(B, m, g, d_v).transpose(1, 2)
    if p.rope is not None:
        cq, sq_, perm = make_backward.rope_tables(p, p.pos_q)
        ck, sk, _ = make_backward.rope_tables(p, p.pos_k)
        s["q_rot"] = s["q_heads"] * cq + s["q_heads"][..., perm] * sq_
        s["k_rot"] = s["k_heads"] * ck + s["k_heads"][..., perm] * sk
        Qr, Kr = s["q_rot"], s["k_rot"]
    else:
        Qr, Kr = s["q_heads"], s["k_heads"]
    rep = h // g
    s["scores"] = Qr @ Kr.repeat_interleave(rep, dim=1).transpose(-1, -2)
    s["scaled"] = s["scores"] * p.scale
    pre = s["scaled"]
    if p.softcap is not None:
        s["capped"] = p.softcap * torch.tanh(pre / p.softcap)
        pre = s["capped"]
    if p.slopes is not None:
        slopes = torch.tensor(p.slopes, dtype=DT).view(h, 1, 1)
        dist = torch.tensor(p.pos_q, dtype=DT).view(1, n, 1) - torch.tensor(p.pos_k, dtype=DT).view(1, 1, m)
        s["bias"] = pre + (-slopes * dist).unsqueeze(0)
        pre = s["bias"]
    allow = p.allow.unsqueeze(1)
    empty = p.empty.view(B, 1, n, 1)
    minus_inf = torch.tensor(-math.inf, dtype=DT)
    if p.sinks is not None:
        # the sink is one more column of every row: finite, so even a row without a key has a softmax
        s["masked"] = torch.where(allow, pre, minus_inf)
        sink = t["sinks"].view(1, h, 1, 1).expand(B, h, n, 1)
        P = torch.softmax(torch.cat([s["masked"], sink], dim=-1), dim=-1)
        s["weights"] = P[..., :m]
        s["sink_weights"] = P[..., m]
    else:  # make_backward.py's zero policy: a row without a key gets 0 scores, then 0 weights
        fill = torch.where(empty, torch.tensor(0.0, dtype=DT), minus_inf).expand(B, 1, n, m)
        s["masked"] = torch.where(allow, pre, fill)
        s["weights"] = torch.softmax(s["masked"], dim=-1) * (~empty).to(DT)
    mix = s["weights"]
    if p.keep is not None:
        s["dropped"] = s["weights"] * p.keep * p.inv_keep
        mix = s["dropped"]
    s["head_outputs"] = mix @ s["v_heads"].repeat_interleave(rep, dim=1)
    s["concat"] = s["head_outputs"].transpose(1, 2).reshape(B, n, h * d_v)
    s["output"] = project(s["concat"], "W_o", "b_o") if p.has_wo else s["concat"]
    return s


def shown_masked(p, steps):
    """The masked step as the tool shows it: "-inf" at every forbidden entry, in empty rows too."""
    allow = p.allow.unsqueeze(1).expand_as(steps["masked"])
    pre = steps["bias"] if "bias" in steps else steps["capped"] if "capped" in steps else steps["scaled"]
    return torch.where(allow, pre, torch.tensor(-math.inf, dtype=DT))


def loss(p, t, dY):
    Y = forward(p, t)["output"]
    return (Y * (dY if p.batched else dY.unsqueeze(0))).sum()


def autograd(p, doc, dY):
    """The forward steps and the gradients of L = Σ Y ⊙ dY, by name, each with a batch axis; the leaves'
    gradients in their own shapes."""
    t = leaves_of(doc)
    s = forward(p, t)
    for x in s.values():
        if x.requires_grad:
            x.retain_grad()
    (s["output"] * (dY if p.batched else dY.unsqueeze(0))).sum().backward()
    grads = {"d_output": s["output"].grad, "d_concat": s["concat"].grad, "d_head_outputs": s["head_outputs"].grad}
    if "dropped" in s:
        grads["d_dropped"] = s["dropped"].grad
    grads.update({"d_weights": s["weights"].grad, "d_v_heads": s["v_heads"].grad, "d_masked": s["masked"].grad})
    if "capped" in s:
        grads["d_capped"] = s["capped"].grad
    grads.update({"d_scaled": s["scaled"].grad, "d_scores": s["scores"].grad})
    if p.rope is not None:
        grads["d_q_rot"], grads["d_k_rot"] = s["q_rot"].grad, s["k_rot"].grad
    grads.update({"d_q_heads": s["q_heads"].grad, "d_k_heads": s["k_heads"].grad, "d_q": s["q"].grad,
                  "d_k": s["k"].grad, "d_v": s["v"].grad})
    for key in LEAVES:
        if key in t:
            grads[f"d_{key}"] = t[key].grad
    steps = {k: v.detach() for k, v in s.items()}
    steps["masked"] = shown_masked(p, steps)
    return steps, {k: v.detach() for k, v in grads.items()}


# ------------------------------------------------------------ check 1: NumPy, forward and backward

def numpy_pass(p, doc, dY):
    """The forward steps and the gradients once more, with NumPy, every step written out: each with a batch
    axis except the parameters' gradients."""
    X = np.asarray(doc["X"], dtype=np.float64)
    C = np.asarray(doc["context"]["X"], dtype=np.float64) if p.cross else X
    dY = dY.numpy()
    if not p.batched:
        X, C, dY = X[None], C[None], dY[None]
    B, n, m, h, g, d_k, d_v = p.B, p.n, p.m, p.h, p.g, p.d_k, p.d_v
    rep = h // g

    def io(key):
        W = np.asarray(doc[key], dtype=np.float64)
        return W.T if p.out_in else W

    def bias(key):
        return np.asarray(doc[key], dtype=np.float64) if key in doc else 0.0

    f = {}
    Wq, Wk, Wv = io("W_q"), io("W_k"), io("W_v")
    f["q"], f["k"], f["v"] = X @ Wq + bias("b_q"), C @ Wk + bias("b_k"), C @ Wv + bias("b_v")
    f["q_heads"] = f["q"].reshape(B, n, h, d_k).transpose(0, 2, 1, 3)
    f["k_heads"] = f["k"].reshape(B, m, g, d_k).transpose(0, 2, 1, 3)
    f["v_heads"] = f["v"].reshape(B, m, g, d_v).transpose(0, 2, 1, 3)

    def turn(x, pos, sign):  # RoPE by +angle, or (sign -1) its transpose
        out = x.copy()
        pos = np.asarray(pos)
        for a, b_, th in p.pairs():
            cs, sn = np.cos(pos * th), sign * np.sin(pos * th)
            out[..., a] = x[..., a] * cs - x[..., b_] * sn
            out[..., b_] = x[..., b_] * cs + x[..., a] * sn
        return out

    roped = p.rope is not None
    Qr, Kr = f["q_heads"], f["k_heads"]
    if roped:
        Qr, Kr = turn(Qr, p.pos_q, 1), turn(Kr, p.pos_k, 1)
        f["q_rot"], f["k_rot"] = Qr, Kr
    Krep, Vrep = np.repeat(Kr, rep, axis=1), np.repeat(f["v_heads"], rep, axis=1)
    f["scores"] = Qr @ Krep.transpose(0, 1, 3, 2)
    f["scaled"] = f["scores"] * p.scale
    pre = f["scaled"]
    if p.softcap is not None:
        c = p.softcap
        f["capped"] = c * np.tanh(f["scaled"] / c)
        pre = f["capped"]
    if p.slopes is not None:
        dist = np.asarray(p.pos_q)[:, None] - np.asarray(p.pos_k)[None, :]
        f["bias"] = pre - np.asarray(p.slopes)[None, :, None, None] * dist[None, None]
        pre = f["bias"]
    allow = np.broadcast_to(p.allow.numpy()[:, None], (B, h, n, m))
    f["masked"] = np.where(allow, pre, -np.inf)
    if p.sinks is not None:  # m = max(sink, max_j s_ij), l = exp(sink − m) + Σ_j exp(s_ij − m)
        sink = np.asarray(p.sinks)[None, :, None]  # (1, h, 1)
        top = np.maximum(sink, np.where(allow, pre, -np.inf).max(axis=-1))  # (B, h, n)
        E = np.where(allow, np.exp(np.where(allow, pre, 0.0) - top[..., None]), 0.0)
        e_sink = np.exp(sink - top)
        l_ = e_sink + E.sum(axis=-1)
        A = E / l_[..., None]
        f["sink_weights"] = e_sink / l_
    else:  # a row without a key: zero weights
        any_ = allow.any(axis=-1, keepdims=True)
        top = np.where(any_, np.where(allow, pre, -np.inf).max(axis=-1, keepdims=True), 0.0)
        E = np.where(allow, np.exp(np.where(allow, pre - top, 0.0)), 0.0)
        A = np.where(any_, E / np.where(any_, E.sum(axis=-1, keepdims=True), 1.0), 0.0)
    f["weights"] = A
    mix = A
    if p.keep is not None:
        Z = p.keep.numpy()
        f["dropped"] = A * Z * p.inv_keep
        mix = f["dropped"]
    f["head_outputs"] = mix @ Vrep
    f["concat"] = f["head_outputs"].transpose(0, 2, 1, 3).reshape(B, n, h * d_v)
    f["output"] = f["concat"] @ io("W_o") + bias("b_o") if p.has_wo else f["concat"]

    d = {"d_output": dY}
    if p.has_wo:
        d["d_concat"] = dY @ io("W_o").T
        dWo = np.einsum("bni,bnj->ij", f["concat"], dY)
        d["d_W_o"] = dWo.T if p.out_in else dWo
    else:
        d["d_concat"] = dY
    dO = d["d_concat"].reshape(B, n, h, d_v).transpose(0, 2, 1, 3)
    d["d_head_outputs"] = dO
    d_mix = dO @ Vrep.transpose(0, 1, 3, 2)  # ∂L/∂ what multiplies V
    if p.keep is not None:
        d["d_dropped"] = d_mix
        d["d_weights"] = d_mix * Z * p.inv_keep
    else:
        d["d_weights"] = d_mix
    dA = d["d_weights"]
    d["d_v_heads"] = (mix.transpose(0, 1, 3, 2) @ dO).reshape(B, g, rep, m, d_v).sum(axis=2)
    D = (dA * A).sum(axis=-1)  # (B, h, n)
    d["d_masked"] = A * (dA - D[..., None])  # the softmax's Jacobian; 0 where A is 0
    if p.sinks is not None:  # the sink's column: its upstream gradient is 0 (no value), so a_sink·(0 − D)
        d["d_sinks"] = (-f["sink_weights"] * D).sum(axis=(0, 2))
    d_pre = np.where(allow, d["d_masked"], 0.0)  # ALiBi's bias passes it on unchanged
    if p.softcap is not None:
        d["d_capped"] = d_pre
        d["d_scaled"] = d_pre * (1.0 - np.tanh(f["scaled"] / p.softcap) ** 2)
    else:
        d["d_scaled"] = d_pre
    d["d_scores"] = d["d_scaled"] * p.scale
    dQr = d["d_scores"] @ Krep
    dKr = (d["d_scores"].transpose(0, 1, 3, 2) @ Qr).reshape(B, g, rep, m, d_k).sum(axis=2)
    if roped:
        d["d_q_rot"], d["d_k_rot"] = dQr, dKr
    d["d_q_heads"] = turn(dQr, p.pos_q, -1) if roped else dQr
    d["d_k_heads"] = turn(dKr, p.pos_k, -1) if roped else dKr
    dq = d["d_q_heads"].transpose(0, 2, 1, 3).reshape(B, n, h * d_k)
    dk = d["d_k_heads"].transpose(0, 2, 1, 3).reshape(B, m, g * d_k)
    dv = d["d_v_heads"].transpose(0, 2, 1, 3).reshape(B, m, g * d_v)
    d["d_q"], d["d_k"], d["d_v"] = dq, dk, dv
    dC = dk @ Wk.T + dv @ Wv.T
    d["d_X"] = dq @ Wq.T + (0.0 if p.cross else dC)
    if p.cross:
        d["d_context"] = dC
    for key, x, dx in (("W_q", X, dq), ("W_k", C, dk), ("W_v", C, dv)):
        dW = np.einsum("bni,bnj->ij", x, dx)
        d[f"d_{key}"] = dW.T if p.out_in else dW
    for key, dx in (("b_q", dq), ("b_k", dk), ("b_v", dv), ("b_o", dY)):
        if key in doc:
            d[f"d_{key}"] = dx.sum(axis=(0, 1))
    d_leaves = {"d_X", "d_context"}
    if not p.batched:  # the leaves X and context come without a batch axis
        d = {k: (v[0] if k in d_leaves else v) for k, v in d.items()}
    return f, d


def disagreement(name, label, ours, want, keys):
    """The largest |ours − want| / max(1, |want|) over keys (the same -inf entries where there are any)."""
    worst = 0.0
    for key in keys:
        a = np.asarray(ours[key], dtype=np.float64)
        b = want[key].numpy()
        if a.shape != b.shape:
            raise AssertionError(f"{name}: {label}: {key} has shape {a.shape}, autograd {b.shape}")
        inf_a, inf_b = np.isneginf(a), np.isneginf(b)
        if not np.array_equal(inf_a, inf_b):
            raise AssertionError(f"{name}: {label}: {key} has -inf at other entries")
        a, b = np.where(inf_a, 0.0, a), np.where(inf_b, 0.0, b)
        err = float((np.abs(a - b) / np.maximum(1.0, np.abs(b))).max()) if a.size else 0.0
        if not err <= TOL:
            raise AssertionError(f"{name}: {label} and autograd disagree on {key} by {err:.3g}")
        worst = max(worst, err)
    return worst


# --------------------------------------------------------------------- check 2: central differences

def finite_differences(name, p, doc, dY, grads):
    """Central differences of L at the first, middle and last entry of every leaf, the sinks included."""
    worst = 0.0
    count = 0
    with torch.no_grad():
        base = {key: x.detach() for key, x in leaves_of(doc).items()}
        for key, x in base.items():
            for i in sorted({0, x.numel() // 2, x.numel() - 1}):
                t = dict(base)
                up, down = x.clone(), x.clone()
                up.view(-1)[i] += FD_STEP
                down.view(-1)[i] -= FD_STEP
                t[key] = up
                l_up = loss(p, t, dY).item()
                t[key] = down
                l_down = loss(p, t, dY).item()
                fd = (l_up - l_down) / (2 * FD_STEP)
                want = grads[f"d_{key}"].reshape(-1)[i].item()
                err = abs(fd - want) / max(1.0, abs(want))
                if not err <= FD_TOL:
                    raise AssertionError(f"{name}: central difference of d_{key} at {i}: {fd!r}, autograd {want!r}")
                worst = max(worst, err)
                count += 1
    return worst, count


# ----------------------------------------------------------------------------- check 3: invariants

def check_invariants(name, p, steps, grads, dY):
    for key, x in list(steps.items()) + list(grads.items()):
        bad = ~torch.isfinite(x)
        if key == "masked":
            bad &= p.allow.unsqueeze(1).expand_as(x)  # -inf is the mask's, elsewhere
        if bad.any():
            raise AssertionError(f"{name}: {key} is not finite")
    if not torch.equal(grads["d_output"], dY if p.batched else dY.unsqueeze(0)):
        raise AssertionError(f"{name}: d_output is not dY")
    B, h, n, m = p.B, p.h, p.n, p.m
    allow = p.allow.unsqueeze(1).expand(B, h, n, m)
    empty = p.empty.view(B, 1, n).expand(B, h, n)
    dm = grads["d_masked"]
    if dm[~allow].ne(0).any() or dm[empty].ne(0).any():
        raise AssertionError(f"{name}: d_masked is not 0 at masked entries and in empty rows")
    total = steps["weights"].sum(dim=-1) + (steps["sink_weights"] if p.sinks is not None else 0.0)
    want = torch.where(empty & torch.tensor(p.sinks is None), torch.tensor(0.0, dtype=DT), torch.tensor(1.0, dtype=DT))
    if not (total - want).abs().max() <= ROW_SUM_TOL:
        raise AssertionError(f"{name}: a row of weights (and its sink share) does not sum to 1")
    if p.sinks is not None:
        a_empty = steps["sink_weights"][empty]
        if not torch.equal(a_empty, torch.ones_like(a_empty)) or steps["weights"][empty].ne(0).any():
            raise AssertionError(f"{name}: an empty row does not put all its weight on the sink")
    if p.keep is not None and p.p_drop == 0:
        if not torch.equal(p.keep, torch.ones_like(p.keep)):
            raise AssertionError(f"{name}: p = 0 and the keep mask drops an entry")
        if not torch.equal(steps["dropped"], steps["weights"]):
            raise AssertionError(f"{name}: p = 0 and dropped is not weights")


def check_against_make_backward(name, doc, dY, grads):
    """p = 0: make_backward.py's autograd on the input without "dropout" gives every one of its gradients."""
    plain = {k: v for k, v in doc.items() if k != "dropout"}
    pb = make_backward.Problem(plain)
    theirs, _ = make_backward.autograd(pb, plain, dY)
    worst = 0.0
    for key, want in theirs.items():
        ours = grads[key] if key in BATCH_FREE or key in ("d_X", "d_context") or pb.batched else grads[key][0]
        err = float(((ours - want).abs() / want.abs().clamp(min=1.0)).max())
        if not err <= TOL:
            raise AssertionError(f"{name}: make_backward.py's autograd differs on {key} by {err:.3g}")
        worst = max(worst, err)
    return worst


def check_underflowed_sinks(name, p, doc, steps):
    """A head whose sink share is exactly 0 everywhere has the weights of the input without sinks."""
    heads = [hd for hd in range(p.h) if steps["sink_weights"][:, hd].eq(0).all()]
    if not heads:
        return None
    plain = {k: v for k, v in doc.items() if k != "sinks"}
    with torch.no_grad():
        pp = Problem(plain)
        other = forward(pp, {k: x.detach() for k, x in leaves_of(plain).items()})["weights"]
    err = float((steps["weights"][:, heads] - other[:, heads]).abs().max())
    if not err <= TOL:
        raise AssertionError(f"{name}: heads {heads} with a sink share of 0 differ from no sinks by {err:.3g}")
    return heads, err


# ---------------------------------------------------------------------------------- one case

def to_json(x):
    """Nested lists; -inf as the string "-inf" (the trace's convention), -0.0 as 0.0."""
    if isinstance(x, list):
        return [to_json(v) for v in x]
    if x == -math.inf:
        return "-inf"
    return x + 0.0


def extras_case(name, what, doc, seed, how_extra=""):
    p = Problem(doc)
    dY = make_backward.draw_dY(p, seed)
    inp = dict(doc)
    inp["dY"] = dY.tolist()
    steps, grads = autograd(p, doc, dY)
    check_invariants(name, p, steps, grads, dY)

    np_fwd, np_grads = numpy_pass(p, doc, dY)
    if set(np_fwd) != set(steps) or set(np_grads) != set(grads):
        raise AssertionError(f"{name}: the NumPy pass has steps {sorted(set(np_fwd) ^ set(steps))} "
                             f"and gradients {sorted(set(np_grads) ^ set(grads))} that autograd has not, or back")
    fwd_err = disagreement(name, "the NumPy forward", np_fwd, steps, list(steps))
    grad_err = disagreement(name, "the NumPy backward", np_grads, grads, list(grads))
    checks = [f"a NumPy forward and backward written out by hand give every forward step to {fwd_err:.1e} "
              f"and every gradient to {grad_err:.1e}"]
    allowed = p.allow.unsqueeze(1).expand_as(steps["scaled"])
    max_logit = max(float(steps["scaled"][allowed].abs().max()), float(steps["masked"][allowed].abs().max()))
    fd_err = None
    if max_logit < 100:
        fd_err, fd_count = finite_differences(name, p, doc, dY, grads)
        checks.append(f"central differences (step {FD_STEP:g}) on {fd_count} entries of the leaves"
                      f"{', the sinks included,' if p.sinks is not None else ''} agree to {fd_err:.1e}")
    else:
        checks.append(f"no central differences: the largest |logit| is {max_logit:.4g}, 100 or more")
    mb_err = None
    if p.keep is not None and p.p_drop == 0:
        mb_err = check_against_make_backward(name, doc, dY, grads)
        checks.append(f"with p = 0 dropped equals weights exactly and make_backward.py's autograd on the input "
                      f"without dropout gives every gradient to {mb_err:.1e}")
    if p.sinks is not None:
        under = check_underflowed_sinks(name, p, doc, steps)
        if under is not None:
            checks.append(f"head{'s' if len(under[0]) > 1 else ''} {', '.join(map(str, under[0]))}, whose sink "
                          f"share underflows to 0, ha{'ve' if len(under[0]) > 1 else 's'} the weights of the input "
                          f"without sinks to {under[1]:.1e}")

    biases = [key for key in ("b_q", "b_k", "b_v", "b_o") if key in doc]
    how = ("torch autograd in float64 (one thread, deterministic) on leaves that hold the file's tensors in its "
           "own layout and shapes (requires_grad), the sinks a leaf of their own: "
           + ("q = X·W_q, k = C·W_k, v = C·W_v with C the context" if p.cross else "q = X·W_q, k = X·W_k, v = X·W_v")
           + (f" (+ {', '.join(biases)})" if biases else "")
           + f", split into {p.h} query head{'s' if p.h > 1 else ''}"
           + (f" and {p.g} kv head{'s' if p.g > 1 else ''} (query head hd reads kv head hd // {p.h // p.g})"
              if p.g != p.h else "")
           + (f", RoPE ({p.style}, theta {p.theta:g}, dims {p.dims}) on the heads" if p.rope is not None else "")
           + f", S = Q·Kᵀ, S' = S·scale (scale = {p.scale!r}{', given' if 'scale' in doc else ', 1/sqrt(d_k)'})"
           + (f", capped = {p.softcap!r}·tanh(S'/{p.softcap!r})" if p.softcap is not None else "")
           + (", + the ALiBi bias" + (" (after the cap)" if p.softcap is not None else "")
              if p.slopes is not None else "")
           + ", masked by torch.where(-inf)"
           + (", torch.softmax over each row with its head's sink logit as one more column (torch.cat), weights "
              "the key columns and sink_weights the sink's" if p.sinks is not None else ", torch.softmax")
           + (f", dropped = weights * Z * (1/(1 - {p.p_drop!r})) with Z the keep mask of Philox4x32-10 (seed "
              f"{p.seed}, counter (j, i, hd, b), keep iff x0 >= {threshold(p.p_drop)}; {int(p.keep.sum())} of "
              f"{p.keep.numel()} entries kept)" if p.keep is not None else "")
           + (", dropped·V" if p.keep is not None else ", weights·V") + ", concat"
           + (", Y = O·W_o" + (" + b_o" if "b_o" in doc else "") if p.has_wo else ", Y = O (no W_o)")
           + f"; retain_grad() on every step; L = Σ Y ⊙ dY, dY = torch.randn(generator seeded {seed}, float64)")
    if p.empty.any():
        rows = make_backward.describe_empty(p)
        how += (f". Rows with nothing to attend ({rows}): " +
                ("the sink takes all their weight (sink_weights 1, weights and head output 0), and their score "
                 "gradients are 0" if p.sinks is not None else
                 "their scores are replaced by 0 before the softmax and their weights multiplied by 0 (the zero "
                 "policy), so their score gradients are 0"))
    how += how_extra + ". Checks: " + "; ".join(checks) + " (relative to max(1, |value|))"

    def sq(key, x):  # a single sequence drops the batch axis; the leaves' gradients are in their own shapes
        if p.batched or key in BATCH_FREE or key in ("d_X", "d_context"):
            return x
        return x[0]

    expected = {}
    for key in FORWARD:
        if key in steps:
            expected[key] = to_json(sq(key, steps[key]).tolist())
    for key in GRADIENTS:
        if key in grads:
            expected[key] = to_json(sq(key, grads[key]).tolist())
    if set(expected) != set(steps) | set(grads):
        raise AssertionError(f"{name}: steps outside the order: {sorted(set(steps) | set(grads) - set(expected))}")
    out = {"name": name, "what": what, "how": how, "dY_seed": seed, "input": inp, "expected": expected}
    if p.keep is not None:
        out["keep_mask"] = p.keep.to(torch.int64).tolist()
    stats = {"fwd": fwd_err, "grad": grad_err, "fd": fd_err, "make_backward": mb_err, "max_logit": max_logit,
             "max_abs": max(float(v.abs().max()) for v in grads.values())}
    return out, stats, p, steps, grads


# ------------------------------------------------------------------------------------------- the cases

def drawn(input_seed, gains=None, **kw):
    """An input drawn by make_golden.make_case (its torch.Generator, layout, biases and masks), without its
    expected values; gains multiplies whole weights (e.g. {"W_q": 4}) for larger logits."""
    doc = make_golden.make_case("drawn", "", input_seed, **kw)["input"]
    for key, factor in (gains or {}).items():
        doc[key] = (torch.tensor(doc[key], dtype=DT) * factor).tolist()
    return doc


def with_keys(doc, **keys):
    out = dict(doc)
    out.update(keys)
    return out


FACTS = {}  # name -> a sentence the case's golden must bear out, checked in main


def cases():
    C = []

    def add(name, what, seed, doc, extra=""):
        C.append((name, what, doc, seed, extra))

    # -- soft-capping
    add("softcap_50_modest", "softcap 50, Gemma 2's value, on modest logits (|S'| up to 4.8): capped stays within "
        "0.015 of S'; two heads, W_o.", 9301,
        with_keys(drawn(7301, gains={"W_q": 4, "W_k": 4}, n=5, d_model=6, h=2), softcap=50))
    add("softcap_2_saturated", "softcap 2 on large logits (scale 1, |S'| up to 60.8): 42 of 72 scores have "
        "|S'| > 10, where tanh saturates and d_scaled nearly vanishes; 5 are capped to exactly ±2 (tanh rounds "
        "to ±1) and have d_scaled 0; two heads.", 9302,
        with_keys(drawn(7302, gains={"W_q": 6, "W_k": 6}, n=6, d_model=4, h=2, d_k=2, d_v=2, scale=1.0,
                        x_range=2.0), softcap=2))
    add("softcap_causal", "softcap 5, causal, two heads of width 4 with W_q scaled up so that the cap bends the "
        "larger scores.", 9303,
        with_keys(drawn(7303, gains={"W_q": 3, "W_k": 3}, n=6, d_model=8, h=2, mask="causal"), softcap=5))
    add("softcap_alibi", "softcap 3 then ALiBi with explicit slopes [1, -0.75], no mask: the bias comes after "
        "the cap, so masked goes beyond ±3.", 9304,
        with_keys(drawn(7304, gains={"W_q": 3, "W_k": 3}, n=5, d_model=4, h=2), softcap=3, alibi=[1.0, -0.75]))
    FACTS["softcap_alibi"] = "masked beyond the cap"
    add("softcap_gqa_batch", "softcap 4 on a batch of 2, GQA 4 query heads over 2 kv heads, causal, biases.", 9305,
        with_keys(drawn(7305, gains={"W_q": 3}, B=2, n=5, d_model=8, h=4, g=2, d_k=2, d_v=2, biases=True,
                        mask="causal"), softcap=4))
    add("softcap_out_in_biases", "softcap 1.5 with weights out_in (as nn.Linear stores them), all four biases, W_o "
        "to a width of 5, d_v 3.", 9306,
        with_keys(drawn(7306, gains={"W_q": 2, "W_k": 2}, n=5, d_model=6, h=2, d_k=3, d_v=3, d_out=5,
                        biases=True, layout="out_in"), softcap=1.5))

    # -- attention sinks
    add("sinks_alone", "A sink logit per head, [0.5, -1], no mask: every row gives the sink a share and the "
        "key weights sum to less than 1.", 9311,
        with_keys(drawn(7311, n=5, d_model=4, h=2), sinks=[0.5, -1.0]))
    add("sinks_causal", "Sinks [1, 0, -0.5, 2] on four heads, causal: the first row shares its weight between its "
        "one key and the sink.", 9312,
        with_keys(drawn(7312, n=6, d_model=8, h=4, biases=True, mask="causal"), sinks=[1.0, 0.0, -0.5, 2.0]))
    add("sinks_empty_row", "Sinks with a custom mask whose row 2 is all false: that row puts all its weight on the "
        "sink (sink_weights 1, weights and head output 0, output b_o).", 9313,
        with_keys(drawn(7313, n=6, d_model=4, h=2, biases=True, layout="out_in",
                        mask=make_golden.custom_mask(empty_row=2)), sinks=[0.3, -0.7]))
    FACTS["sinks_empty_row"] = "an empty row"
    add("sinks_gqa_cross", "Sinks on cross-attention: 4 queries read 6 keys of a context of width 5, GQA 4/2, "
        "biases, d_v 3.", 9314,
        with_keys(drawn(7314, n=4, m=6, d_model=6, d_context=5, h=4, g=2, d_k=2, d_v=3, biases=True),
                  sinks=[-0.25, 1.5, 0.75, -2.0]))
    add("sinks_large", "Very large sinks, [12, 30]: nearly all the weight on the sink (key weights at most 6.3e-6 "
        "and 1.3e-13), tiny but exact gradients.", 9315,
        with_keys(drawn(7315, n=5, d_model=4, h=2, biases=True), sinks=[12.0, 30.0]))
    FACTS["sinks_large"] = "sink shares near 1"
    add("sinks_very_negative", "Very negative sinks, [-20, -1000]: head 0 gives the sink about 1e-9, head 1's "
        "share underflows to 0, so its weights are those without a sink and its d_sinks is 0.", 9316,
        with_keys(drawn(7316, n=5, d_model=4, h=2, mask="causal"), sinks=[-20.0, -1000.0]))
    FACTS["sinks_very_negative"] = "an underflowed sink"

    # -- dropout
    add("dropout_module_p01", "Dropout p = 0.1, seed 42, on a complete module: d_model 8, 2 heads, W_o and all "
        "biases, weights out_in.", 9321,
        with_keys(drawn(7321, n=6, d_model=8, h=2, biases=True, layout="out_in"), dropout={"p": 0.1, "seed": 42}))
    add("dropout_p05_causal", "Dropout p = 0.5 (kept weights doubled), causal, two heads.", 9322,
        with_keys(drawn(7322, n=6, d_model=4, h=2, mask="causal"), dropout={"p": 0.5, "seed": 7}))
    add("dropout_gqa_batch", "Dropout p = 0.3 on a batch of 2 with GQA 4/2: the counter's b and hd words pick "
        "each item's and head's mask; the seed, 2^32 + 5, has a nonzero high word.", 9323,
        with_keys(drawn(7323, B=2, n=4, d_model=8, h=4, g=2, d_k=2, d_v=2, biases=True),
                  dropout={"p": 0.3, "seed": 2 ** 32 + 5}))
    FACTS["dropout_gqa_batch"] = "masks differ across b and hd"
    add("dropout_p0", "Dropout p = 0: the keep mask is all ones, dropped equals weights and every gradient is "
        "make_backward.py's.", 9324,
        with_keys(drawn(7324, n=5, d_model=6, h=3, biases=True, mask="causal"), dropout={"p": 0.0, "seed": 3}))
    add("dropout_rope", "Dropout p = 0.25 with RoPE (half style, theta 100), two heads, causal; the seed "
        "12345678901234567890 is above 2^63.", 9325,
        with_keys(drawn(7325, n=6, d_model=8, h=2, d_k=4, mask="causal"), rope={"theta": 100},
                  dropout={"p": 0.25, "seed": 12345678901234567890}))

    # -- together
    add("softcap_sinks_dropout_causal_batch", "softcap 4, sinks and dropout p = 0.2 together on a batch of 2, "
        "causal, GQA 4/2, W_o and biases.", 9331,
        with_keys(drawn(7331, gains={"W_q": 3, "W_k": 2}, B=2, n=5, d_model=8, h=4, g=2, d_k=2, d_v=2, biases=True,
                        mask="causal"), softcap=4, sinks=[0.5, -0.5, 1.0, 0.0], dropout={"p": 0.2, "seed": 2024}))
    add("everything_cross_batch", "Every key at once: softcap 2.5, ALiBi, RoPE, sinks and dropout p = 0.4 on "
        "batched cross-attention (3 queries, 5 keys), GQA 2/1, a custom mask per item that empties item 1's row 0.",
        9332,
        with_keys(drawn(7332, gains={"W_q": 3}, B=2, n=3, m=5, d_model=4, d_context=6, h=2, g=1, d_k=4, d_v=2,
                        biases=True, layout="out_in",
                        mask=make_golden.custom_mask(per_item=True, empty_item_row=(1, 0))),
                  softcap=2.5, rope={"theta": 50, "positions": [2, 3, 4], "context_positions": [0, 1, 2, 3, 4]},
                  alibi=True, sinks=[0.25, -0.5], dropout={"p": 0.4, "seed": 99}))
    FACTS["everything_cross_batch"] = "an empty row"
    cat = json.loads((DATA_DIR / "the_cat_sat.json").read_text(encoding="utf-8"))
    add("the_cat_sat_softcap_50", "data/the_cat_sat.json with softcap 50: the scaled scores (at most 2.83) move by "
        "at most 3.0e-3 under the cap.", 9333, with_keys(cat, softcap=50))
    return C


def check_fact(name, fact, p, steps):
    """What the case's "what" promises, shown by its numbers."""
    if fact == "masked beyond the cap":
        allow = p.allow.unsqueeze(1).expand_as(steps["masked"])
        if not (float(steps["capped"].abs().max()) < p.softcap < float(steps["masked"][allow].abs().max())):
            raise AssertionError(f"{name}: masked does not go beyond the cap")
    elif fact == "an empty row":
        if not p.empty.any():
            raise AssertionError(f"{name}: no row is empty")
    elif fact == "sink shares near 1":
        if not float(steps["sink_weights"].min()) > 0.999:
            raise AssertionError(f"{name}: a sink share is not near 1")
    elif fact == "an underflowed sink":
        if not steps["sink_weights"][:, 1].eq(0).all():
            raise AssertionError(f"{name}: head 1's sink share does not underflow")
    elif fact == "masks differ across b and hd":
        Z = p.keep
        if torch.equal(Z[0], Z[1]) or any(torch.equal(Z[:, a], Z[:, b]) for a in range(p.h) for b in range(a)):
            raise AssertionError(f"{name}: two items or two heads have the same keep mask")
    else:
        raise ValueError(fact)


def main():
    check_philox()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    all_cases = cases()
    names = [c[0] for c in all_cases]
    if len(set(names)) != len(names):
        sys.exit("make_extras.py: two cases share a name")
    seeds = [c[3] for c in all_cases]
    if len(set(seeds)) != len(seeds) or set(seeds) & set(make_backward.SEEDS.values()):
        sys.exit("make_extras.py: a dY seed is used twice (here or in make_backward.py)")
    written = set()
    summary = []
    for name, what, doc, seed, extra in all_cases:
        golden, stats, p, steps, grads = extras_case(name, what, doc, seed, extra)
        if name in FACTS:
            check_fact(name, FACTS[name], p, steps)
        if p.keep is not None and p.p_drop > 0 and bool(p.keep.all()):
            raise AssertionError(f"{name}: dropout p = {p.p_drop} drops nothing")
        path = OUT_DIR / f"{name}.json"
        path.write_text(make_golden.to_text(golden) + "\n", encoding="utf-8")
        written.add(path.name)
        summary.append((name, stats))
    for stale in OUT_DIR.glob("*.json"):
        if stale.name not in written:
            stale.unlink()

    def worst(key):
        vals = [s[key] for _, s in summary if s[key] is not None]
        return max(vals), len(vals)

    print(f"Philox4x32-10: Random123's {len(PHILOX_KATS)} known-answer vectors")
    print(f"wrote {len(summary)} cases to {OUT_DIR}")
    for label, key in (("NumPy forward", "fwd"), ("NumPy backward", "grad"), ("central differences", "fd"),
                       ("make_backward.py at p = 0", "make_backward")):
        w, count = worst(key)
        print(f"{label}: {count} cases, largest disagreement {w:.2e}")
    big = max(summary, key=lambda c: c[1]["max_abs"])
    print(f"largest |gradient|: {big[1]['max_abs']!r} ({big[0]}); largest |logit|: "
          f"{max(s['max_logit'] for _, s in summary):.4g}")


if __name__ == "__main__":
    main()
