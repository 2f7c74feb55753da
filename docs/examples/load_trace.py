#!/usr/bin/python3
"""Load an attn-trace trace in Python and check it against PyTorch.

    python3 docs/examples/load_trace.py                    runs attn-trace on data/the_cat_sat.json
    python3 docs/examples/load_trace.py cat.json           reads a trace you saved with --json cat.json
    python3 docs/examples/load_trace.py --attn-trace build/release/attn-trace

Needs numpy and torch. Exits 1 if the trace and PyTorch disagree.
"""

import argparse
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]

# JSON has no infinities or NaN: the trace writes them as these strings.
SPECIAL = {"-inf": -np.inf, "inf": np.inf, "nan": np.nan}


def flatten(nested):
    """The numbers of a nested list, innermost axis last."""
    if isinstance(nested, list):
        return [x for item in nested for x in flatten(item)]
    return [SPECIAL.get(nested, nested)]


def as_array(step):
    """A step of the trace as a numpy array of its shape and dtype."""
    return np.array(flatten(step["data"]), dtype=step["dtype"]).reshape(step["shape"])


def load_trace(args):
    if args.trace:
        with open(args.trace, encoding="utf-8") as f:
            return json.load(f)
    # `--json -` writes the trace to stdout instead of the text
    done = subprocess.run([args.attn_trace, "run", str(args.input), "--json", "-"],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def pytorch_attention(inp, config):
    """The whole computation from the trace's "input", in PyTorch: every step, by name."""
    dtype = {"float32": torch.float32, "float64": torch.float64}[config["dtype"]]

    def tensor(key):
        return torch.tensor(inp[key], dtype=dtype)

    def weight(key):  # (in, out), whatever the layout of the file
        return tensor(key) if inp["layout"] == "in_out" else tensor(key).T

    def bias(key, width):
        return tensor(key) if key in inp else torch.zeros(width, dtype=dtype)

    h, g, d_k, d_v = config["n_heads"], config["n_kv_heads"], config["d_k"], config["d_v"]
    X = tensor("X")                                                       # (n, d_model)
    C = torch.tensor(inp["context"]["X"], dtype=dtype) if "context" in inp else X  # (m, d_context)
    n, m = X.shape[0], C.shape[0]

    s = {}
    s["q"] = X @ weight("W_q") + bias("b_q", h * d_k)                    # (n, h·d_k)
    s["k"] = C @ weight("W_k") + bias("b_k", g * d_k)                    # (m, g·d_k)
    s["v"] = C @ weight("W_v") + bias("b_v", g * d_v)                    # (m, g·d_v)
    s["q_heads"] = s["q"].reshape(n, h, d_k).transpose(0, 1)              # (h, n, d_k)
    s["k_heads"] = s["k"].reshape(m, g, d_k).transpose(0, 1)              # (g, m, d_k)
    s["v_heads"] = s["v"].reshape(m, g, d_v).transpose(0, 1)              # (g, m, d_v)
    # grouped-query attention: query head i reads key/value head i // (h // g)
    K = s["k_heads"].repeat_interleave(h // g, dim=0)                     # (h, m, d_k)
    V = s["v_heads"].repeat_interleave(h // g, dim=0)                     # (h, m, d_v)
    s["scores"] = s["q_heads"] @ K.transpose(1, 2)                        # (h, n, m)
    s["scaled"] = s["scores"] * torch.tensor(config["scale"], dtype=dtype)
    allowed = causal_or_all(config["mask"], n, m)                         # (n, m)
    s["masked"] = s["scaled"].masked_fill(~allowed, float("-inf"))
    s["weights"] = torch.nn.functional.softmax(s["masked"], dim=-1)      # (h, n, m)
    s["head_outputs"] = s["weights"] @ V                                  # (h, n, d_v)
    s["concat"] = s["head_outputs"].transpose(0, 1).reshape(n, h * d_v)   # (n, h·d_v)
    s["output"] = s["concat"] @ weight("W_o") + bias("b_o", weight("W_o").shape[1]) if "W_o" in inp else s["concat"]
    return s


def causal_or_all(mask, n, m):
    """Which keys each query may see: every key, or a causal band shifted by the mask's offset."""
    if mask["type"] == "none":
        return torch.ones(n, m, dtype=torch.bool)
    if mask["type"] == "causal":  # key j is visible to query i when j <= i + offset
        return torch.ones(n, m, dtype=torch.bool).tril(diagonal=mask["offset"])
    sys.exit(f"this example handles masks none and causal, not {mask['type']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", help="a trace written by attn-trace run ... --json TRACE")
    parser.add_argument("--attn-trace", default=shutil.which("attn-trace") or str(REPO / "build/release/attn-trace"),
                        help="the attn-trace binary to run when no trace is given")
    parser.add_argument("--input", default=str(REPO / "data/the_cat_sat.json"), help="the input to run it on")
    args = parser.parse_args()

    trace = load_trace(args)
    steps = {step["name"]: as_array(step) for step in trace["steps"]}
    config, tokens = trace["config"], trace["input"]["tokens"]
    if config["batch"] is not None or config["head"] is not None:
        sys.exit("this example reads a single (unbatched) input traced with every head")
    print(f"{trace['generator']}, {config['dtype']}: {', '.join(steps)}")

    # The attention weights of head 0, one row per query, one column per key.
    weights = steps["weights"][0]
    keys = trace["input"].get("context", {}).get("tokens", tokens)
    print("\nweights, head 0 (row: query, column: key)")
    print("      " + "".join(f"{k:>8}" for k in keys))
    for token, row in zip(tokens, weights):
        print(f"{token:<6}" + "".join(f"{w:8.4f}" for w in row))

    # float32 arithmetic, summed in another order: agree to a few units in the last place
    tol = dict(rtol=1e-5, atol=1e-6) if config["dtype"] == "float32" else dict(rtol=1e-12, atol=1e-14)

    # 1. The softmax alone: PyTorch's softmax of the trace's masked (scaled) scores.
    masked = torch.from_numpy(steps["masked"])
    np.testing.assert_allclose(torch.nn.functional.softmax(masked, dim=-1).numpy(), steps["weights"], **tol,
                               err_msg="weights: softmax of the trace's masked scores")
    print("\nsoftmax(masked) in PyTorch matches the trace's weights")

    # 2. Everything, from the trace's own input: Q = X·W_q ... Y = O·W_o.
    ours = pytorch_attention(trace["input"], config)
    for name, value in steps.items():
        np.testing.assert_allclose(ours[name].numpy(), value, **tol, err_msg=f"step {name}")
    print(f"PyTorch from the trace's input matches all {len(steps)} steps ({config['dtype']}, rtol {tol['rtol']})")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"MISMATCH {e}")
