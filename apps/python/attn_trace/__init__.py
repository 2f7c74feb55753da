"""attn-trace in Python (docs/python.md): every step of attention as a numpy array, from the same library
as the command line, in the same process.

    import attn_trace
    t = attn_trace.run("data/the_cat_sat.json")
    t["weights"]          # a numpy array of the trace format's shape
    t.steps               # the steps' names, in the order they ran
    t.info("scores")      # its formula, axes, shape and meaning
    t.tiles               # with engine="flash": the tile walk, each tile's S, m, l, alpha, P, O as arrays
    t.to_json()           # the trace format's JSON, byte for byte `attn-trace run FILE --json -`
    print(t)              # what `attn-trace run FILE` prints
    t                     # in a notebook: the report of the trace (attn-trace report)
    c = attn_trace.compare("data/gqa.json")
    c.passed, c.verdict   # compare's verdict, and its errors and bound as the trace format's dict
    print(attn_trace.explain("data/the_cat_sat.json", "cat", "The"))   # attn-trace explain ... --query cat --key The
    d = attn_trace.diff("data/the_cat_sat.json", {"q": my_q, "attn_probs": my_weights}, names={"weights": "attn_probs"})
    d.first               # the first step that goes wrong (None: every dumped step agrees); print(d) says why
    k = attn_trace.decode("data/gpt_causal.json", split_kv=2)   # attn-trace decode ... --split-kv 2
    k.decode_steps[0]["steps"]["k_cache"], k.decode_steps[0]["split"]["lse"], k.passed

The input may be a path, JSON text, a dict, or the input's keys as keyword arguments (X=..., W_q=...,
tokens=[...], n_heads=2, ...), their arrays as numpy arrays, PyTorch tensors or nested lists. A refused
input or option raises ValueError with the command line's one-line message. Each function's options are
its command's, by their names with "_" for "-": the library defines them once for the command line, this
module and the explorer (src/request/command_options.hpp), and each function's signature is made from
that definition.
"""
import inspect
import json
import os

import numpy as np

from . import _core

__version__ = _core.version
__all__ = ["run", "compare", "explain", "diff", "decode", "Trace", "Comparison", "Explanation", "Diff", "Decode"]


def _plain(value):
    """`value` as JSON's types: arrays and tensors as nested lists of numbers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if hasattr(value, "detach"):  # a PyTorch tensor, perhaps on a device or needing grad
        value = value.detach().cpu()
    if hasattr(value, "tolist"):
        return value.tolist()
    return np.asarray(value).tolist()


def _input(source, keys):
    """The input as (JSON text or None, the file to read or None)."""
    if keys:
        if source is not None:
            raise ValueError("give the input or its keys as keyword arguments, not both")
        if "heads" in keys and "n_heads" not in keys:
            keys["n_heads"] = keys.pop("heads")
        return json.dumps(_plain(keys)), None
    if isinstance(source, dict):
        return json.dumps(_plain(source)), None
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return source, None
    if isinstance(source, (str, os.PathLike)):
        return None, os.fspath(source)
    raise TypeError("the input is a path, JSON text, a dict, or the input's keys as keyword arguments")


class Trace:
    """One run's trace: its steps as numpy arrays (read-only views of the trace's own memory), in the
    order the engine ran them."""

    def __init__(self, core):
        self._core = core
        self.steps = list(core.steps)
        self.dtype = core.dtype
        self.engine = core.engine
        self._index = {name: i for i, name in enumerate(self.steps)}
        self._tiles = None

    def _at(self, step):
        if step not in self._index:
            raise KeyError(f"{step}: not a step of this trace; it has {', '.join(self.steps)}")
        return self._index[step]

    def __getitem__(self, step):
        """The numbers of `step` as a numpy array of its shape: float64 for a float64 trace, float32
        otherwise (float16 and bfloat16 values are float32 values)."""
        return self._core.array(self._at(step))

    def __contains__(self, step):
        return step in self._index

    def __iter__(self):
        return iter(self.steps)

    def __len__(self):
        return len(self.steps)

    @property
    def tiles(self):
        """The flash pass's tile walk (engine "flash" or "both"), in the order it ran: one dict a tile with
        batch, head, i, j, rows and cols (begin, end), skipped (by the mask), and its numbers as arrays:
        S, m_prev, m_new, alpha, P, l_prev, l_new, O (and P_drop with dropout). Empty without flash."""
        if self._tiles is None:
            self._tiles = self._core.tiles()
        return self._tiles

    def info(self, step):
        """What `step` is: its name, formula (for this input), axes, shape and meaning."""
        return self._core.info(self._at(step))

    def to_json(self):
        """The trace format's JSON (docs/trace-format.md), as `attn-trace run FILE --json -` writes it."""
        return self._core.to_json()

    def _repr_html_(self):
        """The report of this trace (attn-trace report), one self-contained page: a notebook shows it."""
        return self._core.report_html()

    def __str__(self):
        """What `attn-trace run FILE` prints to a pipe (COLUMNS wide, no colour)."""
        return self._core.text()

    def __repr__(self):
        return f"<attn_trace.Trace: {self.engine}, {self.dtype}, {len(self.steps)} steps>"


class Comparison(Trace):
    """A run of `attn-trace compare`: naive and flash in the dtype, naive one precision up as the
    reference, every step of both, and the verdict max|flash - ref| <= 2 max|naive - ref| + noise."""

    @property
    def passed(self):
        """Whether flash passed (and, with the backward pass, every gradient): compare's exit code 0."""
        return self._core.passed

    @property
    def verdict(self):
        """The trace format's `compare` object as a dict: the three outputs' errors, the engines'
        memory, the rule with its bound and `pass` ("tolerance"), and the gradients' ("backward")."""
        return json.loads(self.to_json())["compare"]

    def __str__(self):
        """What `attn-trace compare FILE` prints to a pipe: the comparison and its verdict."""
        return self._core.text()

    def __repr__(self):
        return f"<attn_trace.Comparison: {self.dtype}, {'PASS' if self.passed else 'FAIL'}>"


class Decode(Trace):
    """A run of `attn-trace decode`: the prompt's causal pass (prefill), then every later token one decode step
    against the KV cache, checked against run's causal pass. Its steps hold the whole output (`output`);
    `prefill` the prompt's steps as arrays (None without a prompt); `decode_steps` one dict a token, its
    position, cache_length, its steps as arrays (the new token's q … k_rot, the cache as the row reads it,
    k_cache and v_cache, and the row's scores … output), its chunks with split_kv (`split`: chunks, o, lse,
    share, lse_merged), its paged cache's block tables (`pages`) and its `check`; `passed` is decode's exit
    code 0."""

    def __init__(self, core):
        super().__init__(core)
        parts = core.decode()
        self.prefill = parts["prefill"]
        self.decode_steps = parts["steps"]

    @property
    def passed(self):
        """Whether every decoded row is within compare's rule of run's causal pass: decode's exit code 0."""
        return self._core.passed

    def __str__(self):
        """What `attn-trace decode FILE` prints to a pipe."""
        return self._core.text()

    def __repr__(self):
        return f"<attn_trace.Decode: {self.dtype}, {len(self.decode_steps)} decode steps, {'PASS' if self.passed else 'FAIL'}>"


class _Said:
    """What a command says, kept as it says it: str() its text, to_json() its --json -, `data` that JSON
    as a dict."""

    def __init__(self, text, json_text):
        self._text = text
        self._json = json_text

    @property
    def data(self):
        return json.loads(self._json)

    def to_json(self):
        return self._json

    def __str__(self):
        return self._text

    def __repr__(self):
        return self._text


class Explanation(_Said):
    """What `attn-trace explain` says of one weight, one output number or one gradient entry: str() is its
    text, to_json() its JSON (explain --json -), `data` that JSON as a dict."""


class Diff(_Said):
    """What `attn-trace diff` finds in a dump: str() its text, to_json() its --json -, `passed` whether every
    dumped step agrees (diff's exit code 0), `first` the first step that differs (None when none)."""

    def __init__(self, text, json_text, differs):
        super().__init__(text, json_text)
        self.passed = not differs

    @property
    def first(self):
        divergence = self.data.get("first_divergence")
        return divergence["step"] if divergence else None


def _dumped(name, value):
    """A dumped tensor as (name, float64 array, the dtype it was stored in)."""
    stored = None
    if hasattr(value, "detach"):  # PyTorch: bfloat16 has no numpy type; its values are float32 values
        value = value.detach().cpu()
        stored = str(value.dtype).replace("torch.", "")
        if stored == "bfloat16":
            value = value.float()
        value = value.numpy()
    array = np.asarray(value)
    if stored is None:
        stored = array.dtype.name
    if stored not in ("float16", "bfloat16", "float32", "float64"):
        stored = "float64"
    return str(name), np.ascontiguousarray(array, dtype=np.float64), stored


def _options(input, keys, **options):
    """The input's JSON text (or None: a file to read) and the options for the core."""
    if isinstance(options.get("dropout"), dict):  # the input's own "dropout" key, given with the others
        keys["dropout"] = options.pop("dropout")
    text, path = _input(input, keys)
    if isinstance(options.get("steps"), str):
        options["steps"] = [s for s in options["steps"].split(",") if s]
    if path is not None:
        options["name"] = path
    return text, options


def _keywords(command):
    """The command's options as (keyword, default): the library's one definition of them."""
    return [(name, default) for name, default in _core.keywords(command)]


def _signed(command, positional=("input",), skip=(), extra=(), keys=True):
    """A decorator giving a function its command's signature: `positional` first (default None), then the
    command's options as keywords with their defaults (less `skip`, plus the module's own `extra` pairs),
    then, with `keys`, the input's keys."""
    def sign(function):
        kind = inspect.Parameter
        params = [kind(name, kind.POSITIONAL_OR_KEYWORD, default=None) for name in positional]
        for name, default in _keywords(command) + list(extra):
            if name not in skip and name not in positional:
                params.append(kind(name, kind.KEYWORD_ONLY, default=default))
        if keys:
            params.append(kind("keys", kind.VAR_KEYWORD))
        function.__signature__ = inspect.Signature(params)
        return function
    return sign


def _split(command, kwargs, extra=()):
    """The keywords given as (the command's options, the input's keys): a name of neither is an input key."""
    names = {name for name, _ in _keywords(command)} | set(extra)
    options = {k: v for k, v in kwargs.items() if k in names}
    keys = {k: v for k, v in kwargs.items() if k not in names}
    return options, keys


@_signed("compare")
def compare(input=None, **kwargs):
    """`attn-trace compare` on `input`, as `--json` saves it: a Comparison, whose `passed` is the
    verdict and whose str() is what the command prints."""
    options, keys = _split("compare", kwargs)
    text, options = _options(input, keys, **options)
    return Comparison(_core.compare(text, options))


@_signed("explain", positional=("input", "query", "key"))
def explain(input=None, query=None, key=None, **kwargs):
    """`attn-trace explain` on `input`: the weight of `query` on `key` (tokens by name, or by index when no
    token has that name) in head `head`; or, with `output=C`, output column C of the query's row; or,
    with `grad="d_weights", index=(0, 1, 0)`, one entry of a gradient of the naive backward pass."""
    options, keys = _split("explain", kwargs)
    text, options = _options(input, keys, query=query, key=key, **options)
    return Explanation(*_core.explain(text, options))


@_signed("diff", positional=("input", "dumps"), extra=(("names", None), ("dumps_name", "dumps")), keys=False)
def diff(input=None, dumps=None, **kwargs):
    """`attn-trace diff` on `input` and `dumps`, a mapping from step names (or PyTorch-style names of
    gradients: grad_q, q.grad, ...; or names that `names` maps: {"weights": "attn_probs"}) to numpy arrays,
    PyTorch tensors or nested lists. Ours is computed in `dtype`, by default the least precise of the
    dumps. Returns a Diff; `dumps_name` names the dumps in its text."""
    options, unknown = _split("diff", kwargs, extra=("names", "dumps_name"))
    if unknown:
        raise TypeError(f"diff() got an unexpected keyword argument {next(iter(unknown))!r}")
    names = options.pop("names", None)
    dumps_name = options.pop("dumps_name", "dumps")
    text, options = _options(input, {}, **options)
    options["names"] = [f"{step}={name}" for step, name in (names or {}).items()]
    arrays = [_dumped(name, value) for name, value in (dumps or {}).items()]
    return Diff(*_core.diff(text, options, arrays, dumps_name))


@_signed("run")
def run(input=None, **kwargs):
    """`attn-trace run` on `input`: the options are the command line's (--engine, --dtype, --backward,
    --block-q, --block-k, --steps, --head, --grad-seed, --dropout, --dropout-seed, --max-memory)."""
    options, keys = _split("run", kwargs)
    text, options = _options(input, keys, **options)
    return Trace(_core.run(text, options))


@_signed("decode")
def decode(input=None, **kwargs):
    """`attn-trace decode` on `input`, a causal self-attention input: the first `prompt` tokens run as one
    causal pass, each later token one decode step against the KV cache (with `split_kv` chunks, in pages of
    `page_size` tokens), checked against run's causal pass. Returns a Decode, whose str() is what the
    command prints and whose `decode_steps` hold the cache, the chunks and the pages as arrays."""
    options, keys = _split("decode", kwargs)
    text, options = _options(input, keys, **options)
    return Decode(_core.decode(text, options))
