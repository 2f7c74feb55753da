"""The half-precision goldens of golden_half/: every bundled input of data/ computed by PyTorch in float16
and in bfloat16, as docs/precision.md models a half run. make_golden.py writes them with half_golden below.

Every input is rounded to the half type once (numpy's float16 conversion, PyTorch's bfloat16 one, each
checked against the nearest value with exact fractions); every matrix product of the half values is summed
in float32 and rounded once; the scale multiplies as a float32 number; the mask is -inf; the softmax runs in
float32 and is cast back. Rows with nothing to attend get the zero policy of docs/input-format.md.
"""

import json
import math
import pathlib
import sys

import numpy
import torch
import torch.nn.functional as F

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from golden_common import DT, allowed, empty_rows  # noqa: E402  (float64, the masks; it sets one thread, deterministic)

DATA_DIR = HERE.parent.parent / "data"
HALF_DIR = HERE / "golden_half"
HALF_TYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def nearest_half(x, h, dt):
    """Checks with exact fractions that h (a float16 or bfloat16 tensor) holds x's values (float64) rounded
    to nearest, ties to even: no other value of the type is nearer. Stops the script if not."""
    from fractions import Fraction
    bits = h.view(torch.int16).to(torch.int64) & 0xFFFF
    for xv, b in zip(x.flatten().tolist(), bits.flatten().tolist()):
        here = torch.tensor([b if b < 0x8000 else b - 0x10000], dtype=torch.int16).view(dt).item()
        for nb in (b - 1, b + 1):
            if nb < 0 or nb > 0xFFFF or (nb & 0x7FFF) >= (0x7C00 if dt == torch.float16 else 0x7F80):
                continue
            there = torch.tensor([nb if nb < 0x8000 else nb - 0x10000], dtype=torch.int16).view(dt).item()
            d_here, d_there = abs(Fraction(xv) - Fraction(here)), abs(Fraction(xv) - Fraction(there))
            if d_there < d_here or (d_there == d_here and b % 2 == 1):
                raise AssertionError(f"{xv} rounds to {here} in {dt}, but {there} is nearer or even")


def to_half(x, dt):
    """float64 -> the half type, one rounding to nearest even: numpy's float16 conversion, or PyTorch's
    bfloat16 one, each checked by nearest_half."""
    h = torch.from_numpy(x.numpy().astype(numpy.float16)) if dt == torch.float16 else x.to(dt)
    nearest_half(x, h, dt)
    return h


def half_linear(x, W, b, dt):
    """F.linear as a half run computes it: the products of the half values summed in float32 (with the bias)
    and rounded once to the half type, as a GPU's half matmul with float32 accumulation does. Not PyTorch's
    own CPU kernels in the half type: torch 1.13 has no float16 matmul on the CPU, and its bfloat16 one rounds
    each product to bfloat16 (data/bert_bias.json's score [0, 2, 4]: 0.10009765625·-0.25 + 0.75·0.69921875
    = 0.49939 exactly, 0.5 rounded once, 0.498046875 from torch's bfloat16 matmul)."""
    return F.linear(x.float(), W.float(), None if b is None else b.float()).to(dt)


def half_matmul(a, b, dt):
    """a @ b summed in float32 and rounded once to the half type (half_linear says why)."""
    return (a.float() @ b.float()).to(dt)


def read_input(doc):
    """A bundled input (docs/input-format.md) as float64 tensors: X and C (B, n|m, width), weights out × in
    (PyTorch's storage), biases, heads, scale and the (B, n, m) allowed mask."""
    X = torch.tensor(doc["X"], dtype=DT)
    batched = X.dim() == 3
    if not batched:
        X = X.unsqueeze(0)
    C = X
    if "context" in doc:
        C = torch.tensor(doc["context"]["X"], dtype=DT)
        if C.dim() == 2:
            C = C.unsqueeze(0).expand(X.shape[0], -1, -1)
    out_in = doc.get("layout", "in_out") == "out_in"

    def weight(key):
        if key not in doc:
            return None
        W = torch.tensor(doc[key], dtype=DT)
        return W if out_in else W.t()

    def bias(key):
        return torch.tensor(doc[key], dtype=DT) if key in doc else None

    h = doc.get("n_heads", 1)
    g = doc.get("n_kv_heads", h)
    Wq = weight("W_q")
    d_k = Wq.shape[0] // h
    scale = doc.get("scale", 1.0 / math.sqrt(d_k))
    allow = allowed(doc.get("mask"), X.shape[0], X.shape[1], C.shape[1])
    return dict(X=X, C=C, Wq=Wq, Wk=weight("W_k"), Wv=weight("W_v"), Wo=weight("W_o"), bq=bias("b_q"),
                bk=bias("b_k"), bv=bias("b_v"), bo=bias("b_o"), h=h, g=g, scale=scale, allow=allow,
                batched=batched)


def half_attention(i, dt):
    """The steps of attention as a half run stores them (docs/precision.md). Returns q, k, v, scores,
    scaled, weights, head_outputs and output, each (B, ...) in float64 (exact: every value is the half
    type's), with the zero policy in rows that have nothing to attend."""
    r = {key: (to_half(v, dt) if isinstance(v, torch.Tensor) and v.dtype == DT else v) for key, v in i.items()}
    X, C, h, g = r["X"], r["C"], r["h"], r["g"]
    B, n, m = X.shape[0], X.shape[1], C.shape[1]
    q = half_linear(X, r["Wq"], r["bq"], dt)  # (B, n, h·d_k)
    k = half_linear(C, r["Wk"], r["bk"], dt)  # (B, m, g·d_k)
    v = half_linear(C, r["Wv"], r["bv"], dt)  # (B, m, g·d_v)
    d_k, d_v = q.shape[-1] // h, v.shape[-1] // g
    Qh = q.view(B, n, h, d_k).transpose(1, 2)
    Kh = k.view(B, m, g, d_k).transpose(1, 2).repeat_interleave(h // g, dim=1)
    Vh = v.view(B, m, g, d_v).transpose(1, 2).repeat_interleave(h // g, dim=1)
    S = half_matmul(Qh, Kh.transpose(-1, -2), dt)  # (B, h, n, m)
    # the scale is a float32 number (a Python float times a float32 tensor), the product rounded once
    scaled = (S.float() * i["scale"]).to(dt)
    masked = scaled.masked_fill(~i["allow"].unsqueeze(1), float("-inf"))
    A = torch.softmax(masked, dim=-1, dtype=torch.float32).to(dt)
    empty = empty_rows(i["allow"])  # (B, n)
    A = A.masked_fill(empty.view(B, 1, n, 1), 0.0)  # NaN rows -> the zero policy
    O = half_matmul(A, Vh, dt)  # (B, h, n, d_v); an empty row's zero weights give a zero output
    concat = O.transpose(1, 2).reshape(B, n, h * d_v)
    Y = half_linear(concat, r["Wo"], r["bo"], dt) if r["Wo"] is not None else concat
    steps = {"q": q, "k": k, "v": v, "scores": S, "scaled": scaled, "weights": A, "head_outputs": O, "output": Y}
    for name, t in steps.items():
        assert t.dtype == dt and not torch.isnan(t).any(), name
    return {name: t.to(DT) for name, t in steps.items()}


def half_golden(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    inputs = read_input(doc)

    def sq(t):
        return t.tolist() if inputs["batched"] else t[0].tolist()

    expected = {}
    for name, dt in HALF_TYPES.items():
        expected[name] = {step: sq(t) for step, t in half_attention(inputs, dt).items()}
    how = ("PyTorch on the CPU, as docs/precision.md models a half run: every input rounded to the half type "
           "once (numpy's float16 conversion, PyTorch's bfloat16 one, each checked to be the nearest value with "
           "exact fractions); q/k/v = F.linear and per-head S = Q·Kᵀ on the half values summed in float32 and "
           "rounded once (torch 1.13's CPU has no float16 matmul, and its bfloat16 one rounds every product); "
           "scaled = S · scale in float32, rounded; masked_fill(-inf); torch.softmax(dim=-1, dtype=torch.float32) "
           "cast back; weights · V and F.linear(concat, W_o, b_o) as the projections. Rows with nothing to attend "
           "get the zero policy.")
    return {"name": path.stem, "what": f"data/{path.name} in float16 and bfloat16.", "how": how, "input": doc,
            "expected": expected}
