#!/usr/bin/python3
"""Find a bug in your own attention with `attn-trace diff`.

    python3 docs/examples/diff_example.py [ATTN_TRACE]     ATTN_TRACE: the binary (default: attn-trace on PATH)
    python3 docs/examples/diff_example.py --dump-only DIR  only write the input and the dumps into DIR

A small PyTorch module, multi-head causal self-attention built from nn.Linear layers, records every
intermediate step while it runs. The script saves those steps as `<step>.npy` files, writes an
attn-trace input from the module's own weights, and asks attn-trace to compare the two:

    attn-trace diff input.json dumps/ --json out.json

It does so four times: for the correct module and for each of three classic bugs planted in it, and
checks that attn-trace finds each bug at the right step with the right diagnosis:

    bug            what the code does wrong                        first step  diagnosis
    no-scale       forgets to multiply the scores by 1/sqrt(d_k)   scaled      scale
    softmax-axis   softmax(dim=-2): normalises over the queries    weights     softmax-axis
    head-split     q.view(B, h, n, d) with no transpose            q_heads     head-split

Exits 1, saying which, if attn-trace answers differently. Everything is written into a temporary
folder that is removed at the end (or into DIR with --dump-only). Needs numpy and torch.
"""

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn

N_TOKENS, D_MODEL, N_HEADS = 5, 8, 2

# bug → (exit code, first diverging step, diagnosis) that attn-trace diff should report
EXPECTED = {
    None: (0, None, None),
    "no-scale": (1, "scaled", "scale"),
    "softmax-axis": (1, "weights", "softmax-axis"),
    "head-split": (1, "q_heads", "head-split"),
}


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention. After forward(), self.steps holds every intermediate under
    attn-trace's step names. `bug` plants one mistake: None, "no-scale", "softmax-axis", "head-split"."""

    def __init__(self, d_model, n_heads, bug=None):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.bug = bug
        self.steps = {}

    def split_heads(self, t):
        B, n, _ = t.shape
        if self.bug == "head-split":
            return t.view(B, self.n_heads, n, self.d_k)  # wrong: mixes tokens and heads
        return t.view(B, n, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, n, d_k)

    def forward(self, x):
        B, n, _ = x.shape
        s = self.steps
        s["q"], s["k"], s["v"] = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        s["q_heads"], s["k_heads"], s["v_heads"] = (self.split_heads(s[t]) for t in ("q", "k", "v"))
        s["scores"] = s["q_heads"] @ s["k_heads"].transpose(-2, -1)
        s["scaled"] = s["scores"] if self.bug == "no-scale" else s["scores"] * self.d_k ** -0.5
        future = torch.ones(n, n, dtype=torch.bool).triu(1)  # key j > query i
        s["masked"] = s["scaled"].masked_fill(future, float("-inf"))
        s["weights"] = torch.softmax(s["masked"], dim=-2 if self.bug == "softmax-axis" else -1)
        s["head_outputs"] = s["weights"] @ s["v_heads"]
        s["concat"] = s["head_outputs"].transpose(1, 2).reshape(B, n, self.n_heads * self.d_k)
        s["output"] = self.out_proj(s["concat"])
        return s["output"]


# The shape of each step (docs/trace-format.md), batch axis first; d_k = d_v and d_out = d_model here.
def step_shapes(B, n, h, d_k, d_model):
    heads = (B, h, n, d_k)
    return {"q": (B, n, h * d_k), "k": (B, n, h * d_k), "v": (B, n, h * d_k), "q_heads": heads,
            "k_heads": heads, "v_heads": heads, "scores": (B, h, n, n), "scaled": (B, h, n, n),
            "masked": (B, h, n, n), "weights": (B, h, n, n), "head_outputs": heads,
            "concat": (B, n, h * d_k), "output": (B, n, d_model)}


def save_steps(model, folder):
    """Every recorded step as folder/<step>.npy, after checking its shape."""
    folder.mkdir(parents=True)
    B, n = model.steps["q"].shape[:2]
    for name, shape in step_shapes(B, n, model.n_heads, model.d_k, D_MODEL).items():
        t = model.steps[name].detach()
        if tuple(t.shape) != shape:
            sys.exit(f"step {name} has shape {tuple(t.shape)}, expected {shape}")
        # attn-trace reads C order only: a transposed view must be copied into it first
        np.save(folder / f"{name}.npy", np.ascontiguousarray(t.numpy().astype(np.float32)))


def attn_trace_input(model, x):
    """The module as an attn-trace input (docs/input-format.md). nn.Linear stores its weight as
    out × in, so the file says "layout": "out_in" and the weights go in as they are."""
    def values(t):
        return t.detach().tolist()  # float32 values (a float64 module's are still these), written exactly
    return {
        "description": "CausalSelfAttention from docs/examples/diff_example.py",
        "n_heads": model.n_heads,
        "mask": "causal",
        "layout": "out_in",
        "X": values(x[0]),  # one sequence, n × d_model: the dumps' batch axis of 1 is accepted
        "W_q": values(model.q_proj.weight), "b_q": values(model.q_proj.bias),
        "W_k": values(model.k_proj.weight), "b_k": values(model.k_proj.bias),
        "W_v": values(model.v_proj.weight), "b_v": values(model.v_proj.bias),
        "W_o": values(model.out_proj.weight), "b_o": values(model.out_proj.bias),
    }


def write_everything(folder):
    """input.json and one dump folder per variant; returns {bug: dump folder}."""
    torch.manual_seed(0)
    model = CausalSelfAttention(D_MODEL, N_HEADS)
    x = torch.randn(1, N_TOKENS, D_MODEL)
    (folder / "input.json").write_text(json.dumps(attn_trace_input(model, x), indent=1) + "\n")
    # The module runs in float64 and its steps are saved in float32, each the float64 value rounded once:
    # the dumps, and the figures attn-trace prints about them, are then the same on every machine. A
    # float32 module would round its sums as its BLAS orders them, which differs from CPU to CPU.
    model.double()
    dumps = {}
    with torch.no_grad():
        for bug in EXPECTED:
            model.bug = bug
            model(x.double())
            dumps[bug] = folder / (bug or "correct")
            save_steps(model, dumps[bug])
    return dumps


def check(binary, folder, bug, dump):
    """Runs attn-trace diff on one dump; returns a list of what is wrong with its answer."""
    out = folder / f"{dump.name}.diff.json"
    command = [binary, "diff", str(folder / "input.json"), str(dump), "--json", str(out)]
    print(f"$ attn-trace diff input.json {dump.name}/ --json {out.name}")
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    print(run.stdout + run.stderr, end="")
    want_exit, want_step, want_code = EXPECTED[bug]
    if run.returncode != want_exit:
        return [f"{dump.name}: exit code {run.returncode}, expected {want_exit}"]
    if not out.is_file():
        return [f"{dump.name}: attn-trace wrote no {out.name}"]
    first = json.loads(out.read_text())["first_divergence"]
    if want_step is None:
        return [] if first is None else [f"{dump.name}: a divergence at {first['step']}, expected none"]
    if first is None:
        return [f"{dump.name}: no divergence, expected one at {want_step}"]
    problems = []
    if first["step"] != want_step:
        problems.append(f"{dump.name}: first divergence at {first['step']}, expected {want_step}")
    if want_code not in first["diagnosis"]:
        problems.append(f"{dump.name}: diagnosis {first['diagnosis']}, expected {want_code!r} among them")
    return problems


def main(argv):
    if argv[:1] == ["--dump-only"]:
        if len(argv) != 2:
            sys.exit("usage: diff_example.py --dump-only DIR")
        folder = pathlib.Path(argv[1])
        folder.mkdir(parents=True, exist_ok=True)
        for bug, dump in write_everything(folder).items():
            print(f"{bug or 'correct'}: {dump}")
        print(f"input: {folder / 'input.json'}")
        return 0
    binary = shutil.which(argv[0] if argv else "attn-trace")
    if binary is None:
        sys.exit(f"attn-trace not found: {argv[0] if argv else 'attn-trace'} (pass the binary as the first argument)")
    problems = []
    with tempfile.TemporaryDirectory(prefix="attn-trace-diff-") as tmp:
        folder = pathlib.Path(tmp)
        for bug, dump in write_everything(folder).items():
            problems += check(binary, folder, bug, dump)
            print()
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    if problems:
        return 1
    print("attn-trace diff found every planted bug where it was planted, and none in the correct module.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
