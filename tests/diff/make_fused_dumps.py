#!/usr/bin/python3
"""Writes the fused-dump cases of `attn-trace diff`: dumps whose tensors hold more than their names say.

    /usr/bin/python3 tests/diff/make_fused_dumps.py

(Debian's Python, which has python3-torch and python3-numpy.) It rewrites tests/data/diff_fused/: one
folder per case with `input.json` and `dumps/<name>.npy`, and the manifest `cases.json` (its README
stays), whose entries
have the keys of tests/data/diff/cases.json plus `note` (words the note of a fused dump must hold) and
`holds` (each fused file's name and the step of docs/trace-format.md it really holds).

PyTorch computes each case in float32 as model code often writes attention, several steps in one line:

    scores = q @ k.transpose(-1, -2) / math.sqrt(d_k)                 scores holding our `scaled`
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d_k)).masked_fill(forbid, -inf)   our `masked`
    weights = torch.exp(masked - masked.amax(-1, keepdim=True))       weights before the division
    q = (x @ W_q).view(B, n, h, d_k).transpose(1, 2)                   q holding our `q_heads`
    q = rope((x @ W_q).view(B, n, h, d_k).transpose(1, 2))            q holding our `q_rot`

A correct case must be read with one note per fused file and agree everywhere (exit 0); a planted case
has one mistake put in after the fusion, and the manifest names the step where it first shows and its
diagnosis. The inputs come from make_dumps.py, the Problem reader, the reference and the checks from
dump_reference.py, both beside this script; this script adds RoPE (half style, Hugging Face's
rotate_half) to the PyTorch pass and to a float64 NumPy reference written separately. Every dumped file
is read back and checked against that reference before the manifest is written: each fused file against
the step it holds (the weights before the division against exp(S'' - max)), every step before a planted
case's first step within float32's tolerance, and the planted step out of it. Fixed seeds and one thread:
running it twice writes identical files.
"""

import json
import math
import pathlib
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import dump_reference  # noqa: E402  (Problem, reference, softmax, divergence: the reader, the reference, the checks)
import make_dumps as md  # noqa: E402  (make_input, format_json: the inputs)

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "diff_fused"
STEPS = ["q", "k", "v", "q_heads", "k_heads", "v_heads", "q_rot", "k_rot", "scores", "scaled", "masked",
         "weights", "head_outputs", "concat", "output"]

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


# ------------------------------------------------------------------------------------------- RoPE

def rope_angles(d_k, positions, theta=10000.0):
    """(n, d_k/2) angles pos · θ_i, θ_i = theta^(-2i/d_k), in float64."""
    i = np.arange(d_k // 2, dtype=np.float64)
    return np.asarray(positions, dtype=np.float64)[:, None] * theta ** (-2.0 * i / d_k)[None, :]


def rope_torch(x, positions):
    """x (B, h, n, d) turned as Hugging Face's Llama does: x·cos + rotate_half(x)·sin, cos and sin
    computed in float64 and stored as x's dtype."""
    d = x.shape[-1]
    ang = torch.from_numpy(rope_angles(d, positions))
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rope_numpy(x, positions):
    """The same rotation in float64, pair by pair: (a, b) -> (a cos - b sin, b cos + a sin)."""
    d = x.shape[-1]
    ang = rope_angles(d, positions)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), b * np.cos(ang) + a * np.sin(ang)], axis=-1)


# ---------------------------------------------------------------------------- PyTorch, fused lines

def torch_fused(P, rope, bug=None, late=False):
    """Every tensor a model computes, in float32, the fused ones in one line each. `bug` plants one
    mistake after the fusions: no-mask, softmax-query-axis, w_o-transposed, merge-reshape, no-scale,
    double-scale. `late`: the weights are divided by their row sums after A·V, not before."""
    f32 = torch.float32

    def t(a):
        return None if a is None else torch.from_numpy(a).to(f32)

    def linear(x, w, b):
        y = x @ w
        return y if b is None else y + b

    B, n, m, h, g, d_k, d_v = P.B, P.n, P.m, P.h, P.g, P.d_k, P.d_v
    X, C = t(P.X), t(P.C)
    s = {"q": linear(X, t(P.W_q), t(P.b_q)), "k": linear(C, t(P.W_k), t(P.b_k)),
         "v": linear(C, t(P.W_v), t(P.b_v))}
    s["q_heads"] = s["q"].view(B, n, h, d_k).transpose(1, 2)
    s["k_heads"] = s["k"].view(B, m, g, d_k).transpose(1, 2)
    s["v_heads"] = s["v"].view(B, m, g, d_v).transpose(1, 2)
    Q, K = s["q_heads"], s["k_heads"]
    if rope:
        Q = s["q_rot"] = rope_torch(Q, range(n))
        K = s["k_rot"] = rope_torch(K, range(m))
    K = K.repeat_interleave(h // g, dim=1)
    V = s["v_heads"].repeat_interleave(h // g, dim=1)
    s["scores"] = Q @ K.transpose(-1, -2)
    # The fused line: the product and the scale at once, as a division by √d_k.
    if bug == "no-scale":
        s["scaled"] = Q @ K.transpose(-1, -2)
    elif bug == "double-scale":
        s["scaled"] = Q @ K.transpose(-1, -2) / math.sqrt(d_k) / math.sqrt(d_k)
    else:
        s["scaled"] = Q @ K.transpose(-1, -2) / math.sqrt(d_k)
    forbid = torch.from_numpy(~P.allowed).unsqueeze(1)
    s["masked"] = s["scaled"].clone() if bug == "no-mask" else s["scaled"].masked_fill(forbid, float("-inf"))
    # Weights before the division: exp(S'' - max), so exp never overflows; divided once, after A·V.
    s["exp"] = torch.exp(s["masked"] - s["masked"].amax(dim=-1, keepdim=True))
    s["weights"] = torch.softmax(s["masked"], dim=-2 if bug == "softmax-query-axis" else -1)
    s["head_outputs"] = s["weights"] @ V
    s["head_outputs_late"] = (s["exp"] @ V) / s["exp"].sum(dim=-1, keepdim=True)
    heads = s["head_outputs_late"] if late else s["head_outputs"]
    if bug == "merge-reshape":
        s["concat"] = heads.reshape(B, n, h * d_v)  # the mistake: no transpose before the merge
    else:
        s["concat"] = heads.transpose(1, 2).reshape(B, n, h * d_v)
    W_o = t(P.W_o)
    s["output"] = linear(s["concat"], W_o.T if bug == "w_o-transposed" else W_o, t(P.b_o))
    return s


# ------------------------------------------------------------------------- NumPy, float64, apart

def reference(P, rope):
    """The steps of docs/trace-format.md in float64 NumPy, RoPE included, and exp(S'' - max)."""
    r = dump_reference.reference(P)
    if rope:
        r["q_rot"] = rope_numpy(r["q_heads"], range(P.n))
        r["k_rot"] = rope_numpy(r["k_heads"], range(P.m))
        kv = np.arange(P.h) // (P.h // P.g)
        r["scores"] = np.einsum("bhid,bhjd->bhij", r["q_rot"], r["k_rot"][:, kv])
        r["scaled"] = r["scores"] * P.scale
        r["masked"] = np.where(P.allowed[:, None], r["scaled"], -np.inf)
        r["weights"] = dump_reference.softmax(r["masked"], axis=-1)
        r["head_outputs"] = np.einsum("bhij,bhjd->bhid", r["weights"], r["v_heads"][:, kv])
        r["concat"] = r["head_outputs"].transpose(0, 2, 1, 3).reshape(P.B, P.n, P.h * P.d_v)
        r["output"] = np.einsum("bti,io->bto", r["concat"], P.W_o) + (0 if P.b_o is None else P.b_o)
    top = np.max(r["masked"], axis=-1, keepdims=True)
    r["exp"] = np.exp(r["masked"] - top)
    return r


# ----------------------------------------------------------------------------------------- the cases

def case(name, why, inp, files, *, rope=False, bug=None, first_step=None, diagnosis=(), note):
    """files: the dump's file names in pipeline order, each `name` or `name=tensor` (the tensor of
    torch_fused it holds, when that is not its name)."""
    return dict(name=name, why=why, input=inp, files=files, rope=rope, bug=bug, first_step=first_step,
                diagnosis=list(diagnosis), note=note, late="weights=exp" in files)


def cases():
    causal = md.make_input(31, "2 heads of d_k = 4, causal, W_o 8 × 8", n=5, d_model=8, h=2, d_k=4,
                           mask="causal")
    biased = md.make_input(32, "2 heads of d_k = 3, every bias, causal", n=4, d_model=6, h=2, d_k=3,
                           biases=True, mask="causal")
    plain = md.make_input(33, "2 heads of d_k = 4, no mask", n=4, d_model=8, h=2, d_k=4)
    rotary = dict(md.make_input(34, "2 heads of d_k = 4, causal, RoPE", n=5, d_model=8, h=2, d_k=4,
                                mask="causal"))
    rotary["rope"] = {}

    heads = ["q", "k", "v", "q_heads", "k_heads", "v_heads"]
    tail = ["weights", "head_outputs", "concat", "output"]
    scaled_note = "scores.npy: your scores already include 1/√d_k: read as our `scaled`"
    masked_note = "scores.npy: your scores already include 1/√d_k and the mask: read as our `masked`"
    mask_note = "scaled.npy: your scaled already includes the mask: read as our `masked`"
    exp_note = "weights.npy: your weights are exp(S'' − max) before the division by each row's sum"
    split_note = "q.npy: your q already includes the split into heads: read as our `q_heads`"
    rot_note = "q.npy: your q already includes the split into heads and RoPE's rotation: read as our `q_rot`"
    rot_heads_note = "q_heads.npy: your q_heads already include RoPE's rotation: read as our `q_rot`"
    split_files = ["q=q_heads", "k=k_heads", "v=v_heads", "scores=scaled", "masked"] + tail

    return [
        case("reported", "q, k, v, scores = q·kᵀ/√d_k in one line, weights and output: the case a user "
             "reported, where weights was marked as differing within its tolerance.", causal,
             ["q", "k", "v", "scores=scaled", "weights", "output"], note=scaled_note),
        case("scores_scaled", "scores = q·kᵀ/√d_k in one line, every other step dumped.", causal,
             heads + ["scores=scaled", "masked"] + tail, note=scaled_note),
        case("scores_scaled_mask_missing", "scores = q·kᵀ/√d_k in one line, then no mask applied.", causal,
             heads + ["scores=scaled", "masked"] + tail, bug="no-mask", first_step="masked",
             diagnosis=["mask"], note=scaled_note),
        case("scores_masked", "scores = (q·kᵀ/√d_k).masked_fill(forbid, -inf) in one line.", biased,
             heads + ["scores=masked"] + tail, note=masked_note),
        case("scores_masked_softmax_axis", "scores scaled and masked in one line, then the softmax over the "
             "queries.", biased, heads + ["scores=masked"] + tail, bug="softmax-query-axis",
             first_step="weights", diagnosis=["softmax-axis"], note=masked_note),
        case("scaled_masked", "scores = q·kᵀ, then scaled = (scores/√d_k).masked_fill(forbid, -inf).", causal,
             heads + ["scores", "scaled=masked"] + tail, note=mask_note),
        case("scaled_masked_w_o_transposed", "scaled and masked in one line, then W_o used transposed.", causal,
             heads + ["scores", "scaled=masked"] + tail, bug="w_o-transposed", first_step="output",
             diagnosis=["transpose"], note=mask_note),
        case("weights_unnormalised", "weights = exp(masked - row max), divided by the row sums after A·V.",
             causal, heads + ["scores", "scaled", "masked", "weights=exp", "head_outputs=head_outputs_late",
                              "concat", "output"], note=exp_note),
        case("weights_unnormalised_merge_reshape", "weights before the division, then the heads merged by a "
             "reshape without the transpose.", causal,
             heads + ["scores", "scaled", "masked", "weights=exp", "head_outputs=head_outputs_late", "concat",
                      "output"], bug="merge-reshape", first_step="concat", diagnosis=["head-split"],
             note=exp_note),
        case("q_split", "q, k and v dumped already split into heads, (B, h, n, d).", plain, split_files,
             note=split_note),
        case("q_split_no_scale", "q, k and v already split into heads, then the scale left out.", plain,
             ["q=q_heads", "k=k_heads", "v=v_heads", "scores", "scaled", "masked"] + tail, bug="no-scale",
             first_step="scaled", diagnosis=["scale"], note=split_note),
        case("q_rotated", "q and k dumped split into heads and turned by RoPE.", rotary,
             ["q=q_rot", "k=k_rot", "v=v_heads", "scores=scaled", "masked"] + tail, rope=True, note=rot_note),
        case("q_rotated_double_scale", "q and k split and turned by RoPE, then the scale applied twice.", rotary,
             ["q=q_rot", "k=k_rot", "v=v_heads", "scores", "scaled", "masked"] + tail, rope=True,
             bug="double-scale", first_step="scaled", diagnosis=["scale"], note=rot_note),
        case("q_heads_rotated", "q_heads and k_heads dumped after RoPE.", rotary,
             ["q", "k", "v", "q_heads=q_rot", "k_heads=k_rot", "v_heads", "scores", "scaled", "masked"] + tail,
             rope=True, note=rot_heads_note),
        case("q_heads_rotated_mask_missing", "q_heads and k_heads dumped after RoPE, then no mask.", rotary,
             ["q", "k", "v", "q_heads=q_rot", "k_heads=k_rot", "v_heads", "scores", "scaled", "masked"] + tail,
             rope=True, bug="no-mask", first_step="masked", diagnosis=["mask"], note=rot_heads_note),
    ]


# ------------------------------------------------------------------------------------------- checks

def held_step(tensor):
    """The step of docs/trace-format.md a torch_fused tensor is compared with."""
    return {"head_outputs_late": "head_outputs"}.get(tensor, tensor)


def check(c, folder, P):
    """Every file read back: each one before the planted step agrees with the float64 reference of the
    step it holds, and the planted step does not."""
    ref = reference(P, c["rope"])
    first = c["first_step"]
    seen_first = False
    for entry in c["files"]:
        name, _, tensor = entry.partition("=")
        tensor = tensor or name
        got = np.load(folder / "dumps" / f"{name}.npy").astype(np.float64)
        step = held_step(tensor)
        # The planted step is named for the step it is judged as once the fused files are read.
        judged = {"exp": "weights"}.get(step, step)
        problem = dump_reference.divergence(step, got, ref[step], "float32")
        if judged == first:
            seen_first = True
            if problem is None:
                raise AssertionError(f"{c['name']}: the planted step {first} agrees with the reference")
        elif problem and not seen_first:
            raise AssertionError(f"{c['name']}: {name}.npy ({step}) diverges before {first}: {problem}")
    if first is not None and not seen_first:
        raise AssertionError(f"{c['name']}: no file holds the planted step {first}")


def main(argv):
    if argv:
        sys.exit("usage: make_fused_dumps.py")
    all_cases = cases()
    assert len({c["name"] for c in all_cases}) == len(all_cases), "case names must be unique"
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():  # a case folder of an earlier run, or the manifest; the README stays
        if old.is_dir():
            shutil.rmtree(old)
        elif old.name == "cases.json":
            old.unlink()
    manifest = []
    for c in all_cases:
        P = dump_reference.Problem(c["input"])
        steps = torch_fused(P, c["rope"], c["bug"], c["late"])
        folder = OUT / c["name"]
        (folder / "dumps").mkdir(parents=True)
        (folder / "input.json").write_text(md.format_json(c["input"]) + "\n", encoding="utf-8")
        holds = {}
        for entry in c["files"]:
            name, _, tensor = entry.partition("=")
            np.save(folder / "dumps" / f"{name}.npy", np.ascontiguousarray(steps[tensor or name].numpy()))
            if tensor and held_step(tensor) != name:
                holds[name] = {"exp": "weights"}.get(held_step(tensor), held_step(tensor))
        check(c, folder, P)
        manifest.append({"name": c["name"], "input": f"{c['name']}/input.json", "dumps": f"{c['name']}/dumps",
                         "args": [], "exit": 0 if c["first_step"] is None else 1, "first_step": c["first_step"],
                         "diagnosis": c["diagnosis"], "why": c["why"], "note": c["note"], "holds": holds})
        print(f"{c['name']}: checked")
    text = "[\n" + ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in manifest) + "\n]\n"
    (OUT / "cases.json").write_text(text, encoding="utf-8")
    print(f"wrote {len(manifest)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
