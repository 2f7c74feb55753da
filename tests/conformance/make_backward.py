#!/usr/bin/python3
"""Writes the backward goldens: attention inputs with an upstream gradient dY, and the gradients that PyTorch
autograd computes for them in float64.

Run it from anywhere with Debian's Python, which has python3-torch and python3-numpy:

    /usr/bin/python3 tests/conformance/make_backward.py

It rewrites tests/conformance/golden_backward/*.json and removes the files of cases that no longer exist.

The cases:
- every input of golden/*.json and golden_positions/*.json, under the same name, with "dY" added: a
  standard normal tensor of the output's shape from a torch.Generator with the case's own seed (SEEDS);
- large_logits_1e3 and large_logits_5e5: scale 1 and scores up to about 1e3 and 5e5, built from dyadic
  numbers so that every score is exact in float64 whatever the order of the sums, with near-duplicate keys
  so that some rows stay soft;
- the_cat_sat_ones: data/the_cat_sat.json as it is, without dY, so dY = 1 everywhere (L = ΣY).

The loss is L = Σ Y ⊙ dY. The forward pass is docs/input-format.md's, written with torch ops on leaves that
hold the file's own tensors (weights in the file's layout, X without a batch axis for a single sequence),
so the leaves' gradients come out in the file's shapes. Every step calls retain_grad().

Rows the mask leaves with nothing to attend follow the tool's policy (zero weights, zero head output):
their scores are replaced by 0 before the softmax and their weights multiplied by 0, so autograd sees no
NaN, d_weights there is dO·Vᵀ like any row, and d_masked, d_scaled and d_scores are 0.

Checks, each of which stops the script when it fails:
- the forward pass reproduces the source golden's expected steps to 1e-12;
- a NumPy backward written out by hand (dV = Aᵀ·dO, dA = dO·Vᵀ, the softmax's Jacobian, the rotation
  transposed, ...) gives every gradient key to 1e-12·max(1, |value|);
- torch.nn.MultiheadAttention's own autograd gives d_X, d_context and the weight and bias gradients to the
  same tolerance, wherever the module applies (h = g, d_k = d_v = d_model / h, the default scale, W_o of
  width d_model, all biases or none, no positions, no empty row);
- central differences (step 1e-5) on a few entries of every leaf agree to 1e-7·max(1, |value|), except where
  the largest |S'| is 100 or more (the large-logit cases): there the loss bends too sharply for a central
  difference to be that accurate;
- no NaN or infinity anywhere, d_output equals dY, d_scaled equals d_masked where allowed and is 0
  elsewhere, d_scores equals scale·d_scaled, masked entries and empty rows have zero score gradients.

The forward in torch and its autograd are backward_model.py's (make_extras.py builds on them too); the inputs
of the two large-logit cases come from large_logits.py.
"""

import json
import pathlib
import sys

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import backward_model  # noqa: E402  (Problem, autograd; leaves_of and loss for central differences)
import golden_common  # noqa: E402  (to_text; it also sets one thread, deterministic)
from large_logits import large_logits  # noqa: E402  (the inputs of large_logits_1e3 and large_logits_5e5)

DT = torch.float64
OUT_DIR = HERE / "golden_backward"
DATA_DIR = HERE.parent.parent / "data"
TOL = 1e-12      # autograd against the hand-written backward and against MultiheadAttention
FD_STEP = 1e-5
FD_TOL = 1e-7

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

# The seed of each case's dY. A new case takes a new seed; a source case without one stops the script.
SEEDS = {
    "batch_cross_gqa_window_bottom_right": 9001,
    "batch_mqa_causal_bottom_right": 9002,
    "batch_padding_shared": 9003,
    "causal_bottom_right_kv_cache": 9004,
    "causal_bottom_right_more_queries": 9005,
    "causal_top_left_more_queries": 9006,
    "cross_other_length_and_width": 9007,
    "custom_batch_empty_row_no_wo": 9008,
    "custom_scale": 9009,
    "custom_shared_batch": 9010,
    "dv_differs_from_dk": 9011,
    "gqa_four_heads_two_kv": 9012,
    "gqa_six_heads_three_kv_causal": 9013,
    "mask_none_explicit": 9014,
    "mha_batch_causal": 9015,
    "mha_batch_cross_padding": 9016,
    "mha_batch_custom_per_item": 9017,
    "mha_batch_padding": 9018,
    "mha_batch_padding_hides_item": 9019,
    "mha_causal_string": 9020,
    "mha_cross_causal_top_left": 9021,
    "mha_cross_kdim": 9022,
    "mha_cross_same_width": 9023,
    "mha_custom_empty_row": 9024,
    "mha_padding_single_sequence": 9025,
    "mha_self_four_heads": 9026,
    "mha_self_in_out_layout": 9027,
    "mha_self_no_bias": 9028,
    "mha_self_one_head": 9029,
    "mha_sliding_window": 9030,
    "mqa_one_kv_head": 9031,
    "scale_one_wide_inputs": 9032,
    "single_head_no_wo_in_out": 9033,
    "sliding_window_bottom_right": 9034,
    "sliding_window_one": 9035,
    "sliding_window_two": 9036,
    "some_biases_only": 9037,
    "the_cat_sat": 9038,
    "alibi_explicit_cross": 9101,
    "alibi_four_heads": 9102,
    "alibi_six_heads": 9103,
    "rope_alibi_batch": 9104,
    "rope_half": 9105,
    "rope_interleaved": 9106,
    "rope_kv_cache": 9107,
    "rope_partial_gqa": 9108,
    "rope_positions_offset": 9109,
    "large_logits_1e3": 9201,
    "large_logits_5e5": 9202,
}


# -------------------------------------------------------------------------------------- the invariants

def check_invariants(name, p, grads, dY):
    """The relations every backward must keep, exactly."""
    for key, g in grads.items():
        if not torch.isfinite(g).all():
            raise AssertionError(f"{name}: {key} is not finite")
    if not torch.equal(grads["d_output"], dY):
        raise AssertionError(f"{name}: d_output is not dY")

    def b(x):
        return x if p.batched else x.unsqueeze(0)

    allow = p.allow.unsqueeze(1).expand_as(b(grads["d_masked"]))
    masked, scaled, scores = b(grads["d_masked"]), b(grads["d_scaled"]), b(grads["d_scores"])
    if not torch.equal(scaled, torch.where(allow, masked, torch.zeros_like(masked))):
        raise AssertionError(f"{name}: d_scaled is not d_masked where allowed and 0 elsewhere")
    if not torch.equal(masked[~allow], torch.zeros_like(masked[~allow])):
        raise AssertionError(f"{name}: d_masked is not 0 at masked entries")
    if not torch.equal(scores, scaled * p.scale):
        raise AssertionError(f"{name}: d_scores is not scale · d_scaled")
    for x, label in ((masked, "d_masked"), (scaled, "d_scaled"), (scores, "d_scores")):
        if x.abs().sum(dim=(1, 3))[p.empty].ne(0).any():
            raise AssertionError(f"{name}: {label} is not 0 in an empty row")


# ------------------------------------------------------------------------- check 1: a NumPy backward

def numpy_backward(p, doc, dY):
    """The same gradients written out by hand with NumPy: the forward again, then each step transposed."""
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

    Wq, Wk, Wv = io("W_q"), io("W_k"), io("W_v")
    q, k, v = X @ Wq + bias("b_q"), C @ Wk + bias("b_k"), C @ Wv + bias("b_v")
    Qh = q.reshape(B, n, h, d_k).transpose(0, 2, 1, 3)
    Kh = k.reshape(B, m, g, d_k).transpose(0, 2, 1, 3)
    Vh = v.reshape(B, m, g, d_v).transpose(0, 2, 1, 3)

    def turn(x, pos, sign):  # RoPE by +angle (sign 1) or its transpose, the turn by -angle (sign -1)
        out = x.copy()
        pos = np.asarray(pos)  # (T,): along the token axis
        for a, b_, th in p.pairs():
            cs, sn = np.cos(pos * th), sign * np.sin(pos * th)
            out[..., a] = x[..., a] * cs - x[..., b_] * sn
            out[..., b_] = x[..., b_] * cs + x[..., a] * sn
        return out

    roped = p.rope is not None
    Qr = turn(Qh, p.pos_q, 1) if roped else Qh
    Kr = turn(Kh, p.pos_k, 1) if roped else Kh
    Krep, Vrep = np.repeat(Kr, rep, axis=1), np.repeat(Vh, rep, axis=1)
    S1 = (Qr @ Krep.transpose(0, 1, 3, 2)) * p.scale
    if p.slopes is not None:
        dist = np.asarray(p.pos_q)[:, None] - np.asarray(p.pos_k)[None, :]
        S1 = S1 - np.asarray(p.slopes)[None, :, None, None] * dist[None, None]
    allow = p.allow.numpy()[:, None]  # (B, 1, n, m)
    any_ = allow.any(axis=-1, keepdims=True)
    top = np.where(any_, np.where(allow, S1, -np.inf).max(axis=-1, keepdims=True), 0.0)
    E = np.where(allow, np.exp(np.where(allow, S1 - top, 0.0)), 0.0)
    tot = E.sum(axis=-1, keepdims=True)
    A = np.where(any_, E / np.where(any_, tot, 1.0), 0.0)
    O = A @ Vrep
    concat = O.transpose(0, 2, 1, 3).reshape(B, n, h * d_v)

    out = {"d_output": dY}
    if p.has_wo:
        Wo = io("W_o")
        out["d_concat"] = dY @ Wo.T
        dWo = np.einsum("bni,bnj->ij", concat, dY)
        out["d_W_o"] = dWo.T if p.out_in else dWo
    else:
        out["d_concat"] = dY
    dO = out["d_concat"].reshape(B, n, h, d_v).transpose(0, 2, 1, 3)
    out["d_head_outputs"] = dO
    dA = dO @ Vrep.transpose(0, 1, 3, 2)
    out["d_weights"] = dA
    out["d_v_heads"] = (A.transpose(0, 1, 3, 2) @ dO).reshape(B, g, rep, m, d_v).sum(axis=2)
    dZ = A * (dA - (A * dA).sum(axis=-1, keepdims=True))  # the softmax's Jacobian; 0 where A is 0
    out["d_masked"] = dZ
    out["d_scaled"] = np.where(allow, dZ, 0.0)
    out["d_scores"] = out["d_scaled"] * p.scale
    dQr = out["d_scores"] @ Krep
    dKr = (out["d_scores"].transpose(0, 1, 3, 2) @ Qr).reshape(B, g, rep, m, d_k).sum(axis=2)
    if roped:
        out["d_q_rot"], out["d_k_rot"] = dQr, dKr
    out["d_q_heads"] = turn(dQr, p.pos_q, -1) if roped else dQr
    out["d_k_heads"] = turn(dKr, p.pos_k, -1) if roped else dKr
    dq = out["d_q_heads"].transpose(0, 2, 1, 3).reshape(B, n, h * d_k)
    dk = out["d_k_heads"].transpose(0, 2, 1, 3).reshape(B, m, g * d_k)
    dv = out["d_v_heads"].transpose(0, 2, 1, 3).reshape(B, m, g * d_v)
    out["d_q"], out["d_k"], out["d_v"] = dq, dk, dv
    dC = dk @ Wk.T + dv @ Wv.T
    out["d_X"] = dq @ Wq.T + (0.0 if p.cross else dC)
    if p.cross:
        out["d_context"] = dC
    for key, x, d in (("W_q", X, dq), ("W_k", C, dk), ("W_v", C, dv)):
        dW = np.einsum("bni,bnj->ij", x, d)
        out[f"d_{key}"] = dW.T if p.out_in else dW
    for key, d in (("b_q", dq), ("b_k", dk), ("b_v", dv), ("b_o", dY)):
        if key in doc:
            out[f"d_{key}"] = d.sum(axis=(0, 1))
    batch_free = {"d_W_q", "d_W_k", "d_W_v", "d_W_o", "d_b_q", "d_b_k", "d_b_v", "d_b_o"}
    return {k: (v if p.batched or k in batch_free else v[0]) for k, v in out.items()}


def disagreement(name, label, ours, want, keys):
    """The largest |ours − want| / max(1, |want|) over keys, with the same -inf entries where there are any
    (make_extras.py's masked step); stops the script beyond TOL."""
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


# ------------------------------------------------------------ check 2: torch.nn.MultiheadAttention

def mha_applies(p, doc):
    biases = [key in doc for key in ("b_q", "b_k", "b_v", "b_o")]
    return (p.h == p.g and p.d_k == p.d_v and p.h * p.d_k == p.d_model and p.has_wo and p.d_out == p.d_model
            and "scale" not in doc and (all(biases) or not any(biases)) and p.rope is None and p.slopes is None
            and not p.empty.any())


def mha_gradients(p, doc, dY):
    """d_X, d_context, the weights' and the biases' gradients from the module's own autograd (train mode,
    dropout 0: F.multi_head_attention_forward, as make_golden.py runs it)."""
    bias = "b_q" in doc
    kdim = p.d_context if p.cross and p.d_context != p.d_model else None
    torch.manual_seed(0)  # the module's own initialisation, overwritten below
    mha = torch.nn.MultiheadAttention(p.d_model, p.h, bias=bias, kdim=kdim, vdim=kdim, batch_first=True, dtype=DT)
    mha.train()

    def oi(key):  # PyTorch's out × in
        W = torch.tensor(doc[key], dtype=DT)
        return W if p.out_in else W.t()

    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            mha.in_proj_weight.copy_(torch.cat([oi("W_q"), oi("W_k"), oi("W_v")]))
        else:
            mha.q_proj_weight.copy_(oi("W_q"))
            mha.k_proj_weight.copy_(oi("W_k"))
            mha.v_proj_weight.copy_(oi("W_v"))
        mha.out_proj.weight.copy_(oi("W_o"))
        if bias:
            mha.in_proj_bias.copy_(torch.tensor(doc["b_q"] + doc["b_k"] + doc["b_v"], dtype=DT))
            mha.out_proj.bias.copy_(torch.tensor(doc["b_o"], dtype=DT))
    X = torch.tensor(doc["X"], dtype=DT, requires_grad=True)
    Xb = X if p.batched else X.unsqueeze(0)
    if p.cross:
        C = torch.tensor(doc["context"]["X"], dtype=DT, requires_grad=True)
        Cb = C if p.batched else C.unsqueeze(0)
    else:
        Cb = Xb
    mask = doc.get("mask")
    kind = mask if isinstance(mask, str) or mask is None else mask["type"]
    attn_mask = key_padding_mask = None
    if kind == "padding":
        key_padding_mask = ~torch.tensor(mask["keep"], dtype=torch.bool).view(-1, p.m).expand(p.B, p.m)
    elif kind == "custom" and torch.tensor(mask["allow"]).dim() == 3:
        attn_mask = ~p.allow.repeat_interleave(p.h, dim=0)  # (B·h, n, m), item-major
    elif kind not in (None, "none"):
        attn_mask = ~p.allow[0]
    Y, _ = mha(Xb, Cb, Cb, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=True,
               average_attn_weights=False)
    (Y * (dY if p.batched else dY.unsqueeze(0))).sum().backward()

    def file(dW):  # back to the file's layout
        return dW if p.out_in else dW.t()

    out = {"d_X": X.grad}
    if p.cross:
        out["d_context"] = C.grad
    if mha._qkv_same_embed_dim:
        dq, dk, dv = mha.in_proj_weight.grad.chunk(3)
    else:
        dq, dk, dv = mha.q_proj_weight.grad, mha.k_proj_weight.grad, mha.v_proj_weight.grad
    out.update({"d_W_q": file(dq), "d_W_k": file(dk), "d_W_v": file(dv), "d_W_o": file(mha.out_proj.weight.grad)})
    if bias:
        out["d_b_q"], out["d_b_k"], out["d_b_v"] = mha.in_proj_bias.grad.chunk(3)
        out["d_b_o"] = mha.out_proj.bias.grad
    return {k: v.detach().numpy() for k, v in out.items()}


# --------------------------------------------------------------------- check 3: central differences

def finite_differences(name, p, doc, dY, grads, model=backward_model):
    """Central differences of L at the first, middle and last entry of every leaf; model gives the leaves and
    the loss (make_extras.py passes its own, the sinks among the leaves)."""
    worst = 0.0
    count = 0
    with torch.no_grad():
        base = {key: x.detach() for key, x in model.leaves_of(doc).items()}
        for key, x in base.items():
            for i in sorted({0, x.numel() // 2, x.numel() - 1}):
                t = dict(base)
                up, down = x.clone(), x.clone()
                up.view(-1)[i] += FD_STEP
                down.view(-1)[i] -= FD_STEP
                t[key] = up
                l_up = model.loss(p, t, dY).item()
                t[key] = down
                l_down = model.loss(p, t, dY).item()
                fd = (l_up - l_down) / (2 * FD_STEP)
                want = grads[f"d_{key}"].reshape(-1)[i].item()
                err = abs(fd - want) / max(1.0, abs(want))
                if not err <= FD_TOL:
                    raise AssertionError(f"{name}: central difference of d_{key} at {i}: {fd!r}, autograd {want!r}")
                worst = max(worst, err)
                count += 1
    return worst, count


# ----------------------------------------------------------------- the forward against the source golden

def forward_check(name, p, steps, source):
    """The largest |ours - golden| / max(1, |golden|) over the source golden's expected steps."""
    worst = 0.0
    for key, want in source["expected"].items():
        ours = steps[key].numpy()
        want = np.asarray(want, dtype=np.float64)
        if want.ndim == ours.ndim - 1:  # golden/ drops the batch axis of a single sequence
            ours = ours[0]
        err = float((np.abs(ours - want) / np.maximum(1.0, np.abs(want))).max())
        if not err <= TOL:
            raise AssertionError(f"{name}: the forward differs from the source golden's {key} by {err:.3g}")
        worst = max(worst, err)
    return worst


# ---------------------------------------------------------------------------------- one backward case

def draw_dY(p, seed):
    gen = torch.Generator().manual_seed(seed)
    shape = (p.B, p.n, p.d_out) if p.batched else (p.n, p.d_out)
    return torch.randn(*shape, generator=gen, dtype=DT)


def describe_empty(p):
    rows = [(b, i) for b in range(p.B) for i in range(p.n) if p.empty[b, i]]
    return ", ".join(f"item {b} query {i}" if p.batched else f"query {i}" for b, i in rows)


def backward_case(name, what, doc, seed, source=None, how_extra=""):
    """The golden document of one case: doc is the input without dY; seed None means dY = 1 (no dY key)."""
    p = backward_model.Problem(doc)
    if seed is None:
        dY = torch.ones(*((p.B, p.n, p.d_out) if p.batched else (p.n, p.d_out)), dtype=DT)
        inp = dict(doc)
    else:
        dY = draw_dY(p, seed)
        inp = dict(doc)
        inp["dY"] = dY.tolist()
    grads, steps = backward_model.autograd(p, doc, dY)
    check_invariants(name, p, grads, dY)
    for key, x in steps.items():  # -inf only where the mask hides a key of a row that has one
        bad = ~torch.isfinite(x)
        if key == "masked":
            bad &= p.allow.unsqueeze(1).expand_as(x) | p.empty.view(p.B, 1, p.n, 1).expand_as(x)
        if bad.any():
            raise AssertionError(f"{name}: the forward step {key} is not finite")

    keys = list(grads)
    numpy_err = disagreement(name, "the NumPy backward", numpy_backward(p, doc, dY), grads, keys)
    checks = [f"a NumPy backward written out by hand gives every key to {numpy_err:.1e}"]
    mha_err = None
    if mha_applies(p, doc):
        mha = mha_gradients(p, doc, dY)
        mha_err = disagreement(name, "MultiheadAttention", mha, grads, list(mha))
        checks.append(f"torch.nn.MultiheadAttention's autograd gives {', '.join(mha)} to {mha_err:.1e}")
    max_scaled = float(steps["masked"][p.allow.unsqueeze(1).expand_as(steps["masked"])].abs().max())
    fd_err = None
    if max_scaled < 100:
        fd_err, fd_count = finite_differences(name, p, doc, dY, grads)
        checks.append(f"central differences (step {FD_STEP:g}) on {fd_count} entries of the leaves agree to "
                      f"{fd_err:.1e}")
    fwd_err = None
    if source is not None:
        fwd_err = forward_check(name, p, steps, source)
        checks.append(f"the forward gives the source golden's {', '.join(source['expected'])} to {fwd_err:.1e}")

    biases = [key for key in ("b_q", "b_k", "b_v", "b_o") if key in doc]
    how = ("torch autograd in float64 (one thread, deterministic) through the forward of docs/input-format.md, "
           "on leaves that hold the file's tensors in its own layout and shapes (requires_grad): "
           + ("q = X·W_q, k = C·W_k, v = C·W_v with C the context" if p.cross
              else "q = X·W_q, k = X·W_k, v = X·W_v")
           + (f" (+ {', '.join(biases)})" if biases else "") + f", split into {p.h} query head{'s' if p.h > 1 else ''}"
           + (f" and {p.g} kv head{'s' if p.g > 1 else ''} (query head hd reads kv head hd // {p.h // p.g})"
              if p.g != p.h else "")
           + (f", RoPE ({p.style}, theta {p.theta:g}, dims {p.dims}) on the heads" if p.rope is not None else "")
           + f", S = Q·Kᵀ, S' = S·scale (scale = {p.scale!r}{', given' if 'scale' in doc else ', 1/sqrt(d_k)'})"
           + (", + the ALiBi bias" if p.slopes is not None else "")
           + ", masked by torch.where(-inf), torch.softmax, weights·V, concat"
           + (", Y = O·W_o" + (" + b_o" if "b_o" in doc else "") if p.has_wo else ", Y = O (no W_o)")
           + "; retain_grad() on every step; L = Σ Y ⊙ dY, "
           + ("dY = 1 everywhere (the input has no dY)" if seed is None else
              f"dY = torch.randn(generator seeded {seed}, float64)"))
    if p.empty.any():
        how += (f". Rows with nothing to attend ({describe_empty(p)}): their scores are replaced by 0 before the "
                "softmax and their weights multiplied by 0 (the zero policy), so d_weights there is dO·Vᵀ and the "
                "score gradients are 0")
    how += how_extra + ". Checks: " + "; ".join(checks) + " (relative to max(1, |value|))"

    def out(x):
        return (x + 0.0).tolist()  # + 0.0 turns -0.0 into 0.0

    doc_out = {"name": name, "what": what, "how": how, "dY_seed": seed, "input": inp,
               "expected": {k: out(v) for k, v in grads.items()}}
    stats = {"max_abs": max(float(v.abs().max()) for v in grads.values()), "max_scaled": max_scaled,
             "numpy": numpy_err, "mha": mha_err, "fd": fd_err, "forward": fwd_err}
    return doc_out, stats, steps, p


# ------------------------------------------------------------------------------------------- the cases

LARGE = {}  # facts about the large-logit cases, for the summary


def cases():
    out = []
    sources = sorted((HERE / "golden").glob("*.json")) + sorted((HERE / "golden_positions").glob("*.json"))
    for path in sources:
        source = json.loads(path.read_text(encoding="utf-8"))
        name = source["name"]
        if name not in SEEDS:
            sys.exit(f"make_backward.py: the case {name} has no dY seed: add one to SEEDS")
        what = f"{source['what'].rstrip('.')}. Backward, dY standard normal (seed {SEEDS[name]})."
        out.append((name, what, source["input"], SEEDS[name], source, ""))

    doc, extra, facts = large_logits(
        "large_logits_1e3", 1e3, 7001, n=6, d_model=4, h=2, g=2, d_k=2, d_v=2, step_bits=11, near={4: 1, 5: 2},
        what="Scale 1 and scores up to about 1e3, with near-duplicate tokens that keep some rows soft")
    out.append(("large_logits_1e3", "Scale 1, the largest |S'| about 1e3: most rows one-hot, the near-duplicate "
                "tokens' rows soft. Backward, dY standard normal (seed 9201).", doc, SEEDS["large_logits_1e3"],
                None, extra))
    LARGE["large_logits_1e3"] = facts
    doc, extra, facts = large_logits(
        "large_logits_5e5", 5e5, 7004, n=3, m=8, d_model=4, h=2, g=1, d_k=2, d_v=3, step_bits=17,
        near={5: 1, 6: 2, 7: 3}, mask={"type": "causal", "align": "bottom_right"}, layout="out_in",
        what="Scale 1 and scores up to about 5e5 (log-sum-exp about 5e5): cross-attention, MQA, causal bottom_right")
    out.append(("large_logits_5e5", "Scale 1, the largest |S'| about 5e5, so a row's log-sum-exp is about 5e5: "
                "cross-attention over 8 keys with near-duplicates, MQA 2/1, causal bottom_right, out_in. Backward, "
                "dY standard normal (seed 9202).", doc, SEEDS["large_logits_5e5"], None, extra))
    LARGE["large_logits_5e5"] = facts

    cat = json.loads((DATA_DIR / "the_cat_sat.json").read_text(encoding="utf-8"))
    out.append(("the_cat_sat_ones", "data/the_cat_sat.json without dY, so dY = 1 everywhere and L = ΣY: every value "
                "is 1, so d_weights = dO·Vᵀ = 2 and the score gradients vanish.", cat, None, None, ""))
    return out



def check_cat_ones(doc):
    """The cat sat with dY = 1: every value is [1, 1], so d_weights = dO·Vᵀ = 2 everywhere, and the softmax's
    Jacobian sends a constant row to 0: the score gradients and everything before them on Q and K are 0."""
    e = doc["expected"]
    if not np.array_equal(np.asarray(e["d_weights"]), np.full((1, 3, 3), 2.0)):
        raise AssertionError(f"the_cat_sat_ones: d_weights is not all 2: {e['d_weights']}")
    for key in ("d_masked", "d_scaled", "d_scores", "d_q_heads", "d_k_heads", "d_q", "d_k", "d_W_q", "d_W_k"):
        if np.asarray(e[key]).any():
            raise AssertionError(f"the_cat_sat_ones: {key} is not 0: {e[key]}")


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    all_cases = cases()
    names = [c[0] for c in all_cases]
    if len(set(names)) != len(names):
        sys.exit("make_backward.py: two cases share a name")
    unused = set(SEEDS) - set(names)
    if unused:
        sys.exit(f"make_backward.py: seeds of cases that do not exist: {sorted(unused)}")
    seeds = [c[3] for c in all_cases if c[3] is not None]
    if len(set(seeds)) != len(seeds):
        sys.exit("make_backward.py: two cases share a dY seed")
    written = set()
    summary = []
    for name, what, doc, seed, source, extra in all_cases:
        golden, stats, _, _ = backward_case(name, what, doc, seed, source, extra)
        if name == "the_cat_sat_ones":
            check_cat_ones(golden)
        path = OUT_DIR / f"{name}.json"
        path.write_text(golden_common.to_text(golden) + "\n", encoding="utf-8")
        written.add(path.name)
        summary.append((name, stats))
    for stale in OUT_DIR.glob("*.json"):
        if stale.name not in written:
            stale.unlink()

    def worst(key):
        vals = [s[key] for _, s in summary if s[key] is not None]
        return max(vals), len(vals)

    big = max(summary, key=lambda c: c[1]["max_abs"])
    print(f"wrote {len(summary)} backward cases to {OUT_DIR}")
    print(f"largest |gradient|: {big[1]['max_abs']!r} ({big[0]})")
    for label, key in (("NumPy backward", "numpy"), ("MultiheadAttention", "mha"), ("central differences", "fd"),
                       ("forward vs source golden", "forward")):
        w, count = worst(key)
        print(f"{label}: {count} cases, largest disagreement {w:.2e}")
    for name, facts in LARGE.items():
        print(f"{name}: max |S'| {facts['max_scaled']!r}, max |lse| {facts['max_abs_lse']!r}, "
              f"{facts['soft_rows']} of {facts['rows']} rows soft")


if __name__ == "__main__":
    main()
