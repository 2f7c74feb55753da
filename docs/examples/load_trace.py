#!/usr/bin/python3
"""Load an attn-trace trace in Python and check it against PyTorch.

    python3 docs/examples/load_trace.py                    runs attn-trace on data/the_cat_sat.json
    python3 docs/examples/load_trace.py cat.json           reads a trace you saved with --json cat.json
    python3 docs/examples/load_trace.py --input data/gqa.json  runs attn-trace on another input
    (--attn-trace PATH runs another binary, as a build tree's build/release/attn-trace)

It redoes the computation in PyTorch from the trace's own input and compares every number the trace
holds: every step that is there, the flash pass (tiles, lse, output) and the outputs of `compare`.
It reads every trace attn-trace writes: one sequence or a batch, every head or one (--head), every
mask, self- or cross-attention, either layout, with or without biases and W_o, any engine. It refuses
only a document that is not an attn-trace trace, or one of a newer format version than it knows.

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
FORMAT, VERSION = "attn-trace.trace", 1  # the format this script knows (docs/trace-format.md)

# JSON has no infinities or NaN: the trace writes them as these strings.
SPECIAL = {"-inf": -np.inf, "inf": np.inf, "nan": np.nan}

# float32 arithmetic, summed in another order: agree to a few units in the last place
TOLERANCE = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-14)}
TORCH_DTYPE = {"float32": torch.float32, "float64": torch.float64}

# The axes of the flash pass's `lse` and `output`, named as the steps name theirs.
FLASH_DIMS = {"lse": ["batch", "head", "query"], "output": ["batch", "query", "d_out"]}


def flatten(nested):
    """The numbers of a nested list, innermost axis last."""
    if isinstance(nested, list):
        return [x for item in nested for x in flatten(item)]
    return [SPECIAL.get(nested, nested)]


def as_array(step):
    """A step of the trace as a numpy array of its shape and dtype."""
    return np.array(flatten(step["data"]), dtype=step["dtype"]).reshape(step["shape"])


def as_numbers(nested, dtype):
    """Any other nested list of the trace (a tile's S, lse, an output) as a numpy array."""
    return np.array(flatten(nested), dtype=dtype).reshape(np.shape(nested))


def load_trace(args):
    if args.trace:
        with open(args.trace, encoding="utf-8") as f:
            return json.load(f)
    # `--json -` writes the trace to stdout instead of the text
    done = subprocess.run([args.attn_trace, "run", str(args.input), "--json", "-"],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def refuse_unknown(trace):
    """Stop on a document this script cannot read: fields may be added within a version, never
    renamed, so a newer version may mean something else by the same names."""
    if not isinstance(trace, dict) or trace.get("format") != FORMAT:
        sys.exit(f"not an attn-trace trace: its format is not {FORMAT!r}")
    if trace.get("version", 0) > VERSION:
        sys.exit(f"a trace of format version {trace['version']}: this script knows version {VERSION} only")


# ---- the computation in PyTorch ------------------------------------------------------------------

def allowed_keys(mask, batch, n, m):
    """Which keys each query may see, (batch, n, m), by the rules of docs/input-format.md ("Masks").
    `mask` is the trace's config.mask: the input's mask with its alignment offset worked out."""
    i = torch.arange(n).reshape(n, 1)  # the query, down the rows
    j = torch.arange(m).reshape(1, m)  # the key, along the columns
    kind = mask["type"]
    if kind == "none":
        allowed = torch.ones(n, m, dtype=torch.bool)
    elif kind in ("causal", "sliding_window"):
        # The diagonal: top_left matches query i with key i, bottom_right the last query with the
        # last key, so query i is matched with key i + offset. The trace says which offset it used.
        offset = {"top_left": 0, "bottom_right": m - n}[mask["align"]]
        if mask["offset"] != offset:
            raise AssertionError(f"config.mask: offset {mask['offset']}, but align {mask['align']} "
                                 f"with n = {n} queries and m = {m} keys means offset {offset}")
        allowed = j <= i + offset                      # causal: nothing after the diagonal
        if kind == "sliding_window":                   # and only the `window` keys ending there
            allowed = allowed & (j > i + offset - mask["window"])
    elif kind == "padding":
        keep = torch.tensor(mask["keep"]) == 1         # (m) for all items, or (batch, m)
        allowed = keep.unsqueeze(-2).expand(*keep.shape[:-1], n, m)  # a hidden key is hidden from every query
    elif kind == "custom":
        allowed = torch.tensor(mask["allow"], dtype=torch.bool)      # (n, m) for all items, or (batch, n, m)
    else:
        sys.exit(f"unknown mask type {kind!r}: docs/input-format.md has none, causal, sliding_window, padding, custom")
    return allowed.expand(batch, n, m)


def softmax_rows(masked):
    """Softmax along each row, with attn-trace's rule for a row the mask leaves with no key at all.
    PyTorch's softmax of a row of -inf divides 0 by 0 and gives NaN; attn-trace gives that row
    all-zero weights, and so an all-zero head output (docs/input-format.md, "A query with nothing to see")."""
    nothing_to_see = (masked == -torch.inf).all(dim=-1, keepdim=True)
    return torch.nn.functional.softmax(masked, dim=-1).masked_fill(nothing_to_see, 0.0)


def philox4x32_10(counter, key):
    """Philox4x32 with 10 rounds (docs/input-format.md, "Dropout"), on numpy arrays of uint64 holding
    32-bit words: `counter` is four arrays, `key` two numbers. Returns the first word of the result."""
    mask32 = np.uint64(0xFFFFFFFF)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for round_ in range(10):
        if round_ > 0:  # the key walks by two Weyl constants between rounds
            k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask32, (k1 + np.uint64(0xBB67AE85)) & mask32
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2  # 64-bit products of 32-bit words
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & mask32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & mask32
    return c0


def keep_mask(dropout, B, h, n, m):
    """Dropout's keep mask (B, h, n, m): weight (b, head, i, j) is kept where the first word of Philox4x32-10
    of the counter (j, i, head, b) under the key (the seed's low and high 32 bits) is >= floor(p · 2^32)."""
    b, head, i, j = np.meshgrid(np.arange(B), np.arange(h), np.arange(n), np.arange(m), indexing="ij")
    seed = dropout["seed"]
    first = philox4x32_10((j, i, head, b), (seed & 0xFFFFFFFF, seed >> 32))
    return torch.from_numpy(first >= np.uint64(int(dropout["p"] * 2**32)))


def rotate(x, positions, rope, tensor):
    """RoPE on x (B, heads, tokens, d_k): the first `dims` features turn in pairs by position · θ_i;
    "half" pairs feature i with i + dims/2 (Hugging Face's rotate-half), "interleaved" 2i with 2i + 1."""
    dims, theta = rope["dims"], torch.tensor(rope["frequencies"], dtype=torch.float64)
    angle = torch.tensor(positions, dtype=torch.float64)[:, None] * theta[None, :]   # (tokens, dims/2)
    cos, sin = tensor(torch.cos(angle).tolist()), tensor(torch.sin(angle).tolist())
    out = x.clone()
    if rope["style"] == "half":
        a, b = x[..., : dims // 2], x[..., dims // 2 : dims]
        out[..., : dims // 2], out[..., dims // 2 : dims] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2], out[..., 1:dims:2] = a * cos - b * sin, b * cos + a * sin
    return out


def pytorch_attention(inp, config, dtype, inputs_in=None):
    """The whole computation from the trace's "input", in PyTorch: every step, by name.

    Always for every batch item and every head: a single sequence is a batch of one, so `q` is
    (batch, n, h·d_k), `q_heads` (batch, h, n, d_k) and so on. `as_in_trace` then cuts each tensor to
    the axes the trace kept. `inputs_in` rounds the input's numbers and the scale to that dtype first:
    the reference of `compare` works one precision up on the numbers the working dtype holds."""
    def tensor(value):
        if inputs_in is not None:
            return torch.tensor(value, dtype=inputs_in).to(dtype)
        return torch.tensor(value, dtype=dtype)

    def weight(key):  # (in, out), whatever the layout of the file
        return tensor(inp[key]) if inp["layout"] == "in_out" else tensor(inp[key]).T

    def bias(key, width):
        return tensor(inp[key]) if key in inp else torch.zeros(width, dtype=dtype)

    h, g, d_k, d_v = config["n_heads"], config["n_kv_heads"], config["d_k"], config["d_v"]
    X = tensor(inp["X"])                                                  # (n, d_model), or (batch, n, d_model)
    C = tensor(inp["context"]["X"]) if "context" in inp else X            # the keys' sequence: (m, d_context)
    if config["batch"] is None:
        X, C = X.unsqueeze(0), C.unsqueeze(0)                             # a batch of one
    B, n, m = X.shape[0], X.shape[1], C.shape[1]

    s = {}
    s["q"] = X @ weight("W_q") + bias("b_q", h * d_k)                    # (B, n, h·d_k)
    s["k"] = C @ weight("W_k") + bias("b_k", g * d_k)                    # (B, m, g·d_k)
    s["v"] = C @ weight("W_v") + bias("b_v", g * d_v)                    # (B, m, g·d_v)
    s["q_heads"] = s["q"].reshape(B, n, h, d_k).transpose(1, 2)           # (B, h, n, d_k)
    s["k_heads"] = s["k"].reshape(B, m, g, d_k).transpose(1, 2)           # (B, g, m, d_k)
    s["v_heads"] = s["v"].reshape(B, m, g, d_v).transpose(1, 2)           # (B, g, m, d_v)
    Q, K = s["q_heads"], s["k_heads"]
    if "rope" in config:  # rotary positions: each pair of features turns by position · θ_i
        rope = inp.get("rope", {})
        q_pos = rope.get("positions", list(range(n)))
        k_pos = rope.get("context_positions", list(range(m))) if "context" in inp else q_pos
        s["q_rot"] = Q = rotate(Q, q_pos, config["rope"], tensor)
        s["k_rot"] = K = rotate(K, k_pos, config["rope"], tensor)
    # grouped-query attention: query head i reads key/value head i // (h // g)
    K = K.repeat_interleave(h // g, dim=1)                                # (B, h, m, d_k)
    V = s["v_heads"].repeat_interleave(h // g, dim=1)                     # (B, h, m, d_v)
    s["scores"] = Q @ K.transpose(2, 3)                                   # (B, h, n, m)
    s["scaled"] = s["scores"] * tensor(config["scale"])
    before_mask = s["scaled"]
    if "softcap" in config:  # Gemma 2's soft cap, before ALiBi's bias and the mask: c·tanh(S'/c)
        c = tensor(config["softcap"])
        s["capped"] = before_mask = c * torch.tanh(s["scaled"] / c)
    if "alibi" in config:  # ALiBi: -slope_h · (position of query i - position of key j), added to the scores
        a = config["alibi"]
        distance = (torch.tensor(a["query_positions"], dtype=torch.float64)[:, None]
                    - torch.tensor(a["key_positions"], dtype=torch.float64)[None, :])      # (n, m)
        slopes = torch.tensor(a["slopes"], dtype=torch.float64)[:, None, None]             # (h, 1, 1)
        s["bias"] = before_mask = before_mask + (-slopes * distance).to(dtype)             # (B, h, n, m)
    s["allowed"] = allowed_keys(config["mask"], B, n, m)                  # (B, n, m), the same for every head
    s["masked"] = before_mask.masked_fill(~s["allowed"].unsqueeze(1), -torch.inf)
    if "sinks" in config:  # one more logit per head, of no value: the row's weights and its share sum to 1
        sinks = tensor(config["sinks"])[None, :, None, None].expand(B, h, n, 1)
        with_sink = torch.softmax(torch.cat([s["masked"], sinks], dim=-1), dim=-1)
        s["weights"], s["sink_weights"] = with_sink[..., :m], with_sink[..., m]
        # What the flash pass keeps of each row: log Σ exp, the sink's logit included.
        s["lse"] = torch.logsumexp(torch.cat([s["masked"], sinks], dim=-1), dim=-1)
    else:
        s["weights"] = softmax_rows(s["masked"])                          # (B, h, n, m)
        # What the flash pass keeps of each row: log Σ exp(masked), -inf for a row with no key.
        s["lse"] = torch.logsumexp(s["masked"], dim=-1)                   # (B, h, n)
    read = s["weights"]
    if "dropout" in config:  # the kept weights scaled by 1/(1 - p) (formed in float64, then rounded), the rest 0
        keep = keep_mask(config["dropout"], B, h, n, m)
        factor = torch.tensor(1 / (1 - config["dropout"]["p"]), dtype=dtype)
        s["dropped"] = read = torch.where(keep, s["weights"] * factor, 0.0)
    s["head_outputs"] = read @ V                                          # (B, h, n, d_v)
    s["concat"] = s["head_outputs"].transpose(1, 2).reshape(B, n, h * d_v)  # (B, n, h·d_v)
    s["output"] = s["concat"] @ weight("W_o") + bias("b_o", weight("W_o").shape[1]) if "W_o" in inp else s["concat"]
    return s


def as_in_trace(ours, dims, config):
    """One of PyTorch's tensors cut to the axes the trace kept, named by `dims`: no batch axis for a
    single sequence; with --head H, only head H on a head axis and, on a kv_head axis, the key/value
    head that H reads."""
    if config["batch"] is None:
        ours = ours[0]
        dims = [d for d in dims if d != "batch"]
    head = config["head"]
    if head is not None:
        kv_head = head // (config["n_heads"] // config["n_kv_heads"])
        for axis, name in enumerate(dims):
            if name == "head":
                ours = ours.narrow(axis, head, 1)
            if name == "kv_head":
                ours = ours.narrow(axis, kv_head, 1)
    return ours.numpy()


# ---- the checks ----------------------------------------------------------------------------------

def check_softmax(steps, config, tol):
    """The softmax alone: PyTorch's softmax of the trace's own masked scores gives its weights (with
    sinks, of the masked scores and each head's sink, whose share is left out of the weights)."""
    masked = torch.from_numpy(steps["masked"])
    if "sinks" in config:
        sinks = torch.tensor(config["sinks"], dtype=masked.dtype)
        head = -3  # the axis of the heads: (head, query, key), after the batch axis of a batch
        if config["head"] is not None:
            sinks = sinks[config["head"]:config["head"] + 1]
        shape = [1] * masked.dim()
        shape[head] = sinks.shape[0]
        sinks = sinks.reshape(shape).expand(*masked.shape[:-1], 1)
        weights = torch.softmax(torch.cat([masked, sinks], dim=-1), dim=-1)[..., :-1]
    else:
        weights = softmax_rows(masked)
    np.testing.assert_allclose(weights.numpy(), steps["weights"], **tol,
                               err_msg="weights: softmax of the trace's masked scores")
    print("softmax(masked) in PyTorch matches the trace's weights")


def check_steps(trace, steps, ours, tol):
    """Every step the trace holds, by name, against PyTorch's from the trace's input."""
    for step in trace["steps"]:
        name = step["name"]
        np.testing.assert_allclose(as_in_trace(ours[name], step["dims"], trace["config"]), steps[name], **tol,
                                   err_msg=f"step {name}")


def check_empty_rows(trace, ours):
    """The rows the trace lists as having nothing to attend are those PyTorch's mask leaves empty."""
    empty = (~ours["allowed"]).all(dim=-1).nonzero().tolist()            # [[batch, query], ...]
    if "sinks" in trace["config"]:
        empty = []  # a row the mask leaves with no key still has its sink: it gives all its weight to nothing
    listed = [[row["batch"], row["query"]] for row in trace["empty_rows"]]
    assert sorted(listed) == sorted(empty), f"empty_rows: the trace lists {listed}, the mask leaves {empty} empty"
    for b, i in empty:
        item = f" of batch item {b}" if trace["config"]["batch"] is not None else ""
        print(f"query {i}{item} has no key to attend: its weights and head output are zero, its lse -inf")


def check_flash(flash, ours, config, tol):
    """The flash pass: its lse and output, and every tile against the block of PyTorch's scores it covers."""
    dtype = config["dtype"]
    checked = ["lse", "output"]
    if flash["lse"] == [] and flash["tiles"] == []:
        # attn-trace 0.1.0 keeps lse only with the tiles: `--steps` without tiles saves "lse": []
        print("flash.lse: empty in this trace (saved with --steps that leaves out tiles), not checked")
        checked = ["output"]
    for key in checked:
        np.testing.assert_allclose(as_in_trace(ours[key], FLASH_DIMS[key], config), as_numbers(flash[key], dtype),
                                   **tol, err_msg=f"flash.{key}")
    masked, allowed = ours["masked"].numpy(), ours["allowed"].numpy()
    for tile in flash["tiles"]:
        b, head, (r0, r1), (c0, c1) = tile["batch"], tile["head"], tile["rows"], tile["cols"]
        where = f"flash tile batch {b}, head {head}, i {tile['i']}, j {tile['j']}"
        if tile["skipped"]:  # skipped only when the mask allows no query-key pair in it
            assert not allowed[b, r0:r1, c0:c1].any(), f"{where}: skipped, but the mask allows some of it"
        else:                # S: the scaled scores of these rows and columns, -inf where the mask forbids
            np.testing.assert_allclose(as_numbers(tile["S"], dtype), masked[b, head, r0:r1, c0:c1], **tol,
                                       err_msg=f"{where}: S")
    for final in flash["finals"]:  # each query tile's rows of head_outputs and lse
        b, head, (r0, r1) = final["batch"], final["head"], final["rows"]
        for key, step in (("O", "head_outputs"), ("lse", "lse")):
            np.testing.assert_allclose(as_numbers(final[key], dtype), ours[step][b, head, r0:r1].numpy(), **tol,
                                       err_msg=f"flash final batch {b}, head {head}, i {final['i']}: {key}")
    print(f"flash: {' and '.join(checked)}, {len(flash['tiles'])} tiles and {len(flash['finals'])} finals match PyTorch")


def check_compare(compare, ours, reference, config, tol):
    """`compare`'s three outputs: naive and flash as PyTorch's in the trace's dtype, the reference as
    PyTorch's in float64 (for a float64 run attn-trace's reference is 80-bit, rounded to float64 in the
    trace, so float64 arithmetic agrees with it to float64's tolerance)."""
    for key in ("naive", "flash"):
        np.testing.assert_allclose(as_in_trace(ours["output"], FLASH_DIMS["output"], config),
                                   as_numbers(compare["outputs"][key], config["dtype"]), **tol,
                                   err_msg=f"compare.outputs.{key}")
    np.testing.assert_allclose(as_in_trace(reference["output"], FLASH_DIMS["output"], config),
                               as_numbers(compare["outputs"]["reference"], "float64"), **TOLERANCE["float64"],
                               err_msg="compare.outputs.reference")
    print("compare: the naive, flash and reference outputs match PyTorch")



# ---- what a person sees --------------------------------------------------------------------------

def labels(tokens, batch):
    """One list of labels per batch item: a batch gives one list per item or shares one list."""
    return tokens if tokens and isinstance(tokens[0], list) else [tokens] * batch


def print_weights(trace, steps, ours):
    """The attention weights of the first head the trace holds, one row per query, one column per key,
    for each batch item. A flash trace has no weights step: PyTorch's weights are shown instead."""
    config, inp = trace["config"], trace["input"]
    dims = ["batch", "head", "query", "key"]
    weights, whose = (steps["weights"], "") if "weights" in steps else (as_in_trace(ours["weights"], dims, config), ", PyTorch's")
    if config["batch"] is None:
        weights = weights[np.newaxis]
    batch = weights.shape[0]
    queries = labels(inp["tokens"], batch)
    keys = labels(inp["context"].get("tokens", []), batch) if "context" in inp else queries
    head = config["head"] or 0
    for b in range(batch):
        item = f"batch {b}, " if config["batch"] is not None else ""
        print(f"\nweights, {item}head {head}{whose} (row: query, column: key)")
        if keys[b]:
            print("      " + "".join(f"{k:>8}" for k in keys[b]))
        for token, row in zip(queries[b], weights[b, 0]):
            print(f"{token:<6}" + "".join(f"{w:8.4f}" for w in row))
    print()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", help="a trace written by attn-trace run ... --json TRACE")
    parser.add_argument("--attn-trace", default=shutil.which("attn-trace") or str(REPO / "build/release/attn-trace"),
                        help="the attn-trace binary to run when no trace is given")
    parser.add_argument("--input", default=str(REPO / "data/the_cat_sat.json"), help="the input to run it on")
    args = parser.parse_args(argv)

    trace = load_trace(args)
    refuse_unknown(trace)
    steps = {step["name"]: as_array(step) for step in trace["steps"]}
    config = trace["config"]
    print(f"{trace['generator']}, {config['dtype']}, engine {config['engine']}: {', '.join(steps)}")
    tol = TOLERANCE[config["dtype"]]

    try:
        # Everything, from the trace's own input: Q = X·W_q ... Y = O·W_o, and the flash pass's lse.
        ours = pytorch_attention(trace["input"], config, TORCH_DTYPE[config["dtype"]])
        print_weights(trace, steps, ours)
        if "masked" in steps and "weights" in steps:  # a flash trace has neither
            check_softmax(steps, config, tol)
        check_steps(trace, steps, ours, tol)
        print(f"PyTorch from the trace's input matches all {len(steps)} steps ({config['dtype']}, rtol {tol['rtol']})")
        check_empty_rows(trace, ours)
        if "flash" in trace:
            check_flash(trace["flash"], ours, config, tol)
        if "compare" in trace:
            reference = pytorch_attention(trace["input"], config, torch.float64, inputs_in=TORCH_DTYPE[config["dtype"]])
            check_compare(trace["compare"], ours, reference, config, tol)
    except AssertionError as e:
        print(f"MISMATCH {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
