#!/usr/bin/python3
"""The gradient example of docs/diff.md: a backward pass of grouped-query attention written out by hand in
PyTorch, checked against autograd, with two classic bugs planted, each dump saved for `attn-trace diff`.

    python3 docs/examples/diff_gradients.py OUT

reads data/gqa.json (4 query heads sharing 2 key/value heads, causal), and writes under OUT one folder of
float32 `.npy` files per case, named as PyTorch code names them (`grad_output`, `grad_q`, `k.grad`, `dv`,
`dx`, `W_q.grad`) or by step (`d_weights`, `d_v_heads`, `d_masked`, `d_scores`, `d_k_heads`):

    correct     autograd's gradients
    no-scale    dS = dS': the scale 1/√d_k left out of the backward
    gqa-sum     dK and dV taken from the first query head of each group only
"""

import json
import math
import pathlib
import sys

import numpy as np
import torch

torch.set_num_threads(1)
ROOT = pathlib.Path(__file__).resolve().parents[2]
problem = json.loads((ROOT / "data" / "gqa.json").read_text())
X = torch.tensor(problem["X"], dtype=torch.float32)
W_q, W_k, W_v, W_o = (torch.tensor(problem[w], dtype=torch.float32) for w in ("W_q", "W_k", "W_v", "W_o"))
n, h, g = X.shape[0], problem["n_heads"], problem["n_kv_heads"]
d_k, d_v, group = W_q.shape[1] // h, W_v.shape[1] // g, h // g
scale = 1 / math.sqrt(d_k)
allowed = torch.ones(n, n).tril().bool()
dY = torch.randn(n, W_o.shape[1], generator=torch.Generator().manual_seed(1)).round(decimals=2)


def attention(x, w_q, w_k, w_v, w_o, keep):
    """The forward pass, in attn-trace's layout (Y = X·W); each intermediate keeps its gradient when asked."""
    q_h = (x @ w_q).view(n, h, d_k).transpose(0, 1)
    k_h = (x @ w_k).view(n, g, d_k).transpose(0, 1)
    v_h = (x @ w_v).view(n, g, d_v).transpose(0, 1)
    S = q_h @ k_h.repeat_interleave(group, 0).transpose(-1, -2)
    S2 = (S * scale).masked_fill(~allowed, float("-inf"))
    A = torch.softmax(S2, dim=-1)
    O = (A @ v_h.repeat_interleave(group, 0)).transpose(0, 1).reshape(n, h * d_v)
    parts = {"q_heads": q_h, "k_heads": k_h, "v_heads": v_h, "scores": S, "masked": S2, "weights": A, "concat": O}
    for t in parts.values():
        if keep:
            t.retain_grad()
    return O @ w_o, parts


def autograd():
    leaves = [t.clone().requires_grad_() for t in (X, W_q, W_k, W_v, W_o)]
    Y, t = attention(*leaves, keep=True)
    Y.backward(dY)
    q, k, v = (t[s].grad.transpose(0, 1).reshape(n, -1) for s in ("q_heads", "k_heads", "v_heads"))
    return {"grad_output": dY, "d_weights": t["weights"].grad, "d_v_heads": t["v_heads"].grad,
            "d_masked": t["masked"].grad, "d_scores": t["scores"].grad, "d_k_heads": t["k_heads"].grad,
            "grad_q": q, "k.grad": k, "dv": v, "dx": leaves[0].grad, "W_q.grad": leaves[1].grad}


def by_hand(bug):
    """The backward written out: dA = dO·Vᵀ, dV = Aᵀ·dO, dS'' = A ⊙ (dA − D), dS = scale·dS', dQ = dS·K,
    dK = dSᵀ·Q, the key/value heads' parts summed over their group; with one bug."""
    with torch.no_grad():
        _, t = attention(X, W_q, W_k, W_v, W_o, keep=False)
        A, Q, K, V = t["weights"], t["q_heads"], t["k_heads"], t["v_heads"]
        dO = (dY @ W_o.T).view(n, h, d_v).transpose(0, 1)
        dA = dO @ V.repeat_interleave(group, 0).transpose(-1, -2)

        def per_kv_head(parts):  # (h, m, d) -> (g, m, d)
            return parts[0::group] if bug == "gqa-sum" else parts.view(g, group, n, -1).sum(1)

        dV = per_kv_head(A.transpose(-1, -2) @ dO)
        dS2 = A * (dA - (dA * A).sum(-1, keepdim=True))
        dS = dS2.masked_fill(~allowed, 0.0) * (1.0 if bug == "no-scale" else scale)
        dQ = dS @ K.repeat_interleave(group, 0)
        dK = per_kv_head(dS.transpose(-1, -2) @ Q)
        q, k, v = (t.transpose(0, 1).reshape(n, -1) for t in (dQ, dK, dV))
        return {"grad_output": dY, "d_weights": dA, "d_v_heads": dV, "d_masked": dS2, "d_scores": dS,
                "d_k_heads": dK, "grad_q": q, "k.grad": k, "dv": v, "dx": q @ W_q.T + k @ W_k.T + v @ W_v.T,
                "W_q.grad": X.T @ q}


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "grads")
    truth, plain = autograd(), by_hand(None)
    for name, value in truth.items():  # the hand-written backward, without a bug, is autograd's
        assert torch.allclose(value, plain[name], atol=1e-5), name
    for case, grads in [("correct", truth), ("no-scale", by_hand("no-scale")), ("gqa-sum", by_hand("gqa-sum"))]:
        folder = out / case
        folder.mkdir(parents=True, exist_ok=True)
        for name, value in grads.items():
            np.save(folder / f"{name}.npy", value.detach().numpy().astype("<f4"))
        print(f"{case}: {folder}")


main()
