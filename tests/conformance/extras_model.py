"""The forward of backward_model.py in torch with the three keys of make_extras.py, and its autograd:
"softcap" (capped = c·tanh(S'/c) right after scaled, before ALiBi's bias and the mask), "sinks" (one more
column in every row's softmax, a leaf of its own) and "dropout" (the weights times philox.py's keep mask and
1/(1−p)). Without the three keys every step is backward_model.forward's.
"""

import math
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import backward_model  # noqa: E402  (Problem, leaves_of, rope_tables, LEAVES; it also sets one thread, deterministic)
from philox import keep_mask  # noqa: E402  (the keep mask of "dropout")

DT = torch.float64
LEAVES = backward_model.LEAVES + ("sinks",)


# ------------------------------------------------------------------------------------------ the problem

class Problem(backward_model.Problem):
    """backward_model.py's problem, with the three new keys."""

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
    t = backward_model.leaves_of(doc)
    if "sinks" in doc:
        t["sinks"] = torch.tensor(doc["sinks"], dtype=DT, requires_grad=True)
    return t


# ------------------------------------------------------------------------------- the forward, in torch

def forward(p, t):
    """Every step of the forward pass from the leaves t, each with a batch axis (1 for one sequence).
    Without the new keys this is backward_model.forward step for step."""
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
        cq, sq_, perm = backward_model.rope_tables(p, p.pos_q)
        ck, sk, _ = backward_model.rope_tables(p, p.pos_k)
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
    else:  # backward_model.py's zero policy: a row without a key gets 0 scores, then 0 weights
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
