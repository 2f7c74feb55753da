#!/usr/bin/env python3
"""Golden cases for rotary position embeddings (RoPE) and ALiBi, computed with NumPy in float64.

Each case is an input in attn-trace's format (docs/input-format.md) with the keys "rope" and/or "alibi",
and the values that the published formulas give for the steps q_rot, k_rot, bias, weights and output.
The formulas are written out here from their sources, not from attn-trace's code:

- RoPE, "half" style: Hugging Face transformers' Llama (apply_rotary_pos_emb with rotate_half):
  inv_freq = 1 / theta^(arange(0, dims, 2) / dims), emb = concat(freqs, freqs),
  x·cos(emb) + rotate_half(x)·sin(emb), rotate_half(x) = concat(-x2, x1).
- RoPE, "interleaved" style: RoFormer (arXiv:2104.09864) eq. 34 / GPT-J / Meta's Llama reference:
  the pairs (2i, 2i+1) as complex numbers multiplied by exp(i·pos·θ_i).
- Partial rotary (GPT-NeoX rotary_pct): only the first `dims` features of a head turn.
- ALiBi (Press et al., arXiv:2108.12409) and its reference get_slopes: for a power of two h,
  2^(-8/h)^(k+1); otherwise the slopes of the closest lower power of two, then every other slope of
  twice that. bias = -slope·(pos_i - pos_j), added to the scaled scores before the mask.

Every tensor is written with its batch axis (extent 1 for a single sequence), heads before tokens:
q_rot (B, h, n, d_k), k_rot (B, g, m, d_k), bias (B, h, n, m), weights (B, h, n, m), output (B, n, d_out).

usage: /usr/bin/python3 tests/conformance/make_positions.py   (rewrites tests/conformance/golden_positions/)
"""

import json
import math
import pathlib

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent / "golden_positions"


def rope_half(x, pos, theta, dims):
    inv_freq = 1.0 / (theta ** (np.arange(0, dims, 2, dtype=np.float64) / dims))
    freqs = np.outer(np.asarray(pos, dtype=np.float64), inv_freq)  # (T, dims/2)
    emb = np.concatenate([freqs, freqs], axis=-1)                    # (T, dims)
    cos, sin = np.cos(emb), np.sin(emb)
    rot, rest = x[..., :dims], x[..., dims:]
    x1, x2 = rot[..., : dims // 2], rot[..., dims // 2:]
    rotate_half = np.concatenate([-x2, x1], axis=-1)
    return np.concatenate([rot * cos + rotate_half * sin, rest], axis=-1)


def rope_interleaved(x, pos, theta, dims):
    inv_freq = theta ** (-np.arange(0, dims // 2, dtype=np.float64) * 2.0 / dims)
    angles = np.outer(np.asarray(pos, dtype=np.float64), inv_freq)  # (T, dims/2)
    rot, rest = x[..., :dims], x[..., dims:]
    z = (rot[..., 0::2] + 1j * rot[..., 1::2]) * np.exp(1j * angles)
    turned = np.empty_like(rot)
    turned[..., 0::2], turned[..., 1::2] = z.real, z.imag
    return np.concatenate([turned, rest], axis=-1)


def get_slopes(n):
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]


def allowed(mask, n, m):
    if mask is None or mask == "none":
        return np.ones((n, m), dtype=bool)
    kind = mask if isinstance(mask, str) else mask["type"]
    align = "top_left" if isinstance(mask, str) else mask.get("align", "top_left")
    offset = 0 if align == "top_left" else m - n
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    assert kind == "causal"
    return j <= i + offset


def compute(inp):
    X = np.asarray(inp["X"], dtype=np.float64)
    batched = X.ndim == 3
    if not batched:
        X = X[None]
    C = np.asarray(inp["context"]["X"], dtype=np.float64) if "context" in inp else X
    if "context" in inp and not batched:
        C = C[None]
    B, n, _ = X.shape
    m = C.shape[1]
    h = inp.get("n_heads", 1)
    g = inp.get("n_kv_heads", h)
    Wq, Wk, Wv = (np.asarray(inp[k], dtype=np.float64) for k in ("W_q", "W_k", "W_v"))
    d_k, d_v = Wq.shape[1] // h, Wv.shape[1] // g
    Q = (X @ Wq).reshape(B, n, h, d_k).transpose(0, 2, 1, 3)
    K = (C @ Wk).reshape(B, m, g, d_k).transpose(0, 2, 1, 3)
    V = (C @ Wv).reshape(B, m, g, d_v).transpose(0, 2, 1, 3)
    out = {}
    rope = inp.get("rope")
    pos_q = np.arange(n, dtype=np.float64)
    pos_k = np.arange(m, dtype=np.float64) if "context" in inp else None
    if rope is not None:
        theta = rope.get("theta", 10000.0)
        dims = rope.get("dims", d_k)
        pos_q = np.asarray(rope.get("positions", list(range(n))), dtype=np.float64)
        pos_k = np.asarray(rope["context_positions"], dtype=np.float64) if "context_positions" in rope else (
            np.arange(m, dtype=np.float64) if "context" in inp else pos_q)
        turn = rope_half if rope.get("style", "half") == "half" else rope_interleaved
        Q = turn(Q, pos_q, theta, dims)
        K = turn(K, pos_k, theta, dims)
        out["q_rot"], out["k_rot"] = Q, K
    else:
        # ALiBi without rope: keys 0..m-1, the last query at the last key
        pos_k = np.arange(m, dtype=np.float64)
        pos_q = np.arange(n, dtype=np.float64) + (m - n)
    group = h // g
    Kh = np.repeat(K, group, axis=1)
    Vh = np.repeat(V, group, axis=1)
    scale = inp.get("scale", 1.0 / math.sqrt(d_k))
    S = (Q @ Kh.transpose(0, 1, 3, 2)) * scale
    alibi = inp.get("alibi")
    if alibi is not None and alibi is not False:
        slopes = np.asarray(get_slopes(h) if alibi is True else alibi, dtype=np.float64)
        bias = -slopes[:, None, None] * (pos_q[None, :, None] - pos_k[None, None, :])  # (h, n, m)
        S = S + bias[None]
        out["bias"] = S
    ok = allowed(inp.get("mask"), n, m)
    S = np.where(ok[None, None], S, -np.inf)
    row_max = S.max(axis=-1, keepdims=True)
    E = np.where(np.isfinite(S), np.exp(S - np.where(np.isfinite(row_max), row_max, 0)), 0.0)
    total = E.sum(axis=-1, keepdims=True)
    A = np.where(total > 0, E / np.where(total > 0, total, 1), 0.0)
    out["weights"] = A
    O = (A @ Vh).transpose(0, 2, 1, 3).reshape(B, n, h * d_v)
    if "W_o" in inp:
        O = O @ np.asarray(inp["W_o"], dtype=np.float64)
    out["output"] = O
    return out


def weights(rng, rows, cols):
    return np.round(rng.uniform(-1, 1, size=(rows, cols)), 2).tolist()


def case(rng, name, what, n, d_model, h, d_k, g=None, d_v=None, batch=None, context=None, **keys):
    g = g or h
    d_v = d_v or d_k
    shape = (batch, n, d_model) if batch else (n, d_model)
    inp = {"description": what, "X": np.round(rng.uniform(-1, 1, size=shape), 2).tolist()}
    d_ctx = d_model
    if context:
        cshape = (batch, context, d_model) if batch else (context, d_model)
        inp["context"] = {"X": np.round(rng.uniform(-1, 1, size=cshape), 2).tolist()}
    inp["n_heads"] = h
    inp["n_kv_heads"] = g
    inp["W_q"] = weights(rng, d_model, h * d_k)
    inp["W_k"] = weights(rng, d_ctx, g * d_k)
    inp["W_v"] = weights(rng, d_ctx, g * d_v)
    inp["W_o"] = weights(rng, h * d_v, d_model)
    inp.update(keys)
    expected = {k: v.tolist() for k, v in compute(inp).items()}
    return {"name": name, "what": what, "input": inp, "expected": expected}


def main():
    rng = np.random.default_rng(20240613)
    cases = [
        case(rng, "rope_half", "RoPE, rotate-half style (Llama), theta 10000, one head, causal",
             5, 4, 1, 4, rope={"theta": 10000}, mask="causal"),
        case(rng, "rope_interleaved", "RoPE, interleaved pairs (RoFormer, GPT-J), theta 100, two heads",
             4, 6, 2, 4, rope={"theta": 100, "style": "interleaved"}),
        case(rng, "rope_partial_gqa", "partial RoPE (dims 4 of d_k 6, GPT-NeoX), GQA 4 heads on 2, causal",
             6, 8, 4, 6, g=2, rope={"theta": 500, "dims": 4}, mask="causal"),
        case(rng, "rope_kv_cache", "decoding with a KV cache: 2 new queries at positions 5 and 6, 7 cached keys, "
             "interleaved, dims 2 of 4, bottom-right causal", 2, 4, 2, 4, context=7,
             rope={"positions": [5, 6], "context_positions": list(range(7)), "style": "interleaved", "dims": 2,
                   "theta": 10},
             mask={"type": "causal", "align": "bottom_right"}),
        case(rng, "rope_positions_offset", "RoPE with positions that start at 100 (a later chunk), half style",
             3, 4, 2, 2, rope={"positions": [100, 101, 102]}),
        case(rng, "alibi_four_heads", "ALiBi's standard slopes for 4 heads (a power of two), causal",
             5, 8, 4, 2, alibi=True, mask="causal"),
        case(rng, "alibi_six_heads", "ALiBi's standard slopes for 6 heads (not a power of two), no mask, so keys "
             "after a query are raised", 4, 6, 6, 2, g=3, alibi=True),
        case(rng, "alibi_explicit_cross", "ALiBi with explicit slopes, cross-attention: 3 queries at the end of 5 "
             "keys", 3, 4, 2, 2, context=5, alibi=[0.5, -0.125]),
        case(rng, "rope_alibi_batch", "RoPE and ALiBi together on a batch of 2, positions from 3, GQA, causal",
             4, 6, 4, 4, g=2, batch=2, rope={"positions": [3, 4, 5, 6], "style": "half", "theta": 1000},
             alibi=True, mask="causal"),
    ]
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    for c in cases:
        with open(OUT / f"{c['name']}.json", "w") as f:
            json.dump(c, f, indent=1)
            f.write("\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
