"""The signature of each planted mistake of make_dumps.py: what its first diverging step must equal when that
mistake, and no other, made the dump (the dumped `scaled` equals the reference's `scores` when the scale was
left out, the dumped `k` equals X·W_kᵀ, and so on). SIGNATURES maps each mistake to its check.
"""

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from dump_reference import allowed, divergence, softmax, tolerance  # noqa: E402  (the mask, softmax, tolerance)


def close(a, b, tol):
    return np.allclose(a, b, rtol=tol, atol=tol)


def sig_no_scale(got, ref, P, case):
    if case["first_step"] == "weights":  # the unscaled scores went through the softmax
        masked = np.where(P.allowed[:, None], ref["scores"], -np.inf)
        assert close(got, softmax(masked, -1), tolerance(case["dtype"]))
    else:
        assert close(got, ref["scores"], tolerance(case["dtype"]))


def sig_double_scale(got, ref, P, case):
    assert close(got, ref["scaled"] * P.scale, tolerance(case["dtype"]))


def sig_k_not_transposed(got, ref, P, case):
    kv = np.arange(P.h) // (P.h // P.g)
    assert close(got, np.einsum("bhid,bhdj->bhij", ref["q_heads"], ref["k_heads"][:, kv]), tolerance(case["dtype"]))


def sig_w_k_transposed(got, ref, P, case):
    k = np.einsum("bti,oi->bto", P.C, P.W_k) + (0 if P.b_k is None else P.b_k)
    assert close(got, k, tolerance(case["dtype"]))


def sig_softmax_query_axis(got, ref, P, case):
    assert close(got, softmax(ref["masked"], -2), tolerance(case["dtype"]))


def sig_mask(expected_allowed):
    def check(got, ref, P, case):
        allow = expected_allowed(P)
        seen = np.broadcast_to(allow[:, None], got.shape)
        assert (np.isfinite(got) == seen).all(), "the dump does not hide what the planted mask hides"
        assert close(got[seen], ref["scaled"][seen], tolerance(case["dtype"]))
    return check


def sig_reshape_heads(got, ref, P, case):
    assert close(got, ref["q"].reshape(P.B, P.h, P.n, P.d_k), tolerance(case["dtype"]))


def sig_large_negative(got, ref, P, case):
    empty = ~P.allowed.any(axis=-1)  # (B, n)
    assert empty.any(), "the input must leave a row with nothing to see"
    rows = np.broadcast_to(empty[:, None, :, None], got.shape)
    assert close(got[~rows], ref["weights"][~rows], tolerance(case["dtype"])), "rows with keys must agree"
    assert close(got[rows], 1.0 / P.m, tolerance(case["dtype"])), "an emptied row must be uniform"


def sig_precision(got, ref, P, case):
    assert divergence("output", got, ref["output"], "float16") is None, "beyond float16 rounding"


SIGNATURES = {
    "no-scale": sig_no_scale, "double-scale": sig_double_scale, "k-not-transposed": sig_k_not_transposed,
    "w_k-transposed": sig_w_k_transposed, "softmax-query-axis": sig_softmax_query_axis,
    "no-mask": sig_mask(lambda P: np.ones_like(P.allowed)),
    "mask-shifted": sig_mask(lambda P: allowed(P.mask, P.B, P.n, P.m, reach=1)),
    "top-left": sig_mask(lambda P: allowed(P.mask, P.B, P.n, P.m, align="top_left")),
    "reshape-heads": sig_reshape_heads, "large-negative": sig_large_negative, "float16-compute": sig_precision,
}
