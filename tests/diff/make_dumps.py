#!/usr/bin/python3
"""Writes the test cases of `attn-trace diff`: inputs, model dumps computed by PyTorch, and the answers.

    /usr/bin/python3 tests/diff/make_dumps.py
    /usr/bin/python3 tests/diff/make_dumps.py --attn-trace build/release/attn-trace

(Debian's Python, which has python3-torch and python3-numpy; a pyenv or venv `python3` on PATH may not.)

It rewrites tests/data/diff/: one folder per case holding `input.json` (docs/input-format.md) and the
dump, either a folder `dumps/` of `<step>.npy` / `<step>.bf16.npy` / `<step>.json` files or one file
`dumps.safetensors`, and the manifest `cases.json`. The steps and shapes are those of
docs/trace-format.md, with a leading batch axis B (1 for an input whose X is a single sequence, unless a
case leaves the axis out).

PyTorch computes every case step by step, independently of attn-trace. A correct case is the attention
of docs/input-format.md in the dump's dtype; a planted case has one mistake put in on purpose, and the
manifest's answer (exit code, first diverging step, diagnosis) is what that mistake should produce.

Half precision (float16, bfloat16) follows the model attn-trace computes its half traces in: inputs and
every stored step rounded to the half type, products and sums in float32, softmax in float32 from the
rounded scores. PyTorch's own CPU matmul cannot be used for that here: this PyTorch has no float16
matmul on the CPU, and its bfloat16 matmul of small matrices rounds partial sums to bfloat16. So a
half matmul is `(a.float() @ b.float()).to(dtype)`: accumulated in float32, rounded once. The scale is
applied as `scores * scale` in the half dtype, as a model would do it (PyTorch rounds the scale to the
dtype, multiplies in float32 and rounds the product).

Every case is read back from its files and checked against a float64 NumPy computation written
separately (dump_reference.py: einsum, its own softmax and mask): a correct case must agree at every
dumped step within its dtype's tolerance; a planted case must agree at every dumped step before its first
step, differ at that step, and show the signature of its mistake there (bug_signatures.py; for instance:
the dumped `scaled` equals the reference's `scores` when the scale was left out). Half cases are also
compared with a NumPy emulation of attn-trace's half model (half_model.py), and the largest distance in
units of the last place is printed. A failed check stops the script before it writes the manifest.
.safetensors files are written and read by safetensors_io.py.

With --attn-trace BIN, every input is also given to `BIN run --dtype float64 --json -`: the loader must
accept it, and its trace must agree with the NumPy computation at every step, which shows that this
script reads the input format as attn-trace does. Nothing that attn-trace prints is written into a case.

Every number comes from a torch.Generator with a fixed seed per case and every computation runs in one
thread, so running the script twice writes identical files.
"""

import json
import math
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bug_signatures import SIGNATURES  # noqa: E402  (the signature of each planted mistake)
from dump_reference import Problem, allowed, divergence, reference  # noqa: E402  (the NumPy reference, its tolerance)
from half_model import half_model, ulps  # noqa: E402  (attn-trace's half model, emulated)
from safetensors_io import bf16_bits_to_float, read_safetensors, write_safetensors  # noqa: E402  (.safetensors)

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "diff"

STEPS = ["q", "k", "v", "q_heads", "k_heads", "v_heads", "scores", "scaled", "masked", "weights",
         "head_outputs", "concat", "output"]
HEAD_STEPS = {"q_heads", "k_heads", "v_heads", "head_outputs"}  # (B, h, n, d), or (B, n, h, d) in a dump
SOME_STEPS = ["q", "k", "v", "weights", "output"]
TORCH_DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
               "float64": torch.float64}

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


# ------------------------------------------------------------------------------------------ the inputs

def normal(gen, *shape, std=1.0):
    """Normal numbers rounded to 4 decimals: k / 1e4 is the double a JSON reader gets from the text."""
    x = torch.randn(*shape, generator=gen, dtype=torch.float64) * std
    return torch.round(x * 1e4) / 1e4


def make_input(seed, description, *, n, d_model, h=1, g=None, d_k, d_v=None, batch=None, m=None,
               w_o=True, biases=False, layout="in_out", mask=None, square_w_k=False):
    """An input document of docs/input-format.md with random weights (std 1/sqrt(fan-in)).

    batch: None for one sequence (X is n × d_model), else the number of sequences. m: the number of
    keys of a cross-attention context (None: self-attention). mask: the value of "mask", or None."""
    gen = torch.Generator().manual_seed(seed)
    g = h if g is None else g
    d_v = d_k if d_v is None else d_v
    lead = () if batch is None else (batch,)
    doc = {"description": description}
    if h != 1:
        doc["n_heads"] = h
    if g != h:
        doc["n_kv_heads"] = g
    if mask is not None:
        doc["mask"] = mask
    if layout != "in_out":
        doc["layout"] = layout
    doc["X"] = normal(gen, *lead, n, d_model)
    if m is not None:
        doc["context"] = {"X": normal(gen, *lead, m, d_model)}
    weights = {"W_q": (d_model, h * d_k), "W_k": (d_model, g * d_k), "W_v": (d_model, g * d_v)}
    if w_o:
        weights["W_o"] = (h * d_v, d_model)
    if square_w_k and weights["W_k"][0] != weights["W_k"][1]:
        raise ValueError("square_w_k needs d_model = n_kv_heads · d_k")
    for key, (d_in, d_out) in weights.items():
        w = normal(gen, d_in, d_out, std=1.0 / math.sqrt(d_in))  # in × out, as Q = X·W_q reads it
        doc[key] = w.T.contiguous() if layout == "out_in" else w
        if biases and (key != "W_o" or w_o):
            doc["b" + key[1:]] = normal(gen, d_out, std=0.1)
    return plain(doc)


def plain(value):
    """The document with its tensors turned into nested lists of floats."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, dict):
        return {key: plain(v) for key, v in value.items()}
    return value


def format_json(value, indent=0):
    """JSON with every matrix row on its own line: compact, and readable in a diff."""
    pad = " " * indent
    if isinstance(value, dict):
        items = [f'{pad}  {json.dumps(k)}: {format_json(v, indent + 2).lstrip()}' for k, v in value.items()]
        return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value and isinstance(value[0], list):
        rows = [format_json(v, indent + 2) for v in value]
        return pad + "[\n" + ",\n".join(rows) + "\n" + pad + "]"
    return pad + json.dumps(value, separators=(", ", ": "))


# ------------------------------------------------------------------------------- PyTorch, step by step

def torch_steps(P, dtype, bug=None):
    """Every step as PyTorch computes it in `dtype`, each (B, ...), heads (B, h, n, d). `bug` plants one
    mistake: no-scale, double-scale, k-not-transposed, w_k-transposed, softmax-query-axis, no-mask,
    mask-shifted, top-left, reshape-heads, large-negative. (float16-compute, the last planted mistake,
    is this function in float16 with the steps then widened to float32: main does that.)"""
    dt = TORCH_DTYPE[dtype]
    half = dtype in ("float16", "bfloat16")

    def tensor(a):
        return None if a is None else torch.from_numpy(a).to(dt)

    def mm(a, b):
        return (a.float() @ b.float()).to(dt) if half else a @ b

    def linear(x, w, b):
        if half:
            y = x.float() @ w.float()
            return (y if b is None else y + b.float()).to(dt)
        y = x @ w
        return y if b is None else y + b

    B, n, m, h, g, d_k, d_v = P.B, P.n, P.m, P.h, P.g, P.d_k, P.d_v
    X, C = tensor(P.X), tensor(P.C)
    W_k = tensor(P.W_k)
    s = {}
    s["q"] = linear(X, tensor(P.W_q), tensor(P.b_q))
    s["k"] = linear(C, W_k.T if bug == "w_k-transposed" else W_k, tensor(P.b_k))
    s["v"] = linear(C, tensor(P.W_v), tensor(P.b_v))

    def split(t, heads, d):
        rows = t.shape[1]
        if bug == "reshape-heads":
            return t.reshape(B, heads, rows, d)  # the mistake: no transpose between the two views
        return t.view(B, rows, heads, d).transpose(1, 2)

    s["q_heads"] = split(s["q"], h, d_k)
    s["k_heads"] = split(s["k"], g, d_k)
    s["v_heads"] = split(s["v"], g, d_v)
    K = s["k_heads"].repeat_interleave(h // g, dim=1)  # query head i reads kv head i // (h / g)
    V = s["v_heads"].repeat_interleave(h // g, dim=1)
    s["scores"] = mm(s["q_heads"], K if bug == "k-not-transposed" else K.transpose(-1, -2))
    if bug == "no-scale":
        s["scaled"] = s["scores"].clone()
    elif bug == "double-scale":
        s["scaled"] = s["scores"] * P.scale * P.scale
    else:
        s["scaled"] = s["scores"] * P.scale

    allow = P.allowed
    if bug == "mask-shifted":
        allow = allowed(P.mask, B, n, m, reach=1)
    elif bug == "top-left":
        allow = allowed(P.mask, B, n, m, align="top_left")
    forbid = torch.from_numpy(~allow).unsqueeze(1)  # (B, 1, n, m)
    if bug == "no-mask":
        s["masked"] = s["scaled"].clone()
    elif bug == "large-negative":
        s["masked"] = s["scaled"].masked_fill(forbid, -1e9)
    else:
        s["masked"] = s["scaled"].masked_fill(forbid, float("-inf"))

    axis = -2 if bug == "softmax-query-axis" else -1
    w = torch.softmax(s["masked"].float() if half else s["masked"], dim=axis)
    # A row the mask empties is all -inf: softmax gives NaN there, attn-trace gives zero weights.
    s["weights"] = torch.nan_to_num(w, nan=0.0).to(dt)
    s["head_outputs"] = mm(s["weights"], V)
    if bug == "reshape-heads":
        s["concat"] = s["head_outputs"].reshape(B, n, h * d_v)  # undone the same (wrong) way
    else:
        s["concat"] = s["head_outputs"].transpose(1, 2).reshape(B, n, h * d_v)
    s["output"] = linear(s["concat"], tensor(P.W_o), tensor(P.b_o)) if P.W_o is not None else s["concat"].clone()
    return s


# ------------------------------------------------------------------------------------- writing dumps

def to_dump_layout(t, step, case):
    """A (B, ...) step as the case dumps it: heads (B, n, h, d) if asked, the batch axis dropped if asked."""
    if case.get("heads") == "bnhd" and step in HEAD_STEPS:
        t = t.transpose(1, 2)
    if not case.get("batch_axis", True):
        assert t.shape[0] == 1, "only a single sequence can leave out the batch axis"
        t = t[0]
    return t.contiguous()


def as_numpy(t, dtype):
    """The array numpy saves: bfloat16 as its bits, uint16 (numpy has no bfloat16)."""
    if dtype == "bfloat16":
        return np.ascontiguousarray(t.view(torch.int16).numpy().view(np.uint16))
    return np.ascontiguousarray(t.numpy())


def nested(a):
    """A float64 array as nested lists, with -inf, inf and nan as the strings a trace uses."""
    if a.ndim == 0:
        v = float(a)
        return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    return [nested(x) for x in a]


def file_name(step, case):
    name = case.get("names", {}).get(step, step)
    if case["format"] == "json":
        return name + ".json"
    bf16_suffix = case["dtype"] == "bfloat16" and "--bfloat16" not in case.get("args", [])
    return name + (".bf16.npy" if bf16_suffix else ".npy")


def write_case(case, doc, steps, folder):
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(format_json(doc) + "\n", encoding="utf-8")
    dtype = case["dtype"]
    chosen = {step: to_dump_layout(steps[step], step, case) for step in case["steps"]}
    if case["format"] == "safetensors":
        names = case.get("names", {})
        write_safetensors(folder / "dumps.safetensors",
                          {names.get(step, step): as_numpy(t, dtype) for step, t in chosen.items()}, dtype)
        return "dumps.safetensors"
    dumps = folder / "dumps"
    dumps.mkdir()
    for step, t in chosen.items():
        if case["format"] == "json":
            text = json.dumps(nested(t.numpy().astype(np.float64)), separators=(",", ":"))
            (dumps / file_name(step, case)).write_text(text + "\n", encoding="utf-8")
        else:
            np.save(dumps / file_name(step, case), as_numpy(t, dtype))
    return "dumps"


# ------------------------------------------------------------------------- reading dumps back, checks


def read_back(case, folder, P):
    """The dumped steps, read from the files, as float64 (B, ...) with heads (B, h, n, d)."""
    if case["format"] == "safetensors":
        stored = read_safetensors(folder / "dumps.safetensors")
        names = case.get("names", {})
        raw = {step: stored[names.get(step, step)] for step in case["steps"]}
        assert len(stored) == len(case["steps"])
    else:
        raw = {}
        for step in case["steps"]:
            path = folder / "dumps" / file_name(step, case)
            if case["format"] == "json":
                text = json.loads(path.read_text(encoding="utf-8"))
                raw[step] = np.array(unnest(text), dtype=np.float64)
            else:
                a = np.load(path)
                assert a.flags.c_contiguous
                raw[step] = bf16_bits_to_float(a) if a.dtype == np.uint16 else a.astype(np.float64)
    out = {}
    for step, a in raw.items():
        assert a.shape == dump_shape(step, case, P), (step, a.shape, dump_shape(step, case, P))
        if not case.get("batch_axis", True):
            a = a[None]
        if case.get("heads") == "bnhd" and step in HEAD_STEPS:
            a = a.transpose(0, 2, 1, 3)
        out[step] = a
    return out


def unnest(x):
    if isinstance(x, list):
        return [unnest(v) for v in x]
    return {"-inf": -np.inf, "inf": np.inf, "nan": np.nan}.get(x, x) if isinstance(x, str) else x


def dump_shape(step, case, P):
    """The shape a step has in the dump: docs/trace-format.md, with the case's batch axis and head layout."""
    B, n, m, h, g, d_k, d_v = P.B, P.n, P.m, P.h, P.g, P.d_k, P.d_v
    d_out = P.W_o.shape[1] if P.W_o is not None else h * d_v
    shapes = {"q": (n, h * d_k), "k": (m, g * d_k), "v": (m, g * d_v), "q_heads": (h, n, d_k),
              "k_heads": (g, m, d_k), "v_heads": (g, m, d_v), "scores": (h, n, m), "scaled": (h, n, m),
              "masked": (h, n, m), "weights": (h, n, m), "head_outputs": (h, n, d_v), "concat": (n, h * d_v),
              "output": (n, d_out)}
    shape = shapes[step]
    if case.get("heads") == "bnhd" and step in HEAD_STEPS:
        shape = (shape[1], shape[0], shape[2])
    return ((B,) if case.get("batch_axis", True) else ()) + shape


def check_case(case, dumped, ref, P):
    """The case is what the manifest says: agreement up to first_step, a difference there, and the
    signature of the planted mistake."""
    dtype = case["dtype"]
    first = case["first_step"]
    for step in case["steps"]:
        if step == first:
            break
        problem = divergence(step, dumped[step], ref[step], dtype)
        if problem:
            raise AssertionError(f"{case['name']}: step {step} diverges before {first}: {problem}")
    if first is None:
        return
    problem = divergence(first, dumped[first], ref[first], dtype)
    if problem is None:
        raise AssertionError(f"{case['name']}: the planted step {first} agrees with the reference")
    signature = SIGNATURES[case["bug"]]
    signature(dumped[first], ref, P, case)


# ----------------------------------------------------------------------------------------- the cases

def case(name, why, inp, *, dtype="float32", bug=None, format="npy", steps=STEPS, first_step=None,
         diagnosis=(), **options):
    return dict(name=name, why=why, input=inp, dtype=dtype, bug=bug, format=format, steps=list(steps),
                first_step=first_step, diagnosis=list(diagnosis), **options)


def cases():
    # the inputs, each drawn from its own seed
    mha = make_input(11, "2 heads, d_k = 3, W_o and every bias, no mask", n=4, d_model=6, h=2, d_k=3,
                     biases=True)
    causal2 = make_input(12, "2 heads, causal, W_o", n=5, d_model=8, h=2, d_k=4, mask="causal")
    causal1 = make_input(13, "one head, causal, no W_o", n=5, d_model=6, d_k=3, w_o=False, mask="causal")
    batch = make_input(14, "a batch of 2 sequences, 2 heads, padding mask", n=4, d_model=6, h=2, d_k=3,
                       batch=2, mask={"type": "padding", "keep": [[1, 1, 1, 1], [1, 1, 1, 0]]})
    gqa = make_input(15, "grouped-query: 2 query heads share 1 key/value head, causal", n=5, d_model=8, h=2,
                     g=1, d_k=4, mask="causal")
    torch_layout = make_input(16, "PyTorch layout (out_in), 2 heads, biases, causal", n=4, d_model=8, h=2,
                              d_k=4, biases=True, layout="out_in", mask="causal")
    cross = make_input(17, "cross-attention, 3 queries and 5 keys, causal aligned bottom_right", n=3,
                       d_model=6, m=5, h=2, d_k=3, mask={"type": "causal", "align": "bottom_right"})
    square_k = make_input(18, "one head, n = m = d_k = 4, so Q·K is defined without the transpose", n=4,
                          d_model=6, d_k=4)
    square_w_k = make_input(19, "2 heads of d_k = 2: W_k is 4 × 4", n=5, d_model=4, h=2, d_k=2,
                            square_w_k=True)
    split = make_input(20, "2 heads of d_k = 3 over 4 tokens", n=4, d_model=6, h=2, d_k=3)
    empty_row = make_input(21, "one head, a custom mask that leaves query 2 no key", n=4, d_model=6, d_k=3,
                           mask={"type": "custom", "allow": [[True, False, False, False],
                                                             [True, True, False, False],
                                                             [False, False, False, False],
                                                             [True, False, True, True]]})
    small = make_input(22, "2 heads, W_o, no mask", n=4, d_model=8, h=2, d_k=4)
    causal_bias = make_input(23, "2 heads of d_k = 3, every bias, causal", n=5, d_model=6, h=2, d_k=3,
                             biases=True, mask="causal")

    return [
        # ---- correct computations: exit 0
        case("float64", "PyTorch in float64, every step as .npy with the batch axis of 1.", mha, dtype="float64"),
        case("float32", "PyTorch in float32, every step as .npy.", mha),
        case("float16", "PyTorch in float16 (float32 sums, rounded steps), every step as .npy <f2.",
             causal_bias, dtype="float16"),
        case("bfloat16", "PyTorch in bfloat16, every step saved as uint16 bits in <step>.bf16.npy.", mha,
             dtype="bfloat16"),
        case("bfloat16_option", "bfloat16 bits saved as plain <step>.npy, read as bfloat16 because of --bfloat16.",
             small, dtype="bfloat16", args=["--bfloat16"]),
        case("safetensors", "PyTorch in float32, every step in one .safetensors file.", causal2,
             format="safetensors"),
        case("json", "PyTorch in float64, every step as JSON nested arrays, with \"-inf\" in masked.", causal1,
             dtype="float64", format="json"),
        case("heads_bnhd", "Head tensors dumped as (B, n, h, d), the layout before the transpose.", causal2,
             heads="bnhd"),
        case("no_batch_axis", "A single sequence dumped without the leading batch axis.", mha, batch_axis=False),
        case("batch2", "A batch of 2 sequences with a padding mask; every step has B = 2.", batch),
        case("gqa", "Grouped-query attention: k_heads and v_heads have the 1 key/value head.", gqa),
        case("causal", "One causal head without W_o, so output equals concat.", causal1),
        case("cross_bottom_right", "Cross-attention n = 3, m = 5 with the causal mask aligned bottom_right.",
             cross),
        case("names", "The dump calls weights attn_probs and output attn_out; --name maps them back.",
             torch_layout, names={"weights": "attn_probs", "output": "attn_out"},
             args=["--name", "weights=attn_probs", "--name", "output=attn_out"]),
        case("some_steps", "Only q, k, v, weights and output are dumped; the other steps are not compared.",
             torch_layout, steps=SOME_STEPS),
        # ---- planted mistakes: exit 1
        case("no_scale", "The scores are never multiplied by 1/sqrt(d_k).", mha, bug="no-scale",
             first_step="scaled", diagnosis=["scale"]),
        case("double_scale", "The scores are multiplied by 1/sqrt(d_k) twice.", mha, bug="double-scale",
             first_step="scaled", diagnosis=["scale"]),
        case("no_scale_some_steps", "No scale, and only q, k, v, weights, output dumped: weights shows it.",
             causal2, bug="no-scale", steps=SOME_STEPS, first_step="weights", diagnosis=["scale"]),
        case("k_not_transposed", "scores = Q·K instead of Q·Kᵀ (n = m = d_k makes it compute).", square_k,
             bug="k-not-transposed", first_step="scores", diagnosis=["transpose"]),
        case("w_k_transposed", "K = X·W_kᵀ: the square W_k is used transposed.", square_w_k,
             bug="w_k-transposed", first_step="k", diagnosis=["transpose"]),
        case("softmax_query_axis", "The softmax normalises over the queries (dim = -2), not the keys.", small,
             bug="softmax-query-axis", first_step="weights", diagnosis=["softmax-axis"]),
        case("mask_missing", "The input is causal but no mask is applied.", causal2, bug="no-mask",
             first_step="masked", diagnosis=["mask"]),
        case("mask_shifted", "The causal mask is shifted by one: each query also sees the next key.", causal2,
             bug="mask-shifted", first_step="masked", diagnosis=["mask"]),
        case("alignment", "The input aligns the causal mask bottom_right; the dump aligned it top_left.", cross,
             bug="top-left", first_step="masked", diagnosis=["alignment"]),
        case("head_split", "Q, K and V split into heads by a plain reshape (B, n, h·d) -> (B, h, n, d).", split,
             bug="reshape-heads", first_step="q_heads", diagnosis=["head-split"]),
        case("large_negative", "-1e9 instead of -inf: the row the mask empties gets uniform weights, not 0.",
             empty_row, bug="large-negative", first_step="weights", diagnosis=["large-negative"]),
        case("float16_as_float32", "Computed in float16, saved as float32: output is off by float16 rounding.",
             small, bug="float16-compute", steps=["output"], first_step="output", diagnosis=["precision"]),
    ]


# ------------------------------------------------------------------------------------------- the run

def check_with_attn_trace(binary, folder, ref, P):
    """attn-trace loads the case's input, and its float64 trace agrees with the NumPy reference."""
    run = subprocess.run([binary, "run", str(folder / "input.json"), "--dtype", "float64", "--json", "-"],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise AssertionError(f"{folder.name}: attn-trace run exits {run.returncode}: {run.stderr.strip()}")
    trace = json.loads(run.stdout)
    names = [step["name"] for step in trace["steps"]]
    assert names == STEPS, names
    for step in trace["steps"]:
        got = np.array(unnest(step["data"]), dtype=np.float64).reshape(step["shape"])
        if not P.batched:
            got = got[None]
        want = ref[step["name"]]
        assert got.shape == want.shape, (folder.name, step["name"], got.shape, want.shape)
        assert (np.isneginf(got) == np.isneginf(want)).all(), (folder.name, step["name"], "-inf")
        finite = np.isfinite(want)
        assert np.allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12), (folder.name, step["name"])


def half_model_distance(P, c, dumped):
    """How far the half dump lies from the emulated half model, with the scale as float32 and as the
    half type (PyTorch's `scores * scale` rounds the scale to the tensor's dtype first)."""
    words = []
    for label, scale in (("float32 scale", P.scale),
                         ("half scale", float(torch.tensor(P.scale).to(TORCH_DTYPE[c["dtype"]])))):
        model = half_model(P, c["dtype"], scale)
        worst = max((ulps(dumped[s], model[s], c["dtype"]), s) for s in c["steps"])
        words.append(f"{worst[0]} ulp with the {label}" + (f" (at {worst[1]})" if worst[0] else ""))
    return ", ".join(words)


def main(argv):
    binary = None
    if argv[:1] == ["--attn-trace"] and len(argv) == 2:
        binary = argv[1]
    elif argv:
        sys.exit("usage: make_dumps.py [--attn-trace BIN]")
    all_cases = cases()
    names = [c["name"] for c in all_cases]
    assert len(set(names)) == len(names), "case names must be unique"
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():  # a case folder of an earlier run, or the manifest
        if old.is_dir():
            shutil.rmtree(old)
        elif old.name == "cases.json":
            old.unlink()
    manifest = []
    for c in all_cases:
        P = Problem(c["input"])
        if c["bug"] == "float16-compute":
            steps = {k: t.float() for k, t in torch_steps(P, "float16").items()}
        else:
            steps = torch_steps(P, c["dtype"], c["bug"])
        folder = OUT / c["name"]
        dumps = write_case(c, c["input"], steps, folder)
        dumped = read_back(c, folder, P)
        ref = reference(P)
        check_case(c, dumped, ref, P)
        if binary:
            check_with_attn_trace(binary, folder, ref, P)
        note = ""
        if c["dtype"] in ("float16", "bfloat16"):
            note = "; from the emulated half model: " + half_model_distance(P, c, dumped)
        manifest.append({
            "name": c["name"],
            "input": f"{c['name']}/input.json",
            "dumps": f"{c['name']}/{dumps}",
            "args": c.get("args", []),
            "exit": 0 if c["first_step"] is None else 1,
            "first_step": c["first_step"],
            "diagnosis": c["diagnosis"],
            "why": c["why"],
        })
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        checked = "checked" + (" (and attn-trace's trace of the input)" if binary else "")
        print(f"{c['name']}: {size} bytes, {checked}{note}")
    text = "[\n" + ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in manifest) + "\n]\n"
    (OUT / "cases.json").write_text(text, encoding="utf-8")
    print(f"wrote {len(manifest)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
