#!/usr/bin/env python3
"""docs/notebook.ipynb executed as CI executes it (Debian's jupyter-nbconvert, python3-ipykernel): every
cell runs without error, the trace's cell shows the report's HTML inline, the planted bug is found at
`scaled` and the mended attention passes, and attn_trace.decode's result shows its decode report inline.

usage: notebook_test.py NOTEBOOK (PYTHONPATH holds the build's python/ folder: CTest sets it)
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    notebook = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "executed.ipynb")
        run = subprocess.run(["jupyter", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=120",
                              notebook, "--output", out], capture_output=True, text=True, check=False,
                             env=dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1"))
        if run.returncode != 0:
            print(run.stderr)
            print("FAIL: the notebook did not run to its end")
            return 1
        cells = [c for c in json.load(open(out, encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    failures = []
    outputs = [o for c in cells for o in c.get("outputs", [])]
    errors = [o for o in outputs if o["output_type"] == "error" or o.get("name") == "stderr"]
    if errors:
        failures.append(f"errors or warnings in the output: {errors[:2]}")
    html = ["".join(o["data"]["text/html"]) for o in outputs if "text/html" in o.get("data", {})]
    if not any(h.startswith("<!DOCTYPE html>") and "attn-trace report" in h and "<td>0.7679</td>" in h for h in html):
        failures.append("no cell shows the report of the worked example inline (text/html with its weights)")
    if not any(h.startswith("<!DOCTYPE html>") and "<h2>decoding with a KV cache</h2>" in h for h in html):
        failures.append("no cell shows a decode's report inline (attn_trace.decode)")
    printed = "".join("".join(o.get("text", "")) for o in outputs if o.get("name") == "stdout")
    # gpt_causal.json: 4 tokens and a prompt of all but the last three, so the first decode step is the token at
    # position 1, its cache 2 keys of each key/value head (2 heads, d_k = 2), its 2 chunks, and one page of 2
    if "1 (2, 2, 2) (2, 2) [[0]]" not in printed:
        failures.append(f"the decode cell does not print its first step's position, cache, chunks and pages: {printed}")
    results = ["".join(o["data"]["text/plain"]) for o in outputs if "text/plain" in o.get("data", {})]
    for want in ("0.76791793", "'scaled'", "True"):
        if want not in results:
            failures.append(f"no cell's result is {want}: {results}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"the notebook ran its {len(cells)} code cells: the report inline, the bug found at scaled, the fix passing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
