#!/usr/bin/python3
"""Every figure that `attn-trace plot` draws for data/*.json is a standalone SVG with the trace's numbers.

usage: check_svgs.py REPO_ROOT ATTN_TRACE_BINARY

For each bundled input, and each batch item of a batched one: `plot` of the weights (one head, then
--all-heads), of the scores and of k_heads (signed, and per key/value head). Each SVG must parse as
XML (the standard library's parser, which refuses what XML 1.0 refuses), have a viewBox that matches
its width and height, a <title>, no <script>, no reference outside itself (href only to "#id",
url() only to "#id" it defines), no @import and only the generic fonts; and hold one cell <rect> per
matrix entry whose data-value is the value of `attn-trace run FILE --json -` at data-row, data-col.
An input whose tokens carry markup, control characters and U+FFFE must come out written out and
escaped. Prints every failure and exits 1 if there is one.
"""

import json
import pathlib
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
FONTS = {"sans-serif", "monospace"}


def run(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"attn-trace {' '.join(args)}: exit {done.returncode}: {done.stderr.decode()}")
    return done.stdout.decode("utf-8")


def standalone_errors(text, root):
    """What keeps the document from standing alone, or from being read the same everywhere."""
    errors = []
    if root.tag != SVG + "svg":
        errors.append(f"the root is {root.tag}, not svg")
    box = root.get("viewBox", "").split()
    if len(box) != 4 or box[:2] != ["0", "0"] or box[2:] != [root.get("width"), root.get("height")]:
        errors.append(f"viewBox {root.get('viewBox')!r} does not match width {root.get('width')} and "
                      f"height {root.get('height')}")
    if root.find(SVG + "title") is None or not root.find(SVG + "title").text:
        errors.append("no <title>")
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    for e in root.iter():
        if e.tag in (SVG + "script", "script", SVG + "foreignObject"):
            errors.append(f"a <{e.tag}> element")
        for name, value in e.attrib.items():
            if name.endswith("href") and not value.startswith("#"):
                errors.append(f"{name}={value!r} points outside the document")
            for ref in re.findall(r"url\(([^)]*)\)", value):
                if not ref.startswith("#") or ref[1:] not in ids:
                    errors.append(f"{name}={value!r} refers to {ref!r}, which the document does not define")
            if name == "font-family" and value not in FONTS:
                errors.append(f"font-family {value!r} is not a generic family")
    for bad in ("@import", "url(http", "<script"):
        if bad in text:
            errors.append(f"the text holds {bad!r}")
    return errors


def matrix(trace, step, batch, head):
    """The (rows, cols) matrix of `step` for one batch item and head (head is None for head-less steps)."""
    found = next(s for s in trace["steps"] if s["name"] == step)
    data = found["data"]
    if trace["config"]["batch"] is not None:
        data = data[batch]
    if head is not None:
        data = data[head]
    if step == "weights" and "sinks" in trace["config"]:
        # with sinks the figure draws each row's sink share as a last column "sink"
        shares = matrix(trace, "sink_weights", batch, head)
        data = [row + [share] for row, share in zip(data, shares)]
    return data


def cell_errors(root, trace, step, batch, heads, where):
    """Each panel's cells against the trace: one per entry, each with the entry's value."""
    errors = []
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    drawn = [int(g.get("data-head")) if g.get("data-head") is not None else None for g in panels]
    if drawn != heads:
        return [f"{where}: panels of heads {drawn}, expected {heads}"]
    for panel, head in zip(panels, heads):
        if panel.get("data-batch") != str(batch):
            errors.append(f"{where}: a panel of batch {panel.get('data-batch')}, expected {batch}")
        want = matrix(trace, step, batch, head)
        cells = [r for r in panel.iter(SVG + "rect") if r.get("class") == "cell"]
        if len(cells) != len(want) * len(want[0]):
            errors.append(f"{where}, head {head}: {len(cells)} cells for a {len(want)} x {len(want[0])} matrix")
            continue
        seen = set()
        for cell in cells:
            r, c = int(cell.get("data-row")), int(cell.get("data-col"))
            seen.add((r, c))
            value, expected = float(cell.get("data-value")), float(want[r][c])
            if value != expected:
                errors.append(f"{where}, head {head}, [{r}][{c}]: data-value {cell.get('data-value')}, "
                              f"the trace has {want[r][c]}")
        if len(seen) != len(cells):
            errors.append(f"{where}, head {head}: some cells share a row and column")
    return errors


def check_figure(binary, path, trace, step, batch, all_heads):
    config = trace["config"]
    args = ["plot", str(path), "--step", step, "--batch", str(batch)] + (["--all-heads"] if all_heads else [])
    where = f"{path.name} {' '.join(args[2:])}"
    text = run(binary, *args)
    try:
        root = ET.fromstring(text.encode("utf-8"))
    except ET.ParseError as e:
        return [f"{where}: not XML: {e}"]
    count = config["n_kv_heads"] if step in ("k_heads", "v_heads") else config["n_heads"]
    heads = list(range(count)) if all_heads else [0]
    return [f"{where}: {e}" for e in standalone_errors(text, root)] + cell_errors(root, trace, step, batch, heads,
                                                                                  where)


def check_tokens(binary):
    """Tokens with markup, an escape sequence, a bidi override and U+FFFE: written out, escaped, valid XML."""
    tokens = ["<b>&\"'", "a\x1b[31mb", "\u202eevil", "x\ufffey"]
    shown = ["<b>&\"'", "a\\x1b[31mb", "\\u202eevil", "x\\ufffey"]
    problem = {"tokens": tokens, "X": [[1, 0], [0, 1], [1, 1], [0, 0]],
               "W_q": [[1], [0]], "W_k": [[0], [1]], "W_v": [[1], [1]]}
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "tokens.json"
        path.write_text(json.dumps(problem), encoding="utf-8")
        text = run(binary, "plot", str(path), "--step", "scores")
    try:
        root = ET.fromstring(text.encode("utf-8"))
    except ET.ParseError as e:
        return [f"tokens.json: not XML: {e}"]
    labels = [t.text for g in root.iter(SVG + "g") if g.get("class") == "labels" for t in g.iter(SVG + "text")]
    errors = standalone_errors(text, root)
    for token in shown:
        if labels.count(token) != 2:
            errors.append(f"tokens.json: the label {token!r} appears {labels.count(token)} times, expected 2 "
                          f"(labels: {labels})")
    return errors


def main():
    root, binary = pathlib.Path(sys.argv[1]), sys.argv[2]
    errors = []
    inputs = sorted((root / "data").glob("*.json"))
    for path in inputs:
        trace = json.loads(run(binary, "run", str(path), "--json", "-"))
        for batch in range(trace["config"]["batch"] or 1):
            for step, all_heads in (("weights", False), ("weights", True), ("scores", False), ("k_heads", True)):
                errors += check_figure(binary, path, trace, step, batch, all_heads)
    errors += check_tokens(binary)
    for e in errors:
        print(f"FAIL: {e}")
    print(f"check_svgs: {len(inputs)} inputs, {len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
