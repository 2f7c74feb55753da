"""The Python module attn_trace (docs/python.md) against the command line it shares its library with.

  - run() on every bundled example, float32 and float64, naive and both: to_json() is byte for byte
    `attn-trace run FILE --json -` with the same options, and every step's array holds the numbers of
    that trace's step, in its shape;
  - the input as a path, JSON text, a dict and keyword arrays (numpy arrays and PyTorch tensors) gives
    the same trace;
  - every malformed input of tests/data/bad/ raises ValueError with the message the command line prints
    after "attn-trace: error: ", and nothing else;
  - a step's array is a view of the trace's own memory, made once: two reads of a 4,096-token trace's
    weights share one buffer, and the array is read-only;
  - compare() on every bundled example, float32 and float64, and with the backward pass: to_json() is
    `attn-trace compare FILE --json -`, str() what `attn-trace compare FILE` prints, and `passed` its
    exit code; str() of a run is what `attn-trace run FILE` prints;
  - explain() of a weight (naive and flash), an output number and a gradient entry: str() is what
    `attn-trace explain` prints, to_json() its --json -, and a question the input cannot answer is its
    ValueError;
  - decode() is `attn-trace decode FILE --json -` byte for byte and prints as the command does, with each
    step's cache, chunks and pages as arrays, and refuses what the command refuses with its message;
  - every function's keywords are its command's options, by the same names.

usage: pytest module_test.py (ATTN_TRACE names the tool, ATTN_SOURCE the checkout, PYTHONPATH holds the
build's python/ folder: CTest sets all three).
"""
import glob
import json
import math
import os
import subprocess
import tempfile

import numpy as np
import pytest
import torch

import attn_trace

TOOL = os.environ["ATTN_TRACE"]
SOURCE = os.environ["ATTN_SOURCE"]
EXAMPLES = sorted(glob.glob(os.path.join(SOURCE, "data", "*.json")))
BAD = sorted(glob.glob(os.path.join(SOURCE, "tests", "data", "bad", "*.json")))


# The text the tool prints depends on COLUMNS and the locale: the same for the tool and the module.
os.environ.update(COLUMNS="100", LANG="C.UTF-8", NO_COLOR="1")
os.environ.pop("LC_ALL", None)
os.environ.pop("LC_CTYPE", None)


def tool(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, check=False)


def numbers(nested):
    """A trace's nested values as floats: its "-inf", "inf" and "nan" strings as numbers."""
    special = {"-inf": -math.inf, "inf": math.inf, "nan": math.nan}
    if isinstance(nested, list):
        return [numbers(x) for x in nested]
    return special.get(nested, nested)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("engine", ["naive", "both"])
def test_every_example_is_the_tools_trace(path, dtype, engine):
    cli = tool("run", path, "--json", "-", "--dtype", dtype, "--engine", engine)
    assert cli.returncode == 0, cli.stderr
    t = attn_trace.run(path, dtype=dtype, engine=engine)
    assert t.to_json() == cli.stdout
    saved = json.loads(cli.stdout)
    assert t.steps == [s["name"] for s in saved["steps"]]
    want_dtype = np.float64 if dtype == "float64" else np.float32
    for s in saved["steps"]:
        a = t[s["name"]]
        assert a.dtype == want_dtype and list(a.shape) == s["shape"], s["name"]
        # The trace writes each float32 in the shortest form that reads back as that float32.
        want = np.array(numbers(s["data"]), dtype=s["dtype"]).reshape(s["shape"])
        np.testing.assert_array_equal(a, want, err_msg=s["name"])
        info = t.info(s["name"])
        assert info["name"] == s["name"] and info["shape"] == s["shape"] and info["formula"]


def test_the_backward_pass_and_its_options():
    path = os.path.join(SOURCE, "data", "gpt_causal.json")
    cli = tool("run", path, "--json", "-", "--backward", "--grad-seed", "3", "--engine", "flash", "--block-q", "2")
    assert cli.returncode == 0, cli.stderr
    t = attn_trace.run(path, backward=True, grad_seed=3, engine="flash", block_q=2)
    assert t.to_json() == cli.stdout
    assert "d_X" in t.steps


def test_the_worked_example():
    t = attn_trace.run(os.path.join(SOURCE, "data", "the_cat_sat.json"))
    np.testing.assert_array_equal(t["q"], np.array([[2, 0], [0, 2], [1, 1]], dtype=np.float32))
    np.testing.assert_array_equal(t["scores"][0], np.array([[0, 4, 2], [4, 0, 2], [2, 2, 2]], dtype=np.float32))
    assert round(float(t["weights"][0, 1, 0]), 3) == 0.768  # "cat" attends to "The", by hand: e^4/(e^4+1+e^2)


def test_every_form_of_input_gives_the_same_trace():
    path = os.path.join(SOURCE, "data", "the_cat_sat.json")
    text = open(path, encoding="utf-8").read()
    value = json.loads(text)
    want = attn_trace.run(path).to_json()
    assert attn_trace.run(text).to_json() == want
    assert attn_trace.run(value).to_json() == want
    arrays = {k: (np.array(v) if k.startswith(("X", "W_")) else v) for k, v in value.items()}
    assert attn_trace.run(**arrays).to_json() == want
    tensors = {k: (torch.tensor(v, dtype=torch.float64) if k.startswith(("X", "W_")) else v) for k, v in value.items()}
    assert attn_trace.run(**tensors).to_json() == want


@pytest.mark.parametrize("path", BAD, ids=os.path.basename)
def test_every_bad_input_is_the_tools_message(path):
    cli = tool("run", path)
    assert cli.returncode == 2
    prefix = "attn-trace: error: "
    assert cli.stderr.startswith(prefix) and cli.stderr.count("\n") == 1, cli.stderr
    with pytest.raises(ValueError) as refused:
        attn_trace.run(path)
    assert str(refused.value) == cli.stderr[len(prefix):].rstrip("\n")


def test_a_bad_option_is_a_value_error():
    path = os.path.join(SOURCE, "data", "the_cat_sat.json")
    for options in ({"engine": "fast"}, {"dtype": "int8"}, {"block_q": 2}, {"steps": ["scroes"]}, {"head": 5}):
        with pytest.raises(ValueError):
            attn_trace.run(path, **options)


def test_a_long_trace_is_not_copied():
    rng = np.random.default_rng(0)
    n, d = 4096, 8
    t = attn_trace.run(X=rng.standard_normal((n, d)).round(3), W_q=np.eye(d), W_k=np.eye(d), W_v=np.eye(d),
                       mask="causal", steps=["weights", "output"])
    first, second = t["weights"], t["weights"]
    assert first.shape == (1, n, n)
    assert first.__array_interface__["data"][0] == second.__array_interface__["data"][0]
    assert np.shares_memory(first, second)
    assert first.base is not None and not first.flags.writeable
    assert float(first[0, -1].sum()) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_comparison_is_the_tools(path, dtype):
    saved = tool("compare", path, "--json", "-", "--dtype", dtype)
    printed = tool("compare", path, "--dtype", dtype)
    assert saved.returncode == printed.returncode and saved.returncode in (0, 1), saved.stderr
    c = attn_trace.compare(path, dtype=dtype)
    assert c.to_json() == saved.stdout
    assert str(c) == printed.stdout
    assert c.passed == (printed.returncode == 0)
    assert c.verdict["tolerance"]["pass"] or not c.passed
    assert set(c.steps) >= {"weights", "output"}


def test_compare_with_the_backward_pass_and_a_run_as_printed():
    path = os.path.join(SOURCE, "data", "gqa.json")
    saved = tool("compare", path, "--json", "-", "--backward", "--block-q", "2", "--block-k", "3")
    assert saved.returncode == 0, saved.stderr
    c = attn_trace.compare(path, backward=True, block_q=2, block_k=3)
    assert c.to_json() == saved.stdout and c.passed and "backward" in c.verdict
    printed = tool("run", path, "--engine", "flash")
    assert str(attn_trace.run(path, engine="flash")) == printed.stdout


EXPLAINED = [
    ("the_cat_sat.json", {"query": "cat", "key": "The"}, ["--query", "cat", "--key", "The"]),
    ("the_cat_sat.json", {"query": 1, "key": 0, "engine": "flash", "block_k": 2},
     ["--query", "1", "--key", "0", "--engine", "flash", "--block-k", "2"]),
    ("gqa.json", {"query": "tea", "key": "like", "head": 3}, ["--query", "tea", "--key", "like", "--head", "3"]),
    ("gpt_causal.json", {"query": "cat", "output": 0}, ["--query", "cat", "--output", "0"]),
    ("the_cat_sat.json", {"grad": "d_weights", "index": (0, 1, 0)}, ["--grad", "d_weights", "--index", "0,1,0"]),
    ("gqa.json", {"grad": "d_W_q", "index": "2,5", "grad_seed": 7},
     ["--grad", "d_W_q", "--index", "2,5", "--grad-seed", "7"]),
]


@pytest.mark.parametrize("name,kwargs,args", EXPLAINED, ids=[" ".join(a) for _, _, a in EXPLAINED])
def test_every_explanation_is_the_tools(name, kwargs, args):
    path = os.path.join(SOURCE, "data", name)
    printed = tool("explain", path, *args)
    saved = tool("explain", path, *args, "--json", "-")
    assert printed.returncode == 0 and saved.returncode == 0, printed.stderr
    e = attn_trace.explain(path, **kwargs)
    assert str(e) == printed.stdout
    assert e.to_json() == saved.stdout and e.data["format"] == "attn-trace.explain"


def test_an_explanation_the_input_cannot_give_is_the_tools_message():
    path = os.path.join(SOURCE, "data", "the_cat_sat.json")
    for kwargs, args in (({"query": "dog", "key": "The"}, ["--query", "dog", "--key", "The"]),
                         ({"query": "cat", "key": "The", "head": 2}, ["--query", "cat", "--key", "The", "--head", "2"]),
                         ({"grad": "d_weights", "index": (0, 9, 0)}, ["--grad", "d_weights", "--index", "0,9,0"])):
        cli = tool("explain", path, *args)
        assert cli.returncode == 2
        with pytest.raises(ValueError) as refused:
            attn_trace.explain(path, **kwargs)
        assert str(refused.value) == cli.stderr[len("attn-trace: error: "):].rstrip("\n")


def without_sources(findings):
    """diff's JSON without what names the dumps (a folder's files, or the module's dict)."""
    d = json.loads(findings)
    d.pop("dumps")
    for step in d["steps"]:
        step.pop("source")
    return d


@pytest.mark.parametrize("gradients", [False, True])
def test_diff_on_tensors_finds_what_the_tool_finds_in_files(gradients):
    path = os.path.join(SOURCE, "data", "gpt_causal.json")
    ours = attn_trace.run(path, backward=gradients)
    dumps = {name: torch.tensor(ours[name]) for name in ("q", "k", "v", "scores", "scaled", "masked")}
    dumps["weights"] = torch.softmax(dumps["masked"], dim=-2)  # the planted bug: the softmax down the columns
    if gradients:
        del dumps["weights"]  # the forward agrees; a gradient under a PyTorch name is wrong instead
        dumps["q.grad"] = torch.tensor(ours["d_q"]) * 2
    d = attn_trace.diff(path, dumps)
    with tempfile.TemporaryDirectory() as folder:
        for name, value in dumps.items():
            np.save(os.path.join(folder, name + ".npy"), value.numpy())
        cli = tool("diff", path, folder, "--json", "-")
    assert cli.returncode == 1 and not d.passed
    assert without_sources(d.to_json()) == without_sources(cli.stdout)
    assert d.first == ("d_q" if gradients else "weights")
    assert d.first == json.loads(cli.stdout)["first_divergence"]["step"]


def safetensors(path, tensors):
    """`tensors` (name -> float32 array) written as a .safetensors file: an 8-byte little-endian header
    length, the header's JSON (each tensor's dtype, shape and byte range), then the bytes."""
    header, blobs, at = {}, [], 0
    for name, value in tensors.items():
        raw = np.ascontiguousarray(value, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(value)), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def test_diff_names_each_tensor_as_the_tool_does_in_a_safetensors_file():
    """A dict of tensors is named as a .safetensors file's are (`dumps_name: name`): diff's JSON from the
    module is the command's, byte for byte, for the same tensors in a file of that name."""
    path = os.path.join(SOURCE, "data", "gpt_causal.json")
    ours = attn_trace.run(path)
    dumps = {name: ours[name] for name in ("q", "k", "v", "scores")}
    dumps["attn_probs"] = np.flip(ours["weights"], axis=-1).copy()  # the keys' order reversed
    with tempfile.TemporaryDirectory() as folder:
        file = os.path.join(folder, "mine.safetensors")
        safetensors(file, dumps)
        cli = tool("diff", path, file, "--name", "weights=attn_probs", "--json", "-")
        d = attn_trace.diff(path, dumps, names={"weights": "attn_probs"}, dumps_name=file)
    assert cli.returncode == 1 and not d.passed
    assert d.to_json() == cli.stdout
    assert json.loads(d.to_json())["steps"][0]["source"] == file + ": q"


def test_diff_of_agreeing_tensors_passes():
    path = os.path.join(SOURCE, "data", "the_cat_sat.json")
    ours = attn_trace.run(path)
    d = attn_trace.diff(path, {"weights": ours["weights"], "attn_out": ours["output"]}, names={"output": "attn_out"})
    assert d.passed and d.first is None and "agrees" in str(d)


@pytest.mark.parametrize("name,options", [("gqa.json", ["--engine", "flash", "--block-q", "2", "--block-k", "2"]),
                                          ("gpt_causal.json", ["--engine", "both", "--dtype", "float64"]),
                                          ("sinks.json", ["--engine", "flash", "--block-k", "1", "--dropout", "0.3"])])
def test_the_tiles_are_the_traces(name, options):
    path = os.path.join(SOURCE, "data", name)
    cli = tool("run", path, *options, "--json", "-")
    assert cli.returncode == 0, cli.stderr
    saved = json.loads(cli.stdout)
    kwargs = {options[k].lstrip("-").replace("-", "_"): options[k + 1] for k in range(0, len(options), 2)}
    for key in ("block_q", "block_k"):
        if key in kwargs:
            kwargs[key] = int(kwargs[key])
    if "dropout" in kwargs:
        kwargs["dropout"] = float(kwargs["dropout"])
    t = attn_trace.run(path, **kwargs)
    assert len(t.tiles) == len(saved["flash"]["tiles"]) > 0
    for mine, theirs in zip(t.tiles, saved["flash"]["tiles"]):
        for key in ("batch", "head", "i", "j", "skipped"):
            assert mine[key] == theirs[key]
        assert list(mine["rows"]) == theirs["rows"] and list(mine["cols"]) == theirs["cols"]
        fields = [k for k in theirs if k not in ("batch", "head", "i", "j", "rows", "cols", "skipped")]
        assert sorted(fields) == sorted(k for k in mine if isinstance(mine[k], np.ndarray))
        for field in fields:
            want = np.array(numbers(theirs[field]), dtype=np.float64 if t.dtype == "float64" else np.float32)
            np.testing.assert_array_equal(mine[field], want.reshape(mine[field].shape), err_msg=field)


@pytest.mark.parametrize("name,options", [("gpt_causal.json", []),
                                          ("gpt_causal.json", ["--split-kv", "2", "--page-size", "2"]),
                                          ("llama_layer.json", ["--prompt", "2", "--dtype", "float64"]),
                                          ("sinks.json", ["--split-kv", "3", "--page-size", "1", "--page-seed", "5"])])
def test_decode_is_the_tools(name, options):
    """decode() gives `attn-trace decode FILE --json -` byte for byte, what the command prints, its exit code,
    and every step's cache, chunks and pages as the trace holds them."""
    path = os.path.join(SOURCE, "data", name)
    cli = tool("decode", path, *options, "--json", "-")
    assert cli.returncode == 0, cli.stderr
    kwargs = {options[k].lstrip("-").replace("-", "_"): options[k + 1] for k in range(0, len(options), 2)}
    for key in ("prompt", "split_kv", "page_size", "page_seed"):
        if key in kwargs:
            kwargs[key] = int(kwargs[key])
    d = attn_trace.decode(path, **kwargs)
    assert d.to_json() == cli.stdout
    assert str(d) == tool("decode", path, *options).stdout
    assert d.passed
    saved = json.loads(cli.stdout)["decode"]
    kind = np.float64 if d.dtype == "float64" else np.float32  # the trace's numbers as the arrays hold them

    def same(mine, theirs, what):
        np.testing.assert_array_equal(mine.ravel(), np.array(numbers(theirs), dtype=kind).ravel(), err_msg=what)

    assert (d.prefill is None) == (saved["prefill"] is None)
    if d.prefill is not None:
        for step in saved["prefill"]["steps"]:
            same(d.prefill[step["name"]], step["data"], step["name"])
    assert len(d.decode_steps) == len(saved["steps"]) > 0
    for mine, theirs in zip(d.decode_steps, saved["steps"]):
        assert mine["position"] == theirs["position"] and mine["cache_length"] == theirs["cache_length"]
        assert sorted(mine["steps"]) == sorted(s["name"] for s in theirs["steps"])
        for step in theirs["steps"]:
            same(mine["steps"][step["name"]], step["data"], step["name"])
        assert (mine["split"] is None) == (theirs.get("split") is None)
        if mine["split"] is not None:
            assert [list(c) for c in mine["split"]["chunks"]] == theirs["split"]["chunks"]
            for key in ("o", "lse", "share", "lse_merged"):
                same(mine["split"][key], theirs["split"][key]["data"], key)
        assert (mine["pages"] is None) == (theirs.get("pages") is None)
        if mine["pages"] is not None:
            assert mine["pages"]["block_tables"] == theirs["pages"]["block_tables"]
            assert mine["pages"]["page_size"] == theirs["pages"]["page_size"]
        assert mine["check"]["bit_exact"] == theirs["check"]["bit_exact"]


def test_a_decode_the_input_cannot_give_is_the_tools_message():
    for name, kwargs, args in (("kv_cache.json", {}, []),  # cross-attention
                               ("gpt_causal.json", {"prompt": 9}, ["--prompt", "9"]),
                               ("gpt_causal.json", {"page_seed": 3}, ["--page-seed", "3"]),
                               ("gpt_causal.json", {"split_kv": 0}, ["--split-kv", "0"])):
        path = os.path.join(SOURCE, "data", name)
        cli = tool("decode", path, *args)
        assert cli.returncode == 2, (name, args)
        with pytest.raises(ValueError) as refused:
            attn_trace.decode(path, **kwargs)
        assert str(refused.value) == cli.stderr[len("attn-trace: error: "):].rstrip("\n")


def test_every_function_takes_its_commands_options_by_the_same_names():
    """The module's keywords are the command line's options (src/request/command_options.hpp defines both): each
    function's signature lists its command's, and each of those is an option of `attn-trace COMMAND --help`."""
    import inspect
    for command, function in (("run", attn_trace.run), ("compare", attn_trace.compare),
                              ("explain", attn_trace.explain), ("diff", attn_trace.diff),
                              ("decode", attn_trace.decode)):
        params = inspect.signature(function).parameters
        help_text = tool(command, "--help").stdout
        shared = [p for p in params if p not in ("input", "keys", "dumps", "names", "dumps_name")]
        assert shared, command
        for keyword in shared:
            assert f"--{keyword.replace('_', '-')} " in help_text or f"--{keyword.replace('_', '-')}\n" in help_text, \
                (command, keyword)
    assert inspect.signature(attn_trace.run).parameters["engine"].default == "naive"
    assert inspect.signature(attn_trace.decode).parameters["prompt"].default is None
    assert inspect.signature(attn_trace.diff).parameters["dtype"].default is None  # the dumps' least precise
    with pytest.raises(ValueError):
        attn_trace.decode(os.path.join(SOURCE, "data", "gpt_causal.json"), split_kv="two")
