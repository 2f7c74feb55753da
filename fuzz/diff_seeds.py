#!/usr/bin/env python3
"""Seeds for fuzz/fuzz_diff.cpp: each bundled example's own steps and gradients, as the target reads its
bytes (the example's index in its list, then [name length][name][payload length, 2 bytes LE][payload]
per dump), in float64 JSON: every step and gradient, the forward steps only, the gradients only.

usage: diff_seeds.py ATTN_TRACE OUT_DIR
"""
import json
import os
import subprocess
import sys

# fuzz/fuzz_diff.cpp's list, in its order: a seed's first byte is the index.
EXAMPLES = ["the-cat-sat", "gpt-causal", "bert-bias", "gqa", "mqa", "cross-attention", "kv-cache", "padded-batch",
            "sliding-window", "pytorch-layout", "softcap", "sinks", "explainer-dropout"]


def record(name, payload):
    name_bytes = name.encode()
    return bytes([len(name_bytes)]) + name_bytes + len(payload).to_bytes(2, "little") + payload


def main():
    binary, out = sys.argv[1], sys.argv[2]
    seeds = 0
    for index, example in enumerate(EXAMPLES):
        text = subprocess.run([binary, "example", example], capture_output=True, check=True).stdout
        trace = json.loads(subprocess.run([binary, "run", "-", "--backward", "--dtype", "float64", "--json", "-"],
                                          input=text, capture_output=True, check=True).stdout)
        dumps = [(s["name"], json.dumps(s["data"], separators=(",", ":")).encode()) for s in trace["steps"]]
        dumps = [(name, payload) for name, payload in dumps if len(payload) < 65536]
        for label, keep in (("all", lambda n: True), ("forward", lambda n: not n.startswith("d_")),
                            ("gradients", lambda n: n.startswith("d_"))):
            body = b"".join(record(name, payload) for name, payload in dumps if keep(name))
            with open(os.path.join(out, f"{example}-{label}"), "wb") as f:
                f.write(bytes([index]) + body)
            seeds += 1
    print(f"fuzz: {seeds} seeds for fuzz_diff, every bundled example's own dumps")


if __name__ == "__main__":
    main()
