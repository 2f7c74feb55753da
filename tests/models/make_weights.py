#!/usr/bin/env python3
"""One attention layer per style of `attn-trace import`, under the tensor names and layouts the real
models use, with the inputs X and golden outputs computed by implementations that share no code with
attn-trace: torch.nn.MultiheadAttention's own forward for torch-mha, and NumPy written from each model's
published equations for GPT-2, BERT and Llama (RoPE in the rotate-half convention, grouped-query
attention, causal).

    /usr/bin/python3 tests/models/make_weights.py      # rewrites tests/data/models/

Every number comes from fixed seeds, so the files come out byte for byte the same. tests/models/README.md
says what each file is. Needs numpy and torch (1.13 or later); safetensors files are written by hand.
"""

import json
import math
import struct
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[1] / "data" / "models"

SAFETENSORS_DTYPE = {np.dtype("float16"): "F16", np.dtype("float32"): "F32", np.dtype("float64"): "F64"}


def write_safetensors(path, tensors):
    """tensors: name -> numpy array (float16/32/64) or ("BF16", uint16 array of bfloat16 bits)."""
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        if isinstance(value, tuple):
            dtype, array = value
        else:
            array = np.ascontiguousarray(value)
            dtype = SAFETENSORS_DTYPE[array.dtype]
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as the safetensors library writes it
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_json(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")


def as_list(a):
    return np.asarray(a, dtype=np.float64).tolist()


def f32(rng, *shape, scale=1.0):
    """Normal numbers rounded to float32: the weights and X are exactly what the files hold."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def softmax(s):
    s = s - s.max(axis=-1, keepdims=True)  # so exp never overflows; -inf stays -inf
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def causal(n):
    return np.triu(np.ones((n, n), dtype=bool), k=1)  # True above the diagonal: the future, hidden


def attend(q, k, v, h, g, mask):
    """q (n, h·d_k), k (n, g·d_k), v (n, g·d_v) -> weights (h, n, n), head outputs concatenated (n, h·d_v).
    Query head i reads key/value head i // (h/g)."""
    n = q.shape[0]
    d_k, d_v = q.shape[1] // h, v.shape[1] // g
    weights, outs = [], []
    for i in range(h):
        j = i // (h // g)
        qi, kj, vj = q[:, i * d_k:(i + 1) * d_k], k[:, j * d_k:(j + 1) * d_k], v[:, j * d_v:(j + 1) * d_v]
        s = qi @ kj.T / math.sqrt(d_k)
        if mask is not None:
            s = np.where(mask, -np.inf, s)
        p = softmax(s)
        weights.append(p)
        outs.append(p @ vj)
    return np.stack(weights), np.concatenate(outs, axis=1)


def over_batch(x, f):
    """f on each item of a (B, n, d) X, or on a (n, d) X; each result stacked or as is."""
    if x.ndim == 2:
        return f(x)
    results = [f(item) for item in x]
    return {key: np.stack([r[key] for r in results]) for key in results[0]}


# --- GPT-2: Conv1D weights, in × out; c_attn holds q, k, v side by side -----------------------------------

def gpt2():
    rng = np.random.default_rng(2)
    d, h, n = 8, 2, 5
    w_attn, b_attn = f32(rng, d, 3 * d, scale=d ** -0.5), f32(rng, 3 * d, scale=0.1)
    w_proj, b_proj = f32(rng, d, d, scale=d ** -0.5), f32(rng, d, scale=0.1)
    x = f32(rng, n, d)
    p = "transformer.h.0."
    write_safetensors(OUT / "gpt2" / "model.safetensors", {
        p + "ln_1.weight": np.ones(d, dtype=np.float32),  # a neighbour, as in a real checkpoint
        p + "attn.c_attn.weight": w_attn, p + "attn.c_attn.bias": b_attn,
        p + "attn.c_proj.weight": w_proj, p + "attn.c_proj.bias": b_proj})
    write_json(OUT / "gpt2" / "config.json", {"model_type": "gpt2", "n_embd": d, "n_head": h, "n_layer": 1})
    np.save(OUT / "x_5x8.npy", x)

    # GPT2Attention: qkv = x·W + b, split into thirds, causal softmax(q·kᵀ/√d_k)·v, then c_proj.
    def layer(x):
        qkv = x.astype(np.float64) @ w_attn.astype(np.float64) + b_attn
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        weights, o = attend(q, k, v, h, h, causal(len(x)))
        return {"q": q, "k": k, "v": v, "weights": weights, "output": o @ w_proj.astype(np.float64) + b_proj}
    return layer(x)


# --- Llama: nn.Linear weights, out × in; grouped-query; RoPE on q and k -------------------------------------

def rope_half(x, heads, theta):
    """RoPE as Llama applies it (rotate-half): each head's d_k columns are two halves [x1, x2]; column c
    and c + d_k/2 turn together by the angle pos · θ^(−2c/d_k): x·cos + rotate_half(x)·sin, with
    rotate_half([x1, x2]) = [−x2, x1] and cos, sin repeated over both halves."""
    n, width = x.shape
    d_k = width // heads
    inv_freq = theta ** (-np.arange(0, d_k, 2, dtype=np.float64) / d_k)  # (d_k/2)
    angles = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]  # (n, d_k/2)
    cos, sin = np.cos(np.concatenate([angles, angles], 1)), np.sin(np.concatenate([angles, angles], 1))
    out = np.empty_like(x)
    for i in range(heads):
        xi = x[:, i * d_k:(i + 1) * d_k]
        rotated = np.concatenate([-xi[:, d_k // 2:], xi[:, :d_k // 2]], axis=1)
        out[:, i * d_k:(i + 1) * d_k] = xi * cos + rotated * sin
    return out


def llama():
    rng = np.random.default_rng(3)
    d, h, g, d_k, n, theta = 16, 4, 2, 4, 6, 100.0
    wq, wk = f32(rng, h * d_k, d, scale=d ** -0.5), f32(rng, g * d_k, d, scale=d ** -0.5)
    wv, wo = f32(rng, g * d_k, d, scale=d ** -0.5), f32(rng, d, h * d_k, scale=(h * d_k) ** -0.5)
    x = f32(rng, n, d)
    p = "model.layers.0.self_attn."
    write_safetensors(OUT / "llama" / "model.safetensors", {
        p + "q_proj.weight": wq, p + "k_proj.weight": wk, p + "v_proj.weight": wv, p + "o_proj.weight": wo})
    write_json(OUT / "llama" / "config.json", {
        "model_type": "llama", "hidden_size": d, "num_attention_heads": h, "num_key_value_heads": g,
        "rope_theta": theta, "num_hidden_layers": 1})
    np.save(OUT / "x_6x16.npy", x)

    # LlamaAttention: q, k, v = x·Wᵀ (no bias); RoPE on q and k; causal; each kv head serves h/g query heads.
    x64 = x.astype(np.float64)
    q, k, v = x64 @ wq.T.astype(np.float64), x64 @ wk.T.astype(np.float64), x64 @ wv.T.astype(np.float64)
    q_rot, k_rot = rope_half(q, h, theta), rope_half(k, g, theta)
    weights, o = attend(q_rot, k_rot, v, h, g, causal(n))
    return {"q": q, "k": k, "v": v, "q_rot": q_rot, "k_rot": k_rot, "weights": weights,
            "output": o @ wo.T.astype(np.float64)}


# --- Gemma 2: Llama's names and RoPE, a scale from query_pre_attn_scalar, logits soft-capped -----------------

def gemma2():
    """Gemma2Attention's equations: q, k, v = x·Wᵀ; RoPE rotate-half; scores = q·kᵀ · query_pre_attn_scalar^-1/2,
    then capped, c·tanh(scores/c) with c = attn_logit_softcapping, before the causal mask; GQA 4/2. The head
    width (6) is not hidden_size / heads (4), and query_pre_attn_scalar (8) is not the head width, as in
    Gemma 2's larger models, so that the import must read both from the shapes and the config."""
    rng = np.random.default_rng(7)
    d, h, g, d_k, n, theta, scalar, cap = 16, 4, 2, 6, 6, 100.0, 8.0, 2.0
    wq, wk = f32(rng, h * d_k, d, scale=0.5), f32(rng, g * d_k, d, scale=0.5)
    wv, wo = f32(rng, g * d_k, d, scale=d ** -0.5), f32(rng, d, h * d_k, scale=(h * d_k) ** -0.5)
    x = np.load(OUT / "x_6x16.npy")
    p = "model.layers.0.self_attn."
    write_safetensors(OUT / "gemma2" / "model.safetensors", {
        p + "q_proj.weight": wq, p + "k_proj.weight": wk, p + "v_proj.weight": wv, p + "o_proj.weight": wo})
    write_json(OUT / "gemma2" / "config.json", {
        "model_type": "gemma2", "hidden_size": d, "num_attention_heads": h, "num_key_value_heads": g,
        "head_dim": d_k, "rope_theta": theta, "query_pre_attn_scalar": scalar, "attn_logit_softcapping": cap,
        "sliding_window": 4, "num_hidden_layers": 1})

    x64 = x.astype(np.float64)
    q, k, v = x64 @ wq.T.astype(np.float64), x64 @ wk.T.astype(np.float64), x64 @ wv.T.astype(np.float64)
    q_rot, k_rot = rope_half(q, h, theta), rope_half(k, g, theta)
    weights, outs = [], []
    for i in range(h):
        j = i // (h // g)
        s = q_rot[:, i * d_k:(i + 1) * d_k] @ k_rot[:, j * d_k:(j + 1) * d_k].T * scalar ** -0.5
        s = cap * np.tanh(s / cap)
        prob = softmax(np.where(causal(n), -np.inf, s))
        weights.append(prob)
        outs.append(prob @ v[:, j * d_k:(j + 1) * d_k])
    o = np.concatenate(outs, axis=1)
    return {"q": q, "k": k, "v": v, "q_rot": q_rot, "k_rot": k_rot, "weights": np.stack(weights),
            "output": o @ wo.T.astype(np.float64)}


# --- BERT: a folder of .npy files, nn.Linear out × in, all four biases, no mask; X a batch ----------------

def bert():
    rng = np.random.default_rng(4)
    d, h, B, n = 8, 2, 2, 4
    names = ["self.query", "self.key", "self.value", "output.dense"]
    tensors = {}
    for name in names:
        tensors[name + ".weight"] = f32(rng, d, d, scale=d ** -0.5)
        tensors[name + ".bias"] = f32(rng, d, scale=0.1)
    x = f32(rng, B, n, d)
    p = "bert.encoder.layer.0.attention."
    folder = OUT / "bert"
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in tensors.items():
        np.save(folder / f"{p}{name}.npy", value)
    write_json(folder / "config.json", {"model_type": "bert", "hidden_size": d, "num_attention_heads": h})
    np.save(OUT / "x_2x4x8.npy", x)

    # BertSelfAttention then BertSelfOutput's dense (its LayerNorm and residual are not attention).
    def linear(x, name):
        return x @ tensors[name + ".weight"].T.astype(np.float64) + tensors[name + ".bias"]

    def layer(x):
        x = x.astype(np.float64)
        q, k, v = linear(x, "self.query"), linear(x, "self.key"), linear(x, "self.value")
        weights, o = attend(q, k, v, h, h, None)
        return {"q": q, "k": k, "v": v, "weights": weights, "output": linear(o, "output.dense")}
    return over_batch(x, layer)


# --- nn.MultiheadAttention: its own state_dict and its own forward ------------------------------------------

def torch_mha(name, half):
    """A real nn.MultiheadAttention (d 8, 2 heads); `half`: its parameters stored in float16, and the
    golden computed from the float16 values (widened exactly to float64)."""
    torch.manual_seed(5 if not half else 6)
    d, h, n = 8, 2, 5
    mha = torch.nn.MultiheadAttention(d, h, bias=True, batch_first=True)
    with torch.no_grad():  # nonzero biases, which the module starts at 0
        mha.in_proj_bias.normal_(0, 0.1)
        mha.out_proj.bias.normal_(0, 0.1)
    if half:
        mha = mha.half()
    state = {key: value.detach().numpy() for key, value in mha.state_dict().items()}
    write_safetensors(OUT / name / "model.safetensors", state)

    x = np.load(OUT / "x_5x8.npy")
    mha64 = mha.double().eval()
    x64 = torch.from_numpy(x.astype(np.float64))[None]  # (1, n, d)
    with torch.no_grad():
        out, weights = mha64(x64, x64, x64, need_weights=True, average_attn_weights=False)
        w, b = mha64.in_proj_weight, mha64.in_proj_bias
        q, k, v = (torch.nn.functional.linear(x64[0], w[i * d:(i + 1) * d], b[i * d:(i + 1) * d]) for i in range(3))
    return {"q": q.numpy(), "k": k.numpy(), "v": v.numpy(), "weights": weights[0].numpy(), "output": out[0].numpy()}


def main():
    goldens = {
        "gpt2": (gpt2(), "NumPy, GPT2Attention's equations: c_attn split in thirds, causal, c_proj"),
        "llama": (llama(), "NumPy, LlamaAttention's equations: RoPE rotate-half (theta 100), GQA 4/2, causal"),
        "gemma2": (gemma2(), "NumPy, Gemma2Attention's equations: RoPE rotate-half (theta 100), GQA 4/2, scale "
                             "8^-1/2 (query_pre_attn_scalar), logits capped at 2, causal"),
        "bert": (bert(), "NumPy, BertSelfAttention and BertSelfOutput.dense: all biases, no mask, a batch of 2"),
        "torch_mha": (torch_mha("torch_mha", False), "torch.nn.MultiheadAttention's forward in float64"),
        "torch_mha_f16": (torch_mha("torch_mha_f16", True),
                          "torch.nn.MultiheadAttention stored in float16, its forward in float64"),
    }
    for name, (values, how) in goldens.items():
        entries = {"how": how, **{key: as_list(value) for key, value in values.items()}}
        # One key a line; Python's float repr reads back to the same double.
        text = "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in entries.items()) + "\n}\n"
        (OUT / "golden").mkdir(parents=True, exist_ok=True)
        (OUT / "golden" / f"{name}.json").write_text(text)


if __name__ == "__main__":
    main()
