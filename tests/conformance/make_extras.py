#!/usr/bin/python3
"""Writes the goldens of soft-capping, attention sinks and dropout: attention inputs with the keys "softcap",
"sinks" and "dropout", an upstream gradient dY, every forward step and every gradient, computed by PyTorch
autograd in float64.

Run it from anywhere with Debian's Python, which has python3-torch and python3-numpy:

    /usr/bin/python3 tests/conformance/make_extras.py

It rewrites tests/conformance/golden_extras/*.json and removes the files of cases that no longer exist.

The three keys, in the order of the forward steps (q, k, v, q_heads, k_heads, v_heads, q_rot, k_rot, scores,
scaled, capped, bias, masked, weights, dropped, head_outputs, concat, output):
- "softcap": c > 0. capped = c·tanh(S'/c), right after scaled and before ALiBi's bias and the mask, as Gemma 2
  caps its logits. ALiBi's bias is added to the capped scores, then the mask, then the softmax.
- "sinks": one logit per query head, in the space of the masked scores (not scaled, capped or biased). A row
  of head hd: m = max(sink_hd, max_j s_ij), l = exp(sink_hd − m) + Σ_j exp(s_ij − m) (masked keys add 0),
  A_ij = exp(s_ij − m)/l, and the sink's share exp(sink_hd − m)/l is the expected key sink_weights (h × n,
  B × h × n for a batch). The sink has no value, so head_outputs = A·V; a row the mask empties puts all its
  weight on the sink. Here the softmax runs over the row with the sink as one more column (torch.cat) and the
  column is split off again.
- "dropout": {"p", "seed"}. dropped = A ⊙ Z · (1/(1−p)) and head_outputs = dropped·V, where the keep mask Z is
  a pure function of (seed, b, hd, i, j): Philox4x32-10 (Salmon et al., "Parallel random
  numbers: as easy as 1, 2, 3", SC 2011; the Random123 generator), written out in philox.py, with key
  (seed & 0xffffffff, seed >> 32) and counter (j, i, hd, b); the first output word x0 keeps the entry iff
  x0 ≥ floor(p·2^32), an exact integer. Each dropout golden carries Z as "keep_mask" (B × h × n × m, 0/1,
  always with the batch axis). F.dropout cannot be seeded to this mask, so the forward multiplies by Z.

Each file is {name, what, how, dY_seed, input, expected, keep_mask (dropout only)}; expected holds every forward
step that applies, sink_weights with sinks, and every gradient that applies, in this order: d_output,
d_concat, d_head_outputs, d_dropped, d_weights, d_v_heads, d_masked, d_capped, d_scaled, d_scores, d_q_rot,
d_k_rot, d_q_heads, d_k_heads, d_q, d_k, d_v, d_X, d_context, d_W_q … d_W_o, d_b_q … d_b_o, d_sinks. Shapes are
make_backward.py's (no batch axis for a single sequence; parameters' gradients never have one, the weights'
in the file's layout; d_sinks has h numbers, summed over the batch and the queries). The masked step holds
"-inf" (a string, as the trace writes it) at every entry the mask forbids, in empty rows too.

Checks, each of which stops the script when it fails:
- Philox4x32-10 gives Random123's known-answer vectors;
- a NumPy forward and backward written out by hand (the sink softmax with m and l, the softcap's derivative
  1 − tanh²(S'/c), the keep mask, d_sinks = Σ_{b,i} −a_sink·D with D = Σ_j dA_ij·A_ij, ...) gives every
  expected key, forward and backward, to 1e-12·max(1, |value|), and the same "-inf" entries in masked;
- central differences (step 1e-5) on the first, middle and last entry of every leaf, the sinks included,
  agree with autograd to 1e-7·max(1, |value|), except where the largest |S'| or |masked| of an allowed entry
  is 100 or more (as make_backward.py);
- no NaN or infinity anywhere but the masked step's "-inf"; d_output is dY; d_masked is 0 at masked entries
  and in empty rows; every row of weights plus its sink share sums to 1 (a row without a key and without a
  sink sums to 0); with p = 0 the keep mask is all ones, dropped equals weights exactly, and make_backward.py's
  own autograd on the input without "dropout" gives every gradient; a sink whose share underflows to 0 leaves
  its head's weights those of the input without sinks.

The forward with the three keys and its autograd are in extras_model.py, Philox4x32-10 and the keep mask in
philox.py, the NumPy pass in extras_numpy.py; the comparison with the NumPy pass and the central differences
are make_backward.py's.
"""

import json
import math
import pathlib
import sys

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import backward_model  # noqa: E402  (Problem, autograd: make_backward.py's own, for p = 0)
import extras_model  # noqa: E402  (Problem, leaves_of, forward, autograd with the three keys)
import extras_numpy  # noqa: E402  (numpy_pass)
import golden_common  # noqa: E402  (to_text)
import make_backward  # noqa: E402  (draw_dY, describe_empty, disagreement, finite_differences, SEEDS)
import make_golden  # noqa: E402  (make_case, custom_mask; it also sets one thread, deterministic)
import philox  # noqa: E402  (check_philox, PHILOX_KATS, threshold)

DT = torch.float64
OUT_DIR = HERE / "golden_extras"
DATA_DIR = make_backward.DATA_DIR
TOL = make_backward.TOL  # make_backward.py's autograd at p = 0, and heads whose sink underflows
FD_STEP = make_backward.FD_STEP
ROW_SUM_TOL = 1e-14

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

FORWARD = ("q", "k", "v", "q_heads", "k_heads", "v_heads", "q_rot", "k_rot", "scores", "scaled", "capped", "bias",
           "masked", "weights", "sink_weights", "dropped", "head_outputs", "concat", "output")
GRADIENTS = ("d_output", "d_concat", "d_head_outputs", "d_dropped", "d_weights", "d_v_heads", "d_masked",
             "d_capped", "d_scaled", "d_scores", "d_q_rot", "d_k_rot", "d_q_heads", "d_k_heads", "d_q", "d_k", "d_v",
             "d_X", "d_context", "d_W_q", "d_W_k", "d_W_v", "d_W_o", "d_b_q", "d_b_k", "d_b_v", "d_b_o", "d_sinks")
BATCH_FREE = {"d_W_q", "d_W_k", "d_W_v", "d_W_o", "d_b_q", "d_b_k", "d_b_v", "d_b_o", "d_sinks"}


# -------------------------------------------------------------------------------------- the invariants

def check_invariants(name, p, steps, grads, dY):
    for key, x in list(steps.items()) + list(grads.items()):
        bad = ~torch.isfinite(x)
        if key == "masked":
            bad &= p.allow.unsqueeze(1).expand_as(x)  # -inf is the mask's, elsewhere
        if bad.any():
            raise AssertionError(f"{name}: {key} is not finite")
    if not torch.equal(grads["d_output"], dY if p.batched else dY.unsqueeze(0)):
        raise AssertionError(f"{name}: d_output is not dY")
    B, h, n, m = p.B, p.h, p.n, p.m
    allow = p.allow.unsqueeze(1).expand(B, h, n, m)
    empty = p.empty.view(B, 1, n).expand(B, h, n)
    dm = grads["d_masked"]
    if dm[~allow].ne(0).any() or dm[empty].ne(0).any():
        raise AssertionError(f"{name}: d_masked is not 0 at masked entries and in empty rows")
    total = steps["weights"].sum(dim=-1) + (steps["sink_weights"] if p.sinks is not None else 0.0)
    want = torch.where(empty & torch.tensor(p.sinks is None), torch.tensor(0.0, dtype=DT), torch.tensor(1.0, dtype=DT))
    if not (total - want).abs().max() <= ROW_SUM_TOL:
        raise AssertionError(f"{name}: a row of weights (and its sink share) does not sum to 1")
    if p.sinks is not None:
        a_empty = steps["sink_weights"][empty]
        if not torch.equal(a_empty, torch.ones_like(a_empty)) or steps["weights"][empty].ne(0).any():
            raise AssertionError(f"{name}: an empty row does not put all its weight on the sink")
    if p.keep is not None and p.p_drop == 0:
        if not torch.equal(p.keep, torch.ones_like(p.keep)):
            raise AssertionError(f"{name}: p = 0 and the keep mask drops an entry")
        if not torch.equal(steps["dropped"], steps["weights"]):
            raise AssertionError(f"{name}: p = 0 and dropped is not weights")


def check_against_make_backward(name, doc, dY, grads):
    """p = 0: make_backward.py's autograd on the input without "dropout" gives every one of its gradients."""
    plain = {k: v for k, v in doc.items() if k != "dropout"}
    pb = backward_model.Problem(plain)
    theirs, _ = backward_model.autograd(pb, plain, dY)
    worst = 0.0
    for key, want in theirs.items():
        ours = grads[key] if key in BATCH_FREE or key in ("d_X", "d_context") or pb.batched else grads[key][0]
        err = float(((ours - want).abs() / want.abs().clamp(min=1.0)).max())
        if not err <= TOL:
            raise AssertionError(f"{name}: make_backward.py's autograd differs on {key} by {err:.3g}")
        worst = max(worst, err)
    return worst


def check_underflowed_sinks(name, p, doc, steps):
    """A head whose sink share is exactly 0 everywhere has the weights of the input without sinks."""
    heads = [hd for hd in range(p.h) if steps["sink_weights"][:, hd].eq(0).all()]
    if not heads:
        return None
    plain = {k: v for k, v in doc.items() if k != "sinks"}
    with torch.no_grad():
        pp = extras_model.Problem(plain)
        leaves = {k: x.detach() for k, x in extras_model.leaves_of(plain).items()}
        other = extras_model.forward(pp, leaves)["weights"]
    err = float((steps["weights"][:, heads] - other[:, heads]).abs().max())
    if not err <= TOL:
        raise AssertionError(f"{name}: heads {heads} with a sink share of 0 differ from no sinks by {err:.3g}")
    return heads, err


# ---------------------------------------------------------------------------------- one case

def to_json(x):
    """Nested lists; -inf as the string "-inf" (the trace's convention), -0.0 as 0.0."""
    if isinstance(x, list):
        return [to_json(v) for v in x]
    if x == -math.inf:
        return "-inf"
    return x + 0.0


def extras_case(name, what, doc, seed, how_extra=""):
    p = extras_model.Problem(doc)
    dY = make_backward.draw_dY(p, seed)
    inp = dict(doc)
    inp["dY"] = dY.tolist()
    steps, grads = extras_model.autograd(p, doc, dY)
    check_invariants(name, p, steps, grads, dY)

    np_fwd, np_grads = extras_numpy.numpy_pass(p, doc, dY)
    if set(np_fwd) != set(steps) or set(np_grads) != set(grads):
        raise AssertionError(f"{name}: the NumPy pass has steps {sorted(set(np_fwd) ^ set(steps))} "
                             f"and gradients {sorted(set(np_grads) ^ set(grads))} that autograd has not, or back")
    fwd_err = make_backward.disagreement(name, "the NumPy forward", np_fwd, steps, list(steps))
    grad_err = make_backward.disagreement(name, "the NumPy backward", np_grads, grads, list(grads))
    checks = [f"a NumPy forward and backward written out by hand give every forward step to {fwd_err:.1e} "
              f"and every gradient to {grad_err:.1e}"]
    allowed = p.allow.unsqueeze(1).expand_as(steps["scaled"])
    max_logit = max(float(steps["scaled"][allowed].abs().max()), float(steps["masked"][allowed].abs().max()))
    fd_err = None
    if max_logit < 100:
        fd_err, fd_count = make_backward.finite_differences(name, p, doc, dY, grads, extras_model)
        checks.append(f"central differences (step {FD_STEP:g}) on {fd_count} entries of the leaves"
                      f"{', the sinks included,' if p.sinks is not None else ''} agree to {fd_err:.1e}")
    else:
        checks.append(f"no central differences: the largest |logit| is {max_logit:.4g}, 100 or more")
    mb_err = None
    if p.keep is not None and p.p_drop == 0:
        mb_err = check_against_make_backward(name, doc, dY, grads)
        checks.append(f"with p = 0 dropped equals weights exactly and make_backward.py's autograd on the input "
                      f"without dropout gives every gradient to {mb_err:.1e}")
    if p.sinks is not None:
        under = check_underflowed_sinks(name, p, doc, steps)
        if under is not None:
            checks.append(f"head{'s' if len(under[0]) > 1 else ''} {', '.join(map(str, under[0]))}, whose sink "
                          f"share underflows to 0, ha{'ve' if len(under[0]) > 1 else 's'} the weights of the input "
                          f"without sinks to {under[1]:.1e}")

    biases = [key for key in ("b_q", "b_k", "b_v", "b_o") if key in doc]
    how = ("torch autograd in float64 (one thread, deterministic) on leaves that hold the file's tensors in its "
           "own layout and shapes (requires_grad), the sinks a leaf of their own: "
           + ("q = X·W_q, k = C·W_k, v = C·W_v with C the context" if p.cross else "q = X·W_q, k = X·W_k, v = X·W_v")
           + (f" (+ {', '.join(biases)})" if biases else "")
           + f", split into {p.h} query head{'s' if p.h > 1 else ''}"
           + (f" and {p.g} kv head{'s' if p.g > 1 else ''} (query head hd reads kv head hd // {p.h // p.g})"
              if p.g != p.h else "")
           + (f", RoPE ({p.style}, theta {p.theta:g}, dims {p.dims}) on the heads" if p.rope is not None else "")
           + f", S = Q·Kᵀ, S' = S·scale (scale = {p.scale!r}{', given' if 'scale' in doc else ', 1/sqrt(d_k)'})"
           + (f", capped = {p.softcap!r}·tanh(S'/{p.softcap!r})" if p.softcap is not None else "")
           + (", + the ALiBi bias" + (" (after the cap)" if p.softcap is not None else "")
              if p.slopes is not None else "")
           + ", masked by torch.where(-inf)"
           + (", torch.softmax over each row with its head's sink logit as one more column (torch.cat), weights "
              "the key columns and sink_weights the sink's" if p.sinks is not None else ", torch.softmax")
           + (f", dropped = weights * Z * (1/(1 - {p.p_drop!r})) with Z the keep mask of Philox4x32-10 (seed "
              f"{p.seed}, counter (j, i, hd, b), keep iff x0 >= {philox.threshold(p.p_drop)}; {int(p.keep.sum())} of "
              f"{p.keep.numel()} entries kept)" if p.keep is not None else "")
           + (", dropped·V" if p.keep is not None else ", weights·V") + ", concat"
           + (", Y = O·W_o" + (" + b_o" if "b_o" in doc else "") if p.has_wo else ", Y = O (no W_o)")
           + f"; retain_grad() on every step; L = Σ Y ⊙ dY, dY = torch.randn(generator seeded {seed}, float64)")
    if p.empty.any():
        rows = make_backward.describe_empty(p)
        how += (f". Rows with nothing to attend ({rows}): " +
                ("the sink takes all their weight (sink_weights 1, weights and head output 0), and their score "
                 "gradients are 0" if p.sinks is not None else
                 "their scores are replaced by 0 before the softmax and their weights multiplied by 0 (the zero "
                 "policy), so their score gradients are 0"))
    how += how_extra + ". Checks: " + "; ".join(checks) + " (relative to max(1, |value|))"

    def sq(key, x):  # a single sequence drops the batch axis; the leaves' gradients are in their own shapes
        if p.batched or key in BATCH_FREE or key in ("d_X", "d_context"):
            return x
        return x[0]

    expected = {}
    for key in FORWARD:
        if key in steps:
            expected[key] = to_json(sq(key, steps[key]).tolist())
    for key in GRADIENTS:
        if key in grads:
            expected[key] = to_json(sq(key, grads[key]).tolist())
    if set(expected) != set(steps) | set(grads):
        raise AssertionError(f"{name}: steps outside the order: {sorted(set(steps) | set(grads) - set(expected))}")
    out = {"name": name, "what": what, "how": how, "dY_seed": seed, "input": inp, "expected": expected}
    if p.keep is not None:
        out["keep_mask"] = p.keep.to(torch.int64).tolist()
    stats = {"fwd": fwd_err, "grad": grad_err, "fd": fd_err, "make_backward": mb_err, "max_logit": max_logit,
             "max_abs": max(float(v.abs().max()) for v in grads.values())}
    return out, stats, p, steps, grads


# ------------------------------------------------------------------------------------------- the cases

def drawn(input_seed, gains=None, **kw):
    """An input drawn by make_golden.make_case (its torch.Generator, layout, biases and masks), without its
    expected values; gains multiplies whole weights (e.g. {"W_q": 4}) for larger logits."""
    doc = make_golden.make_case("drawn", "", input_seed, **kw)["input"]
    for key, factor in (gains or {}).items():
        doc[key] = (torch.tensor(doc[key], dtype=DT) * factor).tolist()
    return doc


def with_keys(doc, **keys):
    out = dict(doc)
    out.update(keys)
    return out


FACTS = {}  # name -> a sentence the case's golden must bear out, checked in main


def cases():
    C = []

    def add(name, what, seed, doc, extra=""):
        C.append((name, what, doc, seed, extra))

    # -- soft-capping
    add("softcap_50_modest", "softcap 50, Gemma 2's value, on modest logits (|S'| up to 4.8): capped stays within "
        "0.015 of S'; two heads, W_o.", 9301,
        with_keys(drawn(7301, gains={"W_q": 4, "W_k": 4}, n=5, d_model=6, h=2), softcap=50))
    add("softcap_2_saturated", "softcap 2 on large logits (scale 1, |S'| up to 60.8): 42 of 72 scores have "
        "|S'| > 10, where tanh saturates and d_scaled nearly vanishes; 5 are capped to exactly ±2 (tanh rounds "
        "to ±1) and have d_scaled 0; two heads.", 9302,
        with_keys(drawn(7302, gains={"W_q": 6, "W_k": 6}, n=6, d_model=4, h=2, d_k=2, d_v=2, scale=1.0,
                        x_range=2.0), softcap=2))
    add("softcap_causal", "softcap 5, causal, two heads of width 4 with W_q scaled up so that the cap bends the "
        "larger scores.", 9303,
        with_keys(drawn(7303, gains={"W_q": 3, "W_k": 3}, n=6, d_model=8, h=2, mask="causal"), softcap=5))
    add("softcap_alibi", "softcap 3 then ALiBi with explicit slopes [1, -0.75], no mask: the bias comes after "
        "the cap, so masked goes beyond ±3.", 9304,
        with_keys(drawn(7304, gains={"W_q": 3, "W_k": 3}, n=5, d_model=4, h=2), softcap=3, alibi=[1.0, -0.75]))
    FACTS["softcap_alibi"] = "masked beyond the cap"
    add("softcap_gqa_batch", "softcap 4 on a batch of 2, GQA 4 query heads over 2 kv heads, causal, biases.", 9305,
        with_keys(drawn(7305, gains={"W_q": 3}, B=2, n=5, d_model=8, h=4, g=2, d_k=2, d_v=2, biases=True,
                        mask="causal"), softcap=4))
    add("softcap_out_in_biases", "softcap 1.5 with weights out_in (as nn.Linear stores them), all four biases, W_o "
        "to a width of 5, d_v 3.", 9306,
        with_keys(drawn(7306, gains={"W_q": 2, "W_k": 2}, n=5, d_model=6, h=2, d_k=3, d_v=3, d_out=5,
                        biases=True, layout="out_in"), softcap=1.5))

    # -- attention sinks
    add("sinks_alone", "A sink logit per head, [0.5, -1], no mask: every row gives the sink a share and the "
        "key weights sum to less than 1.", 9311,
        with_keys(drawn(7311, n=5, d_model=4, h=2), sinks=[0.5, -1.0]))
    add("sinks_causal", "Sinks [1, 0, -0.5, 2] on four heads, causal: the first row shares its weight between its "
        "one key and the sink.", 9312,
        with_keys(drawn(7312, n=6, d_model=8, h=4, biases=True, mask="causal"), sinks=[1.0, 0.0, -0.5, 2.0]))
    add("sinks_empty_row", "Sinks with a custom mask whose row 2 is all false: that row puts all its weight on the "
        "sink (sink_weights 1, weights and head output 0, output b_o).", 9313,
        with_keys(drawn(7313, n=6, d_model=4, h=2, biases=True, layout="out_in",
                        mask=make_golden.custom_mask(empty_row=2)), sinks=[0.3, -0.7]))
    FACTS["sinks_empty_row"] = "an empty row"
    add("sinks_gqa_cross", "Sinks on cross-attention: 4 queries read 6 keys of a context of width 5, GQA 4/2, "
        "biases, d_v 3.", 9314,
        with_keys(drawn(7314, n=4, m=6, d_model=6, d_context=5, h=4, g=2, d_k=2, d_v=3, biases=True),
                  sinks=[-0.25, 1.5, 0.75, -2.0]))
    add("sinks_large", "Very large sinks, [12, 30]: nearly all the weight on the sink (key weights at most 6.3e-6 "
        "and 1.3e-13), tiny but exact gradients.", 9315,
        with_keys(drawn(7315, n=5, d_model=4, h=2, biases=True), sinks=[12.0, 30.0]))
    FACTS["sinks_large"] = "sink shares near 1"
    add("sinks_very_negative", "Very negative sinks, [-20, -1000]: head 0 gives the sink about 1e-9, head 1's "
        "share underflows to 0, so its weights are those without a sink and its d_sinks is 0.", 9316,
        with_keys(drawn(7316, n=5, d_model=4, h=2, mask="causal"), sinks=[-20.0, -1000.0]))
    FACTS["sinks_very_negative"] = "an underflowed sink"

    # -- dropout
    add("dropout_module_p01", "Dropout p = 0.1, seed 42, on a complete module: d_model 8, 2 heads, W_o and all "
        "biases, weights out_in.", 9321,
        with_keys(drawn(7321, n=6, d_model=8, h=2, biases=True, layout="out_in"), dropout={"p": 0.1, "seed": 42}))
    add("dropout_p05_causal", "Dropout p = 0.5 (kept weights doubled), causal, two heads.", 9322,
        with_keys(drawn(7322, n=6, d_model=4, h=2, mask="causal"), dropout={"p": 0.5, "seed": 7}))
    add("dropout_gqa_batch", "Dropout p = 0.3 on a batch of 2 with GQA 4/2: the counter's b and hd words pick "
        "each item's and head's mask; the seed, 2^32 + 5, has a nonzero high word.", 9323,
        with_keys(drawn(7323, B=2, n=4, d_model=8, h=4, g=2, d_k=2, d_v=2, biases=True),
                  dropout={"p": 0.3, "seed": 2 ** 32 + 5}))
    FACTS["dropout_gqa_batch"] = "masks differ across b and hd"
    add("dropout_p0", "Dropout p = 0: the keep mask is all ones, dropped equals weights and every gradient is "
        "make_backward.py's.", 9324,
        with_keys(drawn(7324, n=5, d_model=6, h=3, biases=True, mask="causal"), dropout={"p": 0.0, "seed": 3}))
    add("dropout_rope", "Dropout p = 0.25 with RoPE (half style, theta 100), two heads, causal; the seed "
        "12345678901234567890 is above 2^63.", 9325,
        with_keys(drawn(7325, n=6, d_model=8, h=2, d_k=4, mask="causal"), rope={"theta": 100},
                  dropout={"p": 0.25, "seed": 12345678901234567890}))

    # -- together
    add("softcap_sinks_dropout_causal_batch", "softcap 4, sinks and dropout p = 0.2 together on a batch of 2, "
        "causal, GQA 4/2, W_o and biases.", 9331,
        with_keys(drawn(7331, gains={"W_q": 3, "W_k": 2}, B=2, n=5, d_model=8, h=4, g=2, d_k=2, d_v=2, biases=True,
                        mask="causal"), softcap=4, sinks=[0.5, -0.5, 1.0, 0.0], dropout={"p": 0.2, "seed": 2024}))
    add("everything_cross_batch", "Every key at once: softcap 2.5, ALiBi, RoPE, sinks and dropout p = 0.4 on "
        "batched cross-attention (3 queries, 5 keys), GQA 2/1, a custom mask per item that empties item 1's row 0.",
        9332,
        with_keys(drawn(7332, gains={"W_q": 3}, B=2, n=3, m=5, d_model=4, d_context=6, h=2, g=1, d_k=4, d_v=2,
                        biases=True, layout="out_in",
                        mask=make_golden.custom_mask(per_item=True, empty_item_row=(1, 0))),
                  softcap=2.5, rope={"theta": 50, "positions": [2, 3, 4], "context_positions": [0, 1, 2, 3, 4]},
                  alibi=True, sinks=[0.25, -0.5], dropout={"p": 0.4, "seed": 99}))
    FACTS["everything_cross_batch"] = "an empty row"
    cat = json.loads((DATA_DIR / "the_cat_sat.json").read_text(encoding="utf-8"))
    add("the_cat_sat_softcap_50", "data/the_cat_sat.json with softcap 50: the scaled scores (at most 2.83) move by "
        "at most 3.0e-3 under the cap.", 9333, with_keys(cat, softcap=50))
    return C


def check_fact(name, fact, p, steps):
    """What the case's "what" promises, shown by its numbers."""
    if fact == "masked beyond the cap":
        allow = p.allow.unsqueeze(1).expand_as(steps["masked"])
        if not (float(steps["capped"].abs().max()) < p.softcap < float(steps["masked"][allow].abs().max())):
            raise AssertionError(f"{name}: masked does not go beyond the cap")
    elif fact == "an empty row":
        if not p.empty.any():
            raise AssertionError(f"{name}: no row is empty")
    elif fact == "sink shares near 1":
        if not float(steps["sink_weights"].min()) > 0.999:
            raise AssertionError(f"{name}: a sink share is not near 1")
    elif fact == "an underflowed sink":
        if not steps["sink_weights"][:, 1].eq(0).all():
            raise AssertionError(f"{name}: head 1's sink share does not underflow")
    elif fact == "masks differ across b and hd":
        Z = p.keep
        if torch.equal(Z[0], Z[1]) or any(torch.equal(Z[:, a], Z[:, b]) for a in range(p.h) for b in range(a)):
            raise AssertionError(f"{name}: two items or two heads have the same keep mask")
    else:
        raise ValueError(fact)


def main():
    philox.check_philox()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    all_cases = cases()
    names = [c[0] for c in all_cases]
    if len(set(names)) != len(names):
        sys.exit("make_extras.py: two cases share a name")
    seeds = [c[3] for c in all_cases]
    if len(set(seeds)) != len(seeds) or set(seeds) & set(make_backward.SEEDS.values()):
        sys.exit("make_extras.py: a dY seed is used twice (here or in make_backward.py)")
    written = set()
    summary = []
    for name, what, doc, seed, extra in all_cases:
        golden, stats, p, steps, grads = extras_case(name, what, doc, seed, extra)
        if name in FACTS:
            check_fact(name, FACTS[name], p, steps)
        if p.keep is not None and p.p_drop > 0 and bool(p.keep.all()):
            raise AssertionError(f"{name}: dropout p = {p.p_drop} drops nothing")
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

    print(f"Philox4x32-10: Random123's {len(philox.PHILOX_KATS)} known-answer vectors")
    print(f"wrote {len(summary)} cases to {OUT_DIR}")
    for label, key in (("NumPy forward", "fwd"), ("NumPy backward", "grad"), ("central differences", "fd"),
                       ("make_backward.py at p = 0", "make_backward")):
        w, count = worst(key)
        print(f"{label}: {count} cases, largest disagreement {w:.2e}")
    big = max(summary, key=lambda c: c[1]["max_abs"])
    print(f"largest |gradient|: {big[1]['max_abs']!r} ({big[0]}); largest |logit|: "
          f"{max(s['max_logit'] for _, s in summary):.4g}")


if __name__ == "__main__":
    main()
