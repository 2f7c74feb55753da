#!/usr/bin/python3
"""Golden cases for decoding with a KV cache, computed with PyTorch in float64.

Each case is a causal self-attention input in attn-trace's format (docs/input-format.md), a prompt length
and a split, and what PyTorch computes for every decode step: the prompt's keys and values fill the cache
(prefill), then each later token's q, k and v are projected (RoPE at its own position), k and v appended,
and its one query row attends to the whole cache. Written out here from the definitions, not from
attn-trace's code:

- heads: q, k, v reshaped (T, heads, d) and transposed; a key/value head shared by h/g query heads
  (torch.repeat_interleave, as Hugging Face's repeat_kv);
- RoPE, "half" style: Hugging Face's Llama rotate_half; "interleaved": RoFormer's complex pairs;
- scores q·kᵀ times the scale, softcap c·tanh(s/c), ALiBi's -slope·(i - j), a sliding window of w keys;
- sinks: one logit per head in the softmax's denominator (torch.cat of the sink, softmax, the sink dropped);
- flash-decoding's split: the cache cut into S chunks [⌊s·L/S⌋, ⌊(s+1)·L/S⌋); each chunk's
  lse_s = torch.logsumexp(its scores) and o_s = softmax(its scores)·V; merged by lse = logsumexp(lse_s) (the
  sink's logit among them) and o = Σ exp(lse_s - lse)·o_s. An empty chunk, or one the window masks whole,
  has lse_s = -inf, o_s = 0 and no share.

Every tensor is written with its batch axis (extent 1 for a single sequence), heads before tokens, per
decode step: k_cache (B, g, L, d_k), scores (B, h, 1, L) before the scale, weights (B, h, 1, L) (unsplit),
chunk_lse (B, h, S) (split), head_outputs (B, h, 1, d_v) and output (B, 1, d_out).

usage: /usr/bin/python3 tests/conformance/make_decode.py   (rewrites tests/conformance/golden_decode/)
"""

import json
import math
import pathlib

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parent / "golden_decode"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def tensor(x):
    return torch.tensor(np.asarray(x, dtype=np.float64), dtype=torch.float64)


def rope(x, pos, theta, dims, style):
    """x (heads, d) turned at position pos."""
    if style == "half":
        inv_freq = 1.0 / (theta ** (torch.arange(0, dims, 2, dtype=torch.float64) / dims))
        emb = torch.cat([pos * inv_freq, pos * inv_freq])
        rot, rest = x[..., :dims], x[..., dims:]
        x1, x2 = rot[..., : dims // 2], rot[..., dims // 2:]
        turned = rot * torch.cos(emb) + torch.cat([-x2, x1], dim=-1) * torch.sin(emb)
        return torch.cat([turned, rest], dim=-1)
    inv_freq = theta ** (-torch.arange(0, dims // 2, dtype=torch.float64) * 2.0 / dims)
    z = torch.complex(x[..., 0:dims:2], x[..., 1:dims:2]) * torch.exp(1j * pos * inv_freq)
    turned = torch.stack([z.real, z.imag], dim=-1).reshape(x[..., :dims].shape)
    return torch.cat([turned, x[..., dims:]], dim=-1)


def alibi_slopes(n):
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n - closest]


def decode(inp, prompt, split):
    X = tensor(inp["X"])
    if X.dim() == 2:
        X = X[None]
    B, n, _ = X.shape
    h = inp.get("n_heads", 1)
    g = inp.get("n_kv_heads", h)
    W_q, W_k, W_v = tensor(inp["W_q"]), tensor(inp["W_k"]), tensor(inp["W_v"])
    d_k, d_v = W_q.shape[1] // h, W_v.shape[1] // g
    bias = {k: tensor(inp[k]) if k in inp else torch.zeros(1, dtype=torch.float64) for k in ("b_q", "b_k", "b_v")}
    scale = inp.get("scale", 1 / math.sqrt(d_k))
    mask = inp["mask"]
    window = mask["window"] if isinstance(mask, dict) and mask.get("type") == "sliding_window" else None
    r = inp.get("rope")
    slopes = torch.tensor(alibi_slopes(h), dtype=torch.float64) if inp.get("alibi") else None
    sinks = tensor(inp["sinks"]) if "sinks" in inp else None
    cap = inp.get("softcap")

    def project(x):  # x (B, d_model) -> q (B, h, d_k), k (B, g, d_k), v (B, g, d_v)
        q = (x @ W_q + bias["b_q"]).reshape(B, h, d_k)
        k = (x @ W_k + bias["b_k"]).reshape(B, g, d_k)
        v = (x @ W_v + bias["b_v"]).reshape(B, g, d_v)
        return q, k, v

    def turned(x, t):
        if r is None:
            return x
        return rope(x, float(t), r.get("theta", 10000.0), r.get("dims", d_k), r.get("style", "half"))

    K, V = [], []  # the cache: one (B, g, d) entry per token
    steps = []
    for t in range(n):
        q, k, v = project(X[:, t])
        q, k = turned(q, t), turned(k, t)
        K.append(k)
        V.append(v)
        if t < prompt:
            continue  # the prefill: its keys and values fill the cache; run's causal pass checks its rows
        L = t + 1
        Kc = torch.stack(K, dim=2)  # (B, g, L, d_k)
        Vc = torch.stack(V, dim=2)
        Kh = torch.repeat_interleave(Kc, h // g, dim=1)  # (B, h, L, d_k)
        Vh = torch.repeat_interleave(Vc, h // g, dim=1)
        S = torch.einsum("bhd,bhjd->bhj", q, Kh)  # (B, h, L)
        s = S * scale
        if cap is not None:
            s = cap * torch.tanh(s / cap)
        if slopes is not None:
            s = s - slopes[None, :, None] * (t - torch.arange(L, dtype=torch.float64))[None, None, :]
        if window is not None:
            s = s.masked_fill((torch.arange(L) <= t - window)[None, None, :], -math.inf)
        step = {"position": t, "k_cache": Kc.tolist(), "scores": S[:, :, None, :].tolist()}
        if not split:
            if sinks is not None:
                with_sink = torch.cat([sinks[None, :, None].expand(B, h, 1), s], dim=-1)
                A = torch.softmax(with_sink, dim=-1)[..., 1:]
            else:
                A = torch.softmax(s, dim=-1)
            O = torch.einsum("bhj,bhjd->bhd", A, Vh)
            step["weights"] = A[:, :, None, :].tolist()
        else:
            lse_s, o_s = [], []
            for c in range(split):
                c0, c1 = c * L // split, (c + 1) * L // split
                if c0 == c1:
                    lse_s.append(torch.full((B, h), -math.inf, dtype=torch.float64))
                    o_s.append(torch.zeros(B, h, d_v, dtype=torch.float64))
                    continue
                lse_s.append(torch.logsumexp(s[..., c0:c1], dim=-1))
                o = torch.einsum("bhj,bhjd->bhd", torch.softmax(s[..., c0:c1], dim=-1), Vh[:, :, c0:c1])
                # a chunk the window masks whole has nothing to attend: output 0 (softmax of all -inf is nan)
                nothing = torch.isinf(s[..., c0:c1]).all(dim=-1)
                o_s.append(torch.where(nothing[..., None], torch.zeros_like(o), o))
            lse_all = torch.stack(lse_s, dim=-1)  # (B, h, S)
            with_sink = lse_all if sinks is None else torch.cat([sinks[None, :, None].expand(B, h, 1), lse_all], -1)
            lse = torch.logsumexp(with_sink, dim=-1)  # (B, h)
            share = torch.exp(lse_all - lse[..., None])
            O = sum(share[..., c, None] * o_s[c] for c in range(split))
            step["chunk_lse"] = lse_all.tolist()
        concat = O.reshape(B, h * d_v)
        Y = concat @ tensor(inp["W_o"]) + (tensor(inp["b_o"]) if "b_o" in inp else 0) if "W_o" in inp else concat
        step["head_outputs"] = O[:, :, None, :].tolist()
        step["output"] = Y[:, None, :].tolist()
        steps.append(step)
    return steps


def random_input(rng, n, d_model, h, g, d_k, d_v, **extra):
    def matrix(rows, cols):
        return np.round(rng.uniform(-1, 1, (rows, cols)), 3).tolist()

    inp = {"description": extra.pop("description"), "n_heads": h, "n_kv_heads": g, "mask": extra.pop("mask", "causal")}
    B = extra.pop("batch", None)
    X = rng.uniform(-1, 1, (B, n, d_model) if B else (n, d_model))
    inp["X"] = np.round(X, 3).tolist()
    inp.update(W_q=matrix(d_model, h * d_k), W_k=matrix(d_model, g * d_k), W_v=matrix(d_model, g * d_v),
               W_o=matrix(h * d_v, d_model))
    inp.update(extra)
    return inp


def cases():
    rng = np.random.default_rng(43)
    with open(ROOT / "data" / "gpt_causal.json", encoding="utf-8") as f:
        gpt = json.load(f)
    gqa_rope = random_input(rng, 6, 8, 4, 2, 2, 2, description="GQA 4 heads on 2, RoPE (half), causal",
                            rope={"theta": 100})
    mqa = random_input(rng, 5, 6, 3, 1, 2, 3, description="MQA 3 heads on 1, interleaved RoPE, biases, causal",
                       rope={"theta": 50, "style": "interleaved"}, b_q=[0.1, -0.2, 0.3, 0.0, 0.5, -0.4],
                       b_k=[0.25, -0.5], b_v=[0.1, 0.2, -0.3])
    window_sinks = random_input(rng, 6, 4, 2, 2, 2, 2, description="a sliding window of 3 with sinks",
                                mask={"type": "sliding_window", "window": 3}, sinks=[0.5, -1.0])
    alibi_cap = random_input(rng, 5, 4, 2, 1, 2, 2, description="ALiBi and softcap, a batch of 2", alibi=True,
                             softcap=2.0, batch=2)
    return [
        ("gpt_causal", "data/gpt_causal.json, the prompt The", gpt, 1, 0),
        ("gpt_causal_split3", "data/gpt_causal.json split into 3 chunks (an empty one at cat)", gpt, 1, 3),
        ("gqa_rope", "GQA with RoPE, a prompt of 2", gqa_rope, 2, 0),
        ("gqa_rope_split2", "GQA with RoPE, a prompt of 2, split into 2", gqa_rope, 2, 2),
        ("mqa_rope_split4", "MQA, interleaved RoPE and biases, every token decoded, split into 4", mqa, 0, 4),
        ("window_sinks", "a sliding window of 3 with sinks, a prompt of 2", window_sinks, 2, 0),
        ("window_sinks_split3", "a sliding window of 3 with sinks, split into 3", window_sinks, 2, 3),
        ("alibi_softcap_batch_split2", "ALiBi, softcap and a batch of 2, split into 2", alibi_cap, 1, 2),
    ]


def finite_or_text(x):
    """-inf (an empty chunk's lse) as the string "-inf", as attn-trace's traces write it: JSON has no infinity."""
    if isinstance(x, list):
        return [finite_or_text(v) for v in x]
    if isinstance(x, dict):
        return {k: finite_or_text(v) for k, v in x.items()}
    if isinstance(x, float) and not math.isfinite(x):
        return "-inf" if x < 0 else "inf" if x > 0 else "nan"
    return x


def main():
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    for name, what, inp, prompt, split in cases():
        golden = {"name": name, "what": what, "input": inp, "prompt": prompt, "split": split,
                  "steps": decode(inp, prompt, split)}
        with open(OUT / f"{name}.json", "w", encoding="utf-8") as f:
            json.dump(finite_or_text(golden), f, indent=1, allow_nan=False)
            f.write("\n")
    print(f"wrote {len(cases())} cases to {OUT}")


if __name__ == "__main__":
    main()
