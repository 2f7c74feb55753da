"""attn-trace's half model, emulated with NumPy: inputs and every stored step rounded to float16 or bfloat16,
products and sums in float32. make_dumps.py prints how far each half dump lies from it, in units in the last
place of the half type.
"""

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from dump_reference import softmax  # noqa: E402  (the softmax with -inf for hidden entries)


def round_half(x, dtype):
    """float32 values rounded to float16 or bfloat16 (to nearest, ties to even), back as float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    kept = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    kept = np.where(np.isinf(x), bits >> 16, kept)
    return (kept << 16).astype(np.uint32).view(np.float32)


def half_model(P, dtype, scale):
    """attn-trace's half trace as docs describe it: rounded inputs and steps, float32 arithmetic. Where
    the scale is rounded is not said; `scale` is the number the scores are multiplied by in float32."""
    def r(x):
        return round_half(x, dtype)

    def inp(a):
        return None if a is None else r(a.astype(np.float32))

    def proj(x, w, b):
        y = np.einsum("bti,io->bto", x, w)
        return r(y if b is None else y + b)

    X, C = inp(P.X), inp(P.C)
    s = {"q": proj(X, inp(P.W_q), inp(P.b_q)), "k": proj(C, inp(P.W_k), inp(P.b_k)),
         "v": proj(C, inp(P.W_v), inp(P.b_v))}
    s["q_heads"] = s["q"].reshape(P.B, P.n, P.h, P.d_k).transpose(0, 2, 1, 3)
    s["k_heads"] = s["k"].reshape(P.B, P.m, P.g, P.d_k).transpose(0, 2, 1, 3)
    s["v_heads"] = s["v"].reshape(P.B, P.m, P.g, P.d_v).transpose(0, 2, 1, 3)
    kv = np.arange(P.h) // (P.h // P.g)
    s["scores"] = r(np.einsum("bhid,bhjd->bhij", s["q_heads"], s["k_heads"][:, kv]))
    s["scaled"] = r(s["scores"] * np.float32(scale))
    s["masked"] = np.where(P.allowed[:, None], s["scaled"], np.float32(-np.inf))
    s["weights"] = r(softmax(s["masked"].astype(np.float32), axis=-1).astype(np.float32))
    s["head_outputs"] = r(np.einsum("bhij,bhjd->bhid", s["weights"], s["v_heads"][:, kv]))
    s["concat"] = s["head_outputs"].transpose(0, 2, 1, 3).reshape(P.B, P.n, P.h * P.d_v)
    s["output"] = proj(s["concat"], inp(P.W_o), inp(P.b_o)) if P.W_o is not None else s["concat"]
    return s


def ordered_bits(x, dtype):
    """Half values as integers that count units in the last place: neighbours differ by 1."""
    x = np.asarray(x, dtype=np.float32)
    bits = (x.astype(np.float16).view(np.uint16) if dtype == "float16" else (x.view(np.uint32) >> 16))
    bits = bits.astype(np.int64)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def ulps(dumped, model, dtype):
    """The largest distance, in units in the last place of the half type, over the finite entries."""
    finite = np.isfinite(model)
    if not finite.any():
        return 0
    return int(np.max(np.abs(ordered_bits(dumped[finite], dtype) - ordered_bits(model[finite], dtype))))
