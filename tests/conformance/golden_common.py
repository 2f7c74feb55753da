"""What the golden scripts of this folder share: float64, the masks of docs/input-format.md as booleans,
and the JSON writer of the goldens.

Importing it sets torch to one thread and deterministic algorithms, so that every script of this folder that
computes with torch (each imports it, directly or through another module) gives the same numbers on every run.
"""

import json
import math

import torch

DT = torch.float64

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


# ---------------------------------------------------------------------------------------------- masks

def allowed(mask, B, n, m):
    """(B, n, m) booleans: may query i of item b attend key j? docs/input-format.md, "Masks", written out."""
    i = torch.arange(n).view(n, 1)
    j = torch.arange(m).view(1, m)
    kind = mask if isinstance(mask, str) else mask["type"] if mask is not None else "none"
    align = "top_left" if isinstance(mask, str) or mask is None else mask.get("align", "top_left")
    o = m - n if align == "bottom_right" else 0
    if kind == "none":
        a = torch.ones(n, m, dtype=torch.bool)
    elif kind == "causal":
        a = j <= i + o
    elif kind == "sliding_window":
        w = mask["window"]
        a = (i + o - w < j) & (j <= i + o)
    elif kind == "padding":
        keep = torch.tensor(mask["keep"], dtype=torch.bool)
        a = keep.view(-1, 1, m).expand(keep.view(-1, m).shape[0], n, m)
    elif kind == "custom":
        a = torch.tensor(mask["allow"], dtype=torch.bool)
    else:
        raise ValueError(kind)
    return a.expand(B, n, m) if a.dim() == 2 or a.shape[0] == 1 else a


def empty_rows(allow):
    """(B, n) booleans: rows with no key to attend."""
    return ~allow.any(dim=-1)


# -------------------------------------------------------------------------------------------- output

def to_text(value, indent=0):
    """JSON with every innermost list on one line; floats by repr() (json's own float formatting)."""
    pad = "  " * indent
    if isinstance(value, dict):
        items = [f'{pad}  {json.dumps(key, ensure_ascii=False)}: {to_text(v, indent + 1)}' for key, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        items = [pad + "  " + to_text(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("a golden value is not finite")
    if isinstance(value, list):
        return "[" + ", ".join(to_text(v, indent) for v in value) + "]"
    return json.dumps(value, allow_nan=False, ensure_ascii=False)  # a float goes through float.__repr__
