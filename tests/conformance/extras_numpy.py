"""The check that make_extras.py holds autograd to: every forward step and every gradient of a case once more,
with NumPy in float64 and written out by hand apart from the torch forward: the sink's softmax with m and l,
the softcap's derivative 1 − tanh²(S'/c), the keep mask, d_sinks = Σ_{b,i} −a_sink·D with D = Σ_j dA_ij·A_ij,
and the rest as make_backward.py's NumPy backward.
"""

import numpy as np


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
