#!/usr/bin/python3
"""Writes the gradient cases of `attn-trace diff` (docs/diff.md, "Gradient dumps"): an input, and dumps of
the backward pass's gradients computed by PyTorch, correct and with one classic backward bug planted.

    /usr/bin/python3 tests/diff/make_gradient_dumps.py

(Debian's Python, which has python3-torch and python3-numpy.)

It rewrites tests/data/diff_backward/: `input.json` (grouped-query attention, 4 query heads sharing 2
key/value heads, causal, nn.Linear's out_in layout with biases), one folder per case of `.npy` files in
float32, and the manifest `cases.json` (exit code, first diverging step, diagnosis) that
tests/cli/diff_test.cpp checks.

The correct case is PyTorch's autograd: every intermediate tensor keeps its gradient (`retain_grad`) and
is saved under its step name or a PyTorch-style name that diff knows (`grad_q`, `dx`,
`q_proj.weight.grad`, ...). A planted case is a backward written out by hand below, in float32, with one
mistake; the script first checks that the same hand-written backward without a mistake agrees with
autograd, so each planted case differs from the truth by its mistake alone. Every number comes from a
torch.Generator with a fixed seed and one thread, so running the script twice writes identical files.
"""

import json
import math
import pathlib
import shutil

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "diff_backward"

torch.set_num_threads(1)
gen = torch.Generator().manual_seed(22)

n, d_model, h, g, d_k, d_v = 4, 6, 4, 2, 2, 2
d_out = 4
group = h // g
scale = 1 / math.sqrt(d_k)


def rand(*shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64).mul(0.8).round(decimals=2)


X = rand(n, d_model)
W_q, W_k, W_v, W_o = rand(h * d_k, d_model), rand(g * d_k, d_model), rand(g * d_v, d_model), rand(d_out, h * d_v)
b_q, b_o = rand(h * d_k), rand(d_out)
dY = rand(n, d_out)
allowed = torch.ones(n, n).tril().bool()


def forward(dt, keep):
    """Attention with nn.Linear's layout; every intermediate kept (with its gradient when `keep`)."""
    t = {}
    x = X.to(dt).clone().requires_grad_(keep)
    params = {name: w.to(dt).clone().requires_grad_(keep)
              for name, w in [("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o), ("b_q", b_q), ("b_o", b_o)]}
    t["x"] = x
    t.update(params)
    q = x @ params["W_q"].T + params["b_q"]
    k = x @ params["W_k"].T
    v = x @ params["W_v"].T
    q_h = q.view(n, h, d_k).transpose(0, 1)
    k_h = k.view(n, g, d_k).transpose(0, 1)
    v_h = v.view(n, g, d_v).transpose(0, 1)
    S = q_h @ k_h.repeat_interleave(group, 0).transpose(-1, -2)
    S1 = S * scale
    S2 = S1.masked_fill(~allowed, float("-inf"))
    A = torch.softmax(S2, dim=-1)
    O_h = A @ v_h.repeat_interleave(group, 0)
    O = O_h.transpose(0, 1).reshape(n, h * d_v)
    Y = O @ params["W_o"].T + params["b_o"]
    for name, value in [("q", q), ("k", k), ("v", v), ("q_heads", q_h), ("k_heads", k_h), ("v_heads", v_h),
                        ("scores", S), ("scaled", S1), ("masked", S2), ("weights", A), ("head_outputs", O_h),
                        ("concat", O), ("output", Y)]:
        if keep:
            value.retain_grad()
        t[name] = value
    return t


def autograd_gradients():
    t = forward(torch.float32, True)
    t["output"].backward(dY.to(torch.float32))
    grads = {"d_output": dY.to(torch.float32)}
    for step in ["weights", "masked", "scaled", "scores", "q_heads", "k_heads", "v_heads", "q", "k", "v",
                 "head_outputs", "concat"]:
        grads["d_" + step] = t[step].grad
    grads["d_X"] = t["x"].grad
    for name in ["W_q", "W_k", "W_v", "W_o", "b_q", "b_o"]:
        grads["d_" + name] = t[name].grad
    return grads


def swap(t):
    return t.transpose(-1, -2)


def key_head_sum(dS, Q, mistake):
    """dK = Σ over the group of dSᵀ·Q (dV likewise), or one query head of each group."""
    parts = swap(dS) @ Q  # (h, m, d)
    if mistake == "gqa-first-head":
        return parts[0::group].clone()
    return parts.view(g, group, n, -1).sum(1)


def hand_backward(mistake=None):
    """The backward pass written out, in float32, with one mistake (or none)."""
    with torch.no_grad():
        t = forward(torch.float32, False)
        f = torch.float32
        A, Q, K, V = t["weights"], t["q_heads"], t["k_heads"], t["v_heads"]
        Kr, Vr = K.repeat_interleave(group, 0), V.repeat_interleave(group, 0)
        gr = {"d_output": dY.to(f)}
        dO = gr["d_output"] @ W_o.to(f)
        dO_h = dO.view(n, h, d_v).transpose(0, 1)
        dA = dO_h @ swap(Vr)
        gr["d_weights"] = dA
        gr["d_v_heads"] = key_head_sum(A if mistake != "dv-untransposed" else swap(A), dO_h, mistake)
        if mistake == "softmax-d-from-da":
            D = dA.sum(-1, keepdim=True)
        elif mistake == "softmax-d-from-do":
            D = dO_h.sum(-1, keepdim=True)
        else:
            D = (dA * A).sum(-1, keepdim=True)
        dS2 = A * (dA - D)
        if mistake == "softmax-backward-columns":
            dS2 = A * (dA - (dA * A).sum(-2, keepdim=True))
        gr["d_masked"] = dS2
        dS1 = dS2.masked_fill(~allowed, 0.0)
        gr["d_scaled"] = dS1
        dS = dS1 if mistake == "backward-no-scale" else dS1 * scale
        gr["d_scores"] = dS
        gr["d_q_heads"] = dS @ Kr
        gr["d_k_heads"] = key_head_sum(dS if mistake != "dk-untransposed" else swap(dS), Q, mistake)
        dq = gr["d_q_heads"].transpose(0, 1).reshape(n, h * d_k)
        dk = gr["d_k_heads"].transpose(0, 1).reshape(n, g * d_k)
        dv = gr["d_v_heads"].transpose(0, 1).reshape(n, g * d_v)
        gr["d_q"], gr["d_k"], gr["d_v"] = dq, dk, dv
        x = X.to(f)
        gr["d_X"] = dq @ W_q.to(f) + dk @ W_k.to(f) + dv @ W_v.to(f)
        gr["d_W_q"], gr["d_W_k"], gr["d_W_v"] = dq.T @ x, dk.T @ x, dv.T @ x
        gr["d_W_o"] = gr["d_output"].T @ t["concat"]
        gr["d_b_q"], gr["d_b_o"] = dq.sum(0), gr["d_output"].sum(0)
        return gr


# Under which name each case saves a gradient: the step names, and some PyTorch-style aliases.
ALIAS = {"d_q": "grad_q", "d_k": "k.grad", "d_v": "dv", "d_X": "dx", "d_W_q": "q_proj.weight.grad",
         "d_W_o": "out_proj.weight.grad", "d_b_q": "q_proj.bias.grad", "d_output": "grad_output"}

ALL = ["d_output", "d_weights", "d_v_heads", "d_masked", "d_scaled", "d_scores", "d_q_heads", "d_k_heads",
       "d_q", "d_k", "d_v", "d_X", "d_W_q", "d_W_k", "d_W_v", "d_W_o", "d_b_q", "d_b_o"]
LEAVES = ["d_output", "d_q", "d_k", "d_v", "d_X", "d_W_q", "d_W_o"]

# name, mistake, dumped gradients, exit code, first step, diagnosis, why
CASES = [
    ("correct", None, ALL, 0, None, [], "autograd's own gradients, every one dumped"),
    ("correct-leaves", None, LEAVES, 0, None, [], "autograd's gradients of q, k, v, X and two weights only"),
    ("gqa-first-head", "gqa-first-head", ALL, 1, "d_v_heads", ["gqa-sum"],
     "dK and dV from the first query head of each group only"),
    ("backward-no-scale", "backward-no-scale", ALL, 1, "d_scores", ["scale"], "dS = dS', the scale left out"),
    ("backward-no-scale-leaves", "backward-no-scale", LEAVES, 1, "d_q", ["scale"],
     "the scale left out, only the leaves' gradients dumped: d_q is the first dumped gradient it reaches"),
    ("softmax-d-from-da", "softmax-d-from-da", ALL, 1, "d_masked", ["softmax-backward"], "D = rowsum(dA)"),
    ("softmax-d-from-do", "softmax-d-from-do", ALL, 1, "d_masked", ["softmax-backward"], "D = rowsum(dO)"),
    ("softmax-backward-columns", "softmax-backward-columns", ALL, 1, "d_masked", ["softmax-axis"],
     "the softmax's backward down the columns"),
    ("dv-untransposed", "dv-untransposed", ALL, 1, "d_v_heads", ["transpose"], "dV = A·dO"),
    ("dk-untransposed", "dk-untransposed", ALL, 1, "d_k_heads", ["transpose"], "dK = dS·Q"),
]


def save(folder, grads, steps):
    folder.mkdir(parents=True)
    for s in steps:
        value = grads[s].detach().to(torch.float32).numpy()
        if s in ("d_q_heads",):
            value = value.transpose(1, 0, 2)  # tokens first: (n, h, d), as code before its transpose has it
        np.save(folder / (ALIAS.get(s, s) + ".npy"), np.ascontiguousarray(value.astype("<f4")))


def main():
    truth = autograd_gradients()
    plain = hand_backward()
    for s in ALL:
        a, b = truth[s].double(), plain[s].double()
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5), (s, (a - b).abs().max())
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    problem = {
        "description": "GQA (4 query heads, 2 key/value heads), causal, nn.Linear's layout: the gradient cases",
        "tokens": ["a", "b", "c", "d"], "n_heads": h, "n_kv_heads": g, "mask": "causal", "layout": "out_in",
        "X": X.tolist(), "W_q": W_q.tolist(), "W_k": W_k.tolist(), "W_v": W_v.tolist(), "W_o": W_o.tolist(),
        "b_q": b_q.tolist(), "b_o": b_o.tolist(),
    }
    (OUT / "input.json").write_text(json.dumps(problem, indent=1) + "\n")
    manifest = []
    for name, mistake, steps, code, first, diagnosis, why in CASES:
        grads = truth if mistake is None else hand_backward(mistake)
        if mistake is not None:
            assert not torch.allclose(grads[first].double(), truth[first].double(), atol=1e-4), name
        save(OUT / name, grads, steps)
        manifest.append({"name": name, "input": "input.json", "dumps": name, "args": [], "exit": code,
                         "first_step": first, "diagnosis": diagnosis, "why": why})
    (OUT / "cases.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(manifest)} cases in {OUT}")


main()
