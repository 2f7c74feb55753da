#!/usr/bin/python3
"""Writes the conformance goldens: attention cases in attn-trace's input format, with the values PyTorch
computes for them in float64.

Run it from anywhere with Debian's Python, which has python3-torch and python3-numpy (a pyenv or venv
`python3` on PATH may not):

    /usr/bin/python3 tests/conformance/make_golden.py

It rewrites tests/conformance/golden/*.json (one file per case, and removes files of cases that no
longer exist). Its output is committed: the C++ test (conformance_test.cpp) reads only the JSON, so CI
needs no Python. Every case draws its numbers from a torch.Generator with its own fixed seed and every
computation is float64 on the CPU in one thread, so running the script twice gives identical files
(README.md says how to check).

Each file is {"name", "what", "how", "input", "expected"}:
  input     a document of docs' docs/input-format.md (shapes, layout, masks, GQA, context, batch)
  expected  q: n × (h·d_k), k: m × (g·d_k), v: m × (g·d_v), weights: h × n × m, output: n × d_out,
            each with a leading batch axis when X is a batch; floats written with repr() (the shortest
            text that reads back as the same double, at most 17 significant digits)

Expected values come from torch.nn.MultiheadAttention wherever it applies (equal head widths
d_k = d_v = d_model / h, h = g, the default scale, an output projection of d_model), and from plain
tensor ops otherwise (GQA/MQA by repeat_interleave, d_v != d_k, custom scales, no W_o, ...). For every
MHA case the plain-ops path is computed too and must agree to 1e-13, so the plain path is itself checked
against PyTorch's module.

It also rewrites tests/conformance/golden_half/*.json: every bundled input of data/ computed by PyTorch in
float16 and in bfloat16 as docs/precision.md models a half run (half_golden.py): inputs rounded to the
half type, products and sums in float32, every stored step rounded. The masks and the JSON writer are
golden_common.py's.

PyTorch's math path gives NaN for a query row that the mask leaves nothing to attend. docs/input-format.md
says such a row gets all-zero weights and an all-zero head output (so its output is b_o, or zero); the
goldens record that zero policy for those rows (their "how" says which rows), after checking that
PyTorch's NaN rows are exactly the rows the mask empties.
"""

import math
import pathlib
import sys

import numpy  # noqa: F401  (python3-torch needs it; imported first so a missing package is named plainly)
import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_common import DT, allowed, empty_rows, to_text  # noqa: E402  (it also sets one thread, deterministic)
import half_golden  # noqa: E402  (half_golden, DATA_DIR, HALF_DIR: the goldens of golden_half/)

OUT_DIR = pathlib.Path(__file__).resolve().parent / "golden"


# --------------------------------------------------------------------------------------- random data

def uniform(gen, *shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, generator=gen, dtype=DT) * (hi - lo) + lo


def weight(gen, d_in, d_out):
    """A weight in PyTorch's storage, out × in (nn.Linear), scaled by 1/sqrt(fan-in)."""
    return uniform(gen, d_out, d_in) / math.sqrt(d_in)


def flags(gen, *shape, p_true=0.6):
    return torch.rand(*shape, generator=gen, dtype=DT) < p_true


# ---------------------------------------------------------------------------------------------- masks


def mask_text(mask):
    """How the plain path masks, in words."""
    kind = mask if isinstance(mask, str) else mask["type"] if mask is not None else "none"
    align = "top_left" if isinstance(mask, str) or mask is None else mask.get("align", "top_left")
    o = "o = m - n" if align == "bottom_right" else "o = 0"
    if kind == "causal":
        return f"masked_fill(-inf) unless j <= i + o ({align}, {o})"
    if kind == "sliding_window":
        return f"masked_fill(-inf) unless i + o - w < j <= i + o (w = {mask['window']}, {align}, {o})"
    return {"none": "no mask", "padding": "masked_fill(-inf) where keep[j] == 0",
            "custom": "masked_fill(-inf) where allow[i][j] is false"}[kind]


def describe_empty(empty, batched):
    rows = [(b, i) for b in range(empty.shape[0]) for i in range(empty.shape[1]) if empty[b, i]]
    if batched:
        return ", ".join(f"item {b} query {i}" for b, i in rows)
    return ", ".join(f"query {i}" for _, i in rows)


# ----------------------------------------------------------------------------------------- the paths

def plain_attention(X, C, Wq, Wk, Wv, Wo, bq, bk, bv, bo, h, g, scale, allow):
    """Attention from plain tensor ops, float64. Weights are out × in. X (B, n, d_model), C (B, m, d_ctx).
    Returns q, k, v, the weights (B, h, n, m; NaN in empty rows, as PyTorch's math path gives) and the
    value heads (B, h, m, d_v) for finish_plain."""
    B, n, _ = X.shape
    m = C.shape[1]
    q = F.linear(X, Wq, bq)  # (B, n, h·d_k)
    k = F.linear(C, Wk, bk)  # (B, m, g·d_k)
    v = F.linear(C, Wv, bv)  # (B, m, g·d_v)
    d_k = q.shape[-1] // h
    d_v = v.shape[-1] // g
    Qh = q.view(B, n, h, d_k).transpose(1, 2)  # (B, h, n, d_k)
    # query head i reads kv head i / (h/g): repeat_interleave copies each kv head h/g times in a row
    Kh = k.view(B, m, g, d_k).transpose(1, 2).repeat_interleave(h // g, dim=1)  # (B, h, m, d_k)
    Vh = v.view(B, m, g, d_v).transpose(1, 2).repeat_interleave(h // g, dim=1)  # (B, h, m, d_v)
    S = torch.matmul(Qh, Kh.transpose(-1, -2)) * scale
    S = S.masked_fill(~allow.unsqueeze(1), float("-inf"))
    A = torch.softmax(S, dim=-1)
    return q, k, v, A, Vh


def finish_plain(A, Vh, Wo, bo):
    """output = concat(A · V per head) · W_oᵀ + b_o, or the concatenation without W_o."""
    B, h, n, _ = A.shape
    O = torch.matmul(A, Vh).transpose(1, 2).reshape(B, n, h * Vh.shape[-1])  # concat(heads)
    return F.linear(O, Wo, bo) if Wo is not None else O


def zero_policy(weights, output, empty, bo, d_out):
    """Rows with nothing to attend: zero weights, zero head output, so output = b_o (or 0)."""
    nan_rows = torch.isnan(weights).any(dim=-1).any(dim=1)  # (B, n)
    if not torch.equal(nan_rows, empty):
        raise AssertionError(f"PyTorch's NaN rows {nan_rows.tolist()} are not the empty rows {empty.tolist()}")
    if torch.isnan(output).any(dim=-1).ne(empty).any():
        raise AssertionError("NaN outputs outside the empty rows")
    weights = weights.clone()
    output = output.clone()
    weights[empty.unsqueeze(1).expand_as(weights[..., 0])] = 0.0
    fill = bo if bo is not None else torch.zeros(d_out, dtype=DT)
    output[empty] = fill
    return weights, output


# ------------------------------------------------------------------------------------------- a case

def make_case(name, what, seed, *, n, d_model, h=1, g=None, d_k=None, d_v=None, B=None, m=None, d_context=None,
              d_out=None, w_o=True, biases=False, layout="in_out", write_layout=True, mask=None, scale=None,
              tokens=False, description=None, x_range=1.0, use_mha=False):
    """Draws a case with `seed`, computes it with PyTorch, returns the golden document.

    B: None for a single sequence, else the batch size. m / d_context: set for cross-attention.
    mask: the input's mask value (None: no key); a callable gets the generator and (B, n, m) and
    returns it, for masks drawn at random. use_mha: compute with nn.MultiheadAttention."""
    gen = torch.Generator().manual_seed(seed)
    g = h if g is None else g
    d_k = d_model // h if d_k is None else d_k
    d_v = d_k if d_v is None else d_v
    cross = m is not None
    m = n if m is None else m
    d_context = (d_model if d_context is None else d_context) if cross else d_model
    batched = B is not None
    Bn = B if batched else 1

    X = uniform(gen, Bn, n, d_model, lo=-x_range, hi=x_range)
    C = uniform(gen, Bn, m, d_context, lo=-x_range, hi=x_range) if cross else X
    Wq, Wk, Wv = weight(gen, d_model, h * d_k), weight(gen, d_context, g * d_k), weight(gen, d_context, g * d_v)
    if w_o:
        d_out = d_model if d_out is None else d_out
        Wo = weight(gen, h * d_v, d_out)
    else:
        d_out = h * d_v
        Wo = None
    # biases: True (all of them), False (none) or the names of the ones to keep, e.g. ("b_v", "b_o")
    bq = bk = bv = bo = None
    if biases:
        bq, bk, bv = uniform(gen, h * d_k), uniform(gen, g * d_k), uniform(gen, g * d_v)
        bo = uniform(gen, d_out) if w_o else None
        if biases is not True:
            bq, bk, bv, bo = (b if key in biases else None for key, b in zip(("b_q", "b_k", "b_v", "b_o"), (bq, bk, bv, bo)))
    if callable(mask):
        mask = mask(gen, Bn, n, m)
    allow = allowed(mask, Bn, n, m)
    empty = empty_rows(allow)
    the_scale = 1.0 / math.sqrt(d_k) if scale is None else scale

    # ---- the input document
    def sq(t):  # drop the batch axis of a single sequence
        return t.tolist() if batched else t[0].tolist()

    def w_file(W):  # in_out stores Wᵀ (d_in × d_out); out_in stores PyTorch's out × in
        return W.tolist() if layout == "out_in" else W.t().tolist()

    doc = {}
    if description is not None:
        doc["description"] = description
    if tokens:
        labels = [f"q{i}" for i in range(n)]
        doc["tokens"] = [labels for _ in range(Bn)] if batched else labels
    doc["X"] = sq(X)
    doc["W_q"], doc["W_k"], doc["W_v"] = w_file(Wq), w_file(Wk), w_file(Wv)
    if w_o:
        doc["W_o"] = w_file(Wo)
    for key, b in (("b_q", bq), ("b_k", bk), ("b_v", bv), ("b_o", bo)):
        if b is not None:
            doc[key] = b.tolist()
    if h != 1 or g != h:
        doc["n_heads"] = h
    if g != h:
        doc["n_kv_heads"] = g
    if scale is not None:
        doc["scale"] = scale
    if mask is not None:
        doc["mask"] = mask
    if write_layout or layout != "in_out":
        doc["layout"] = layout
    if cross:
        ctx = {"X": sq(C)}
        if tokens:
            labels = [f"k{j}" for j in range(m)]
            ctx["tokens"] = [labels for _ in range(Bn)] if batched else labels
        doc["context"] = ctx

    # ---- plain tensor ops (always: for MHA cases, a cross-check of this path)
    q, k, v, A, Vh = plain_attention(X, C, Wq, Wk, Wv, Wo, bq, bk, bv, bo, h, g, the_scale, allow)
    Y = finish_plain(A, Vh, Wo, bo)
    how = ("plain torch ops in float64: q/k/v = F.linear({}, W{}); per-head S = Q·Kᵀ · scale, scale = {!r}{}{}; "
           "{}; torch.softmax(dim=-1); weights · V; concat{}").format(
               "context" if cross else "X", ", b" if biases is True else ", b or None" if biases else "", the_scale,
               " (given)" if scale is not None else " (1/sqrt(d_k))",
               f"; K/V heads repeat_interleave'd {h // g} times (query head i reads kv head i / {h // g})" if g != h else "",
               mask_text(mask), "; F.linear(·, W_o, b_o)" if bo is not None else "; F.linear(·, W_o)" if w_o else " (no W_o)")

    if use_mha:
        assert w_o and h == g and d_k == d_v and h * d_k == d_model and d_out == d_model and scale is None
        assert biases in (True, False)
        kdim = d_context if d_context != d_model else None
        torch.manual_seed(seed)  # MHA's own initialisation, overwritten below
        mha = torch.nn.MultiheadAttention(d_model, h, bias=biases, kdim=kdim, vdim=kdim, batch_first=True, dtype=DT)
        # train mode with dropout 0: the same numbers as eval, but never the fused fast path
        # (torch._native_multi_head_attention), which 1.13 takes for self-attention in eval mode and which
        # refuses bias=False; so every MHA case goes through F.multi_head_attention_forward
        mha.train()
        with torch.no_grad():
            if mha._qkv_same_embed_dim:
                mha.in_proj_weight.copy_(torch.cat([Wq, Wk, Wv]))
            else:
                mha.q_proj_weight.copy_(Wq)
                mha.k_proj_weight.copy_(Wk)
                mha.v_proj_weight.copy_(Wv)
            if biases:
                mha.in_proj_bias.copy_(torch.cat([bq, bk, bv]))
                mha.out_proj.bias.copy_(bo)
            mha.out_proj.weight.copy_(Wo)
        E = d_model
        if mha._qkv_same_embed_dim:
            Wq_, Wk_, Wv_ = mha.in_proj_weight.chunk(3)
        else:
            Wq_, Wk_, Wv_ = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        bq_, bk_, bv_ = mha.in_proj_bias.chunk(3) if biases else (None, None, None)
        with torch.no_grad():
            q_m, k_m, v_m = F.linear(X, Wq_, bq_), F.linear(C, Wk_, bk_), F.linear(C, Wv_, bv_)
            kind = mask if isinstance(mask, str) or mask is None else mask["type"]
            attn_mask = key_padding_mask = None
            if kind == "padding":
                key_padding_mask = ~torch.tensor(mask["keep"], dtype=torch.bool).view(-1, m).expand(Bn, m)
                mask_how = "key_padding_mask = ~keep (True = padded)"
            elif kind == "custom" and torch.tensor(mask["allow"]).dim() == 3:
                # one custom mask per item: MHA's 3-D attn_mask is (B·h, n, m), item-major
                attn_mask = ~allow.repeat_interleave(h, dim=0)
                mask_how = "attn_mask = ~allowed per item, a (B·h, n, m) bool mask (True = masked)"
            elif kind not in (None, "none"):
                attn_mask = ~allow[0]
                mask_how = "attn_mask = ~allowed, an (n, m) bool mask (True = masked)"
            else:
                mask_how = "attn_mask=None"
            Y_m, A_m = mha(X, C, C, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=True,
                           average_attn_weights=False)
        for label, ours, theirs in (("q", q, q_m), ("k", k, k_m), ("v", v, v_m), ("weights", A, A_m), ("output", Y, Y_m)):
            if not torch.allclose(ours, theirs, rtol=1e-13, atol=1e-13, equal_nan=True):
                raise AssertionError(f"{name}: plain ops and MultiheadAttention disagree on {label}")
        q, k, v, A, Y = q_m, k_m, v_m, A_m, Y_m
        how = ("torch.nn.MultiheadAttention(embed_dim={}, num_heads={}, bias={}{}, dropout=0, batch_first=True, "
               "float64; train mode, so F.multi_head_attention_forward) with {} and out_proj.weight = W_o{} "
               "(PyTorch's out × in storage); weights and output = mha(X, C, C, {}, need_weights=True, "
               "average_attn_weights=False), C = {}; q/k/v = F.linear(X or C, those weights{}); "
               "the plain-ops path agrees to 1e-13").format(
                   E, h, biases, f", kdim=vdim={kdim}" if kdim else "",
                   "in_proj_weight = cat(W_q, W_k, W_v)" if kdim is None else "q_proj_weight, k_proj_weight, v_proj_weight = W_q, W_k, W_v",
                   ", in_proj_bias = cat(b_q, b_k, b_v), out_proj.bias = b_o" if biases else "",
                   mask_how, "the context" if cross else "X", ", in_proj_bias chunks" if biases else "")

    if empty.any():
        A, Y = zero_policy(A, Y, empty, bo, d_out)
        how += (f". PyTorch gives NaN for the rows with nothing to attend ({describe_empty(empty, batched)}); "
                "there the golden records docs/input-format.md's zero policy instead: zero weights, zero head output, "
                + ("output = b_o" if bo is not None else "output = 0"))
    else:
        assert not torch.isnan(A).any() and not torch.isnan(Y).any()

    expected = {"q": sq(q.detach()), "k": sq(k.detach()), "v": sq(v.detach()), "weights": sq(A.detach()),
                "output": sq(Y.detach())}
    return {"name": name, "what": what, "how": how, "input": doc, "expected": expected}


# ------------------------------------------------------------------------------------- random masks

def custom_mask(empty_row=None, per_item=False, empty_item_row=None):
    """A custom mask drawn at random; `empty_row` (or (item, row) for a batch) is all false."""
    def draw(gen, B, n, m):
        a = flags(gen, B if per_item else 1, n, m)
        for b in range(a.shape[0]):
            for i in range(n):
                if not a[b, i].any():
                    a[b, i, 0] = True  # only the chosen rows are empty
        if empty_row is not None:
            a[:, empty_row, :] = False
        if empty_item_row is not None:
            a[empty_item_row[0], empty_item_row[1], :] = False
        return {"type": "custom", "allow": a.tolist() if per_item else a[0].tolist()}
    return draw


def padding_mask(per_item=True, hide_item=None, batched=True):
    """A padding mask drawn at random, each list keeping at least its first key unless it is `hide_item`."""
    def draw(gen, B, n, m):
        keep = flags(gen, B if per_item else 1, m, p_true=0.7)
        keep[:, 0] = True
        if hide_item is not None:
            keep[hide_item, :] = False
        k = keep.to(torch.int64).tolist()
        return {"type": "padding", "keep": k if (per_item and batched) else k[0]}
    return draw


# ------------------------------------------------------------------------------------------- the cases

def cases():
    C = []
    add = C.append

    # -- nn.MultiheadAttention
    add(make_case("mha_self_one_head", "Self-attention with one head, biases and W_o, weights as a state_dict stores them.",
                  101, n=5, d_model=4, h=1, biases=True, layout="out_in", use_mha=True, tokens=True,
                  description="one head, out_in"))
    add(make_case("mha_self_four_heads", "Four heads of width 2 over d_model 8, with biases and W_o.",
                  102, n=6, d_model=8, h=4, biases=True, layout="out_in", use_mha=True))
    add(make_case("mha_self_in_out_layout", "Two heads with the weights transposed into the math convention (in_out).",
                  103, n=7, d_model=6, h=2, biases=True, layout="in_out", use_mha=True))
    add(make_case("mha_self_no_bias", "Two heads, W_o, and no biases at all (bias=False).",
                  104, n=5, d_model=8, h=2, biases=False, layout="out_in", use_mha=True, write_layout=True))
    add(make_case("mha_causal_string", "A causal mask given as the string \"causal\".",
                  105, n=6, d_model=8, h=2, biases=True, layout="out_in", mask="causal", use_mha=True))
    add(make_case("mha_sliding_window", "A sliding window of 3 keys (itself and the two before it), two heads.",
                  106, n=9, d_model=6, h=2, biases=True, mask={"type": "sliding_window", "window": 3}, use_mha=True))
    add(make_case("mha_cross_same_width", "Cross-attention: 4 queries read 7 keys of a context as wide as X.",
                  107, n=4, m=7, d_model=8, h=2, biases=True, layout="out_in", use_mha=True, tokens=True))
    add(make_case("mha_cross_kdim", "Cross-attention from a context of width 5 into d_model 6 (MHA's kdim = vdim = 5).",
                  108, n=5, m=6, d_model=6, d_context=5, h=3, biases=True, layout="out_in", use_mha=True))
    add(make_case("mha_cross_causal_top_left", "Causal cross-attention, n = 4 < m = 7, top_left alignment given explicitly.",
                  109, n=4, m=7, d_model=4, h=2, biases=True, mask={"type": "causal", "align": "top_left"}, use_mha=True))
    add(make_case("mha_batch_padding", "A batch of 3 with a padding mask per item (MHA's key_padding_mask).",
                  110, B=3, n=5, d_model=8, h=2, biases=True, layout="out_in", mask=padding_mask(), use_mha=True,
                  tokens=True))
    add(make_case("mha_batch_padding_hides_item", "A batch of 3 whose second item's padding hides every key: zero policy.",
                  111, B=3, n=4, d_model=6, h=3, biases=True, layout="out_in", mask=padding_mask(hide_item=1),
                  use_mha=True))
    add(make_case("mha_custom_empty_row", "A custom mask with an all-false row (query 2): zero weights, output b_o.",
                  112, n=6, d_model=8, h=2, biases=True, layout="out_in", mask=custom_mask(empty_row=2), use_mha=True))
    add(make_case("mha_batch_causal", "A batch of 2 under one causal mask, four heads.",
                  113, B=2, n=6, d_model=8, h=4, biases=True, mask={"type": "causal"}, use_mha=True))
    add(make_case("mha_batch_cross_padding", "Batched cross-attention with the context padded per item.",
                  114, B=2, n=3, m=6, d_model=4, h=2, biases=True, layout="out_in", mask=padding_mask(), use_mha=True))
    add(make_case("mha_batch_custom_per_item", "A batch of 2 with its own custom mask per item (MHA's 3-D attn_mask).",
                  115, B=2, n=5, d_model=4, h=2, biases=True, layout="out_in", mask=custom_mask(per_item=True),
                  use_mha=True))

    # -- plain tensor ops
    add(the_cat_sat())
    add(make_case("gqa_four_heads_two_kv", "GQA: 4 query heads share 2 key/value heads, biases and W_o.",
                  201, n=6, d_model=8, h=4, g=2, d_k=3, d_v=3, biases=True, layout="out_in"))
    add(make_case("gqa_six_heads_three_kv_causal", "GQA with 6 query heads over 3 kv heads, causal, no W_o.",
                  202, n=7, d_model=5, h=6, g=3, d_k=2, d_v=2, w_o=False, mask="causal"))
    add(make_case("mqa_one_kv_head", "MQA: 4 query heads read one key/value head, weights out_in.",
                  203, n=5, d_model=6, h=4, g=1, d_k=3, d_v=3, biases=True, layout="out_in"))
    add(make_case("cross_other_length_and_width", "Cross-attention: 3 queries of width 5 read 9 keys of width 7, d_v != d_k.",
                  204, n=3, m=9, d_model=5, d_context=7, h=2, d_k=3, d_v=4, biases=True, d_out=6, tokens=True))
    add(make_case("sliding_window_two", "A sliding window of 2 over 9 tokens, two heads, no W_o.",
                  205, n=9, d_model=4, h=2, d_k=3, d_v=2, w_o=False, mask={"type": "sliding_window", "window": 2}))
    add(make_case("sliding_window_one", "A sliding window of 1: every query attends only itself (weights are the identity).",
                  206, n=5, d_model=4, h=1, d_k=4, biases=True, mask={"type": "sliding_window", "window": 1}))
    add(make_case("sliding_window_bottom_right", "A sliding window of 3 aligned bottom_right: 4 queries at the end of 9 keys.",
                  207, n=4, m=9, d_model=6, h=2, d_k=2, d_v=3, biases=True, layout="out_in",
                  mask={"type": "sliding_window", "window": 3, "align": "bottom_right"}))
    add(make_case("causal_bottom_right_kv_cache", "Causal bottom_right (a KV cache): 3 new queries over 8 keys, GQA 4/2.",
                  208, n=3, m=8, d_model=8, h=4, g=2, d_k=2, d_v=2, biases=True,
                  mask={"type": "causal", "align": "bottom_right"}))
    add(make_case("causal_bottom_right_more_queries", "Causal bottom_right with n = 6 > m = 4: queries 0 and 1 see no key (zero policy).",
                  209, n=6, m=4, d_model=4, h=2, d_k=2, d_v=2, biases=True,
                  mask={"type": "causal", "align": "bottom_right"}))
    add(make_case("custom_scale", "A custom score scale of 0.3 instead of 1/sqrt(d_k), two heads.",
                  210, n=6, d_model=6, h=2, d_k=3, d_v=3, biases=True, scale=0.3))
    add(make_case("scale_one_wide_inputs", "Scale 1 and inputs in [-3, 3]: sharp, nearly one-hot weights.",
                  211, n=5, d_model=4, h=1, d_k=4, d_v=4, scale=1.0, x_range=3.0, layout="out_in"))
    add(make_case("dv_differs_from_dk", "d_k = 2, d_v = 5, three heads, W_o to a width (7) other than d_model.",
                  212, n=5, d_model=6, h=3, d_k=2, d_v=5, d_out=7, biases=True, layout="out_in"))
    add(make_case("single_head_no_wo_in_out", "One head, no W_o, no biases, the default in_out layout left implicit.",
                  213, n=8, d_model=5, h=1, d_k=3, d_v=4, w_o=False, write_layout=False))
    add(make_case("custom_batch_empty_row_no_wo", "A batch of 2 with custom masks per item, item 1 query 3 all false, no W_o: output 0 there.",
                  214, B=2, n=5, d_model=4, h=2, d_k=2, d_v=2, w_o=False,
                  mask=custom_mask(per_item=True, empty_item_row=(1, 3))))
    add(make_case("batch_padding_shared", "A batch of 3 sharing one padding list, GQA 2/1.",
                  215, B=3, n=6, d_model=4, h=2, g=1, d_k=2, d_v=3, biases=True, mask=padding_mask(per_item=False)))
    add(make_case("batch_cross_gqa_window_bottom_right", "A batch of 2, cross-attention, GQA 4/2, sliding window 2 bottom_right, out_in.",
                  216, B=2, n=3, m=7, d_model=6, d_context=4, h=4, g=2, d_k=2, d_v=2, biases=True, layout="out_in",
                  mask={"type": "sliding_window", "window": 2, "align": "bottom_right"}, tokens=True))
    add(make_case("custom_shared_batch", "A batch of 2 sharing one custom mask, custom scale 0.5, d_v 3.",
                  217, B=2, n=4, m=6, d_model=4, h=1, d_k=2, d_v=3, scale=0.5, mask=custom_mask()))
    add(make_case("mask_none_explicit", "The mask \"none\" written out, 12 tokens of width 16, 4 heads of 4.",
                  218, n=12, d_model=16, h=4, d_k=4, d_v=4, biases=True, mask="none"))
    add(make_case("causal_top_left_more_queries", "Causal top_left cross-attention with n = 7 > m = 4: later rows see every key.",
                  219, n=7, m=4, d_model=4, d_context=3, h=2, d_k=2, d_v=2, mask={"type": "causal"}))
    add(make_case("batch_mqa_causal_bottom_right", "A batch of 3, MQA 3/1, causal bottom_right over a longer context, no W_o.",
                  220, B=3, n=2, m=5, d_model=3, h=3, g=1, d_k=2, d_v=2, w_o=False, biases=True,
                  mask={"type": "causal", "align": "bottom_right"}))
    add(make_case("mha_padding_single_sequence", "A single sequence with a padding mask hiding its last keys.",
                  116, n=7, d_model=6, h=2, biases=True, layout="out_in", use_mha=True,
                  mask={"type": "padding", "keep": [1, 1, 0, 1, 1, 0, 0]}))
    add(make_case("some_biases_only", "Only b_v and b_o given (no b_q, no b_k), GQA 4/2, d_v 3.",
                  221, n=6, d_model=5, h=4, g=2, d_k=2, d_v=3, biases=("b_v", "b_o"), d_out=5, mask="causal"))
    return C


def the_cat_sat():
    """docs/input-format.md's worked example, with its own integer numbers."""
    doc = {"description": "The cat sat: d_model = 4, d_k = 2, one head", "tokens": ["The", "cat", "sat"],
           "X": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
           "W_q": [[1, 0], [0, 1], [1, 0], [0, 1]],
           "W_k": [[0, 1], [1, 0], [0, 1], [1, 0]],
           "W_v": [[1, 0], [0, 1], [0, 1], [1, 0]]}
    X = torch.tensor(doc["X"], dtype=DT).unsqueeze(0)
    W = {key: torch.tensor(doc[key], dtype=DT).t() for key in ("W_q", "W_k", "W_v")}  # in_out -> out × in
    allow = allowed(None, 1, 3, 3)
    q, k, v, A, Vh = plain_attention(X, X, W["W_q"], W["W_k"], W["W_v"], None, None, None, None, None, 1, 1,
                                     1.0 / math.sqrt(2.0), allow)
    Y = finish_plain(A, Vh, None, None)
    return {"name": "the_cat_sat", "what": "The worked example of docs/input-format.md: one head of width 2, no W_o.",
            "how": "plain torch ops in float64: q/k/v = F.linear(X, Wᵀ); S = Q·Kᵀ / sqrt(2); torch.softmax; weights · V (no W_o)",
            "input": doc,
            "expected": {"q": q[0].tolist(), "k": k[0].tolist(), "v": v[0].tolist(), "weights": A[0].tolist(),
                         "output": Y[0].tolist()}}


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    written = set()
    all_cases = cases()
    names = [c["name"] for c in all_cases]
    if len(set(names)) != len(names):
        sys.exit("make_golden.py: two cases share a name")
    for case in all_cases:
        path = OUT_DIR / f"{case['name']}.json"
        path.write_text(to_text(case) + "\n", encoding="utf-8")
        written.add(path.name)
    for stale in OUT_DIR.glob("*.json"):
        if stale.name not in written:
            stale.unlink()
    print(f"wrote {len(all_cases)} golden cases to {OUT_DIR}")
    half_golden.HALF_DIR.mkdir(parents=True, exist_ok=True)
    half_written = set()
    for path in sorted(half_golden.DATA_DIR.glob("*.json")):
        out = half_golden.HALF_DIR / path.name
        out.write_text(to_text(half_golden.half_golden(path)) + "\n", encoding="utf-8")
        half_written.add(out.name)
    for stale in half_golden.HALF_DIR.glob("*.json"):
        if stale.name not in half_written:
            stale.unlink()
    print(f"wrote {len(half_written)} half-precision golden cases to {half_golden.HALF_DIR}")


if __name__ == "__main__":
    main()
