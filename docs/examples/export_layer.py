#!/usr/bin/env python3
"""Export one attention layer of a Hugging Face model for `attn-trace import` (docs/models.md).

Run it where the model is (it needs torch 2.0 or later, transformers and, for a .safetensors file,
safetensors):

    python export_layer.py gpt2 --layer 0 --text "The cat sat on the mat" --out gpt2-layer0
    python export_layer.py bert-base-uncased --layer 3 --out bert-layer3 --npy

It writes, in the folder --out:
  layer.safetensors   the layer's attention tensors under the model's own names (or, with --npy,
                      one <name>.npy file each)
  config.json         the model's config, which holds the head counts and rope_theta
  x.npy               the real input of that attention layer for --text: the hidden states after the
                      layer norm that precedes it, (n, d_model), float32
and prints the `attn-trace import` command that reads them.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

# model_type -> (style, the attention module's path within the model, by layer)
STYLES = {
    "gpt2": ("gpt2", ["h.{i}.attn", "transformer.h.{i}.attn"]),
    "llama": ("llama", ["layers.{i}.self_attn", "model.layers.{i}.self_attn"]),
    "mistral": ("llama", ["layers.{i}.self_attn", "model.layers.{i}.self_attn"]),
    "qwen2": ("llama", ["layers.{i}.self_attn", "model.layers.{i}.self_attn"]),
    "bert": ("bert", ["encoder.layer.{i}.attention", "bert.encoder.layer.{i}.attention"]),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a Hugging Face model name or folder")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--text", default="The cat sat on the mat")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--npy", action="store_true", help="a folder of .npy files instead of one .safetensors")
    args = parser.parse_args()

    model = AutoModel.from_pretrained(args.model, torch_dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    kind = model.config.model_type
    if kind not in STYLES:
        sys.exit(f"model_type {kind!r}: attn-trace import knows {', '.join(STYLES)}")
    style, paths = STYLES[kind]
    modules = dict(model.named_modules())
    path = next((p.format(i=args.layer) for p in paths if p.format(i=args.layer) in modules), None)
    if path is None:
        sys.exit(f"no attention module for layer {args.layer} (tried {', '.join(p.format(i=args.layer) for p in paths)})")
    prefix = path + "."

    # The layer's tensors, under the names the model's state_dict gives them.
    tensors = {prefix + name: t.detach().contiguous() for name, t in modules[path].state_dict().items()
               if t.is_floating_point() and t.dim() > 0}

    # X: what the attention module receives, caught on its way in.
    caught = {}

    def hook(module, positional, keywords):
        hidden = keywords.get("hidden_states", positional[0] if positional else None)
        caught["x"] = hidden[0].detach().float().numpy()

    handle = modules[path].register_forward_pre_hook(hook, with_kwargs=True)  # torch 2.0 or later
    encoded = tokenizer(args.text, return_tensors="pt")
    with torch.no_grad():
        model(**encoded)
    handle.remove()
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])

    args.out.mkdir(parents=True, exist_ok=True)
    if args.npy:
        for name, t in tensors.items():
            np.save(args.out / f"{name}.npy", t.float().numpy())
        weights = args.out
    else:
        from safetensors.torch import save_file
        weights = args.out / "layer.safetensors"
        save_file(tensors, str(weights))
    model.config.to_json_file(str(args.out / "config.json"))
    np.save(args.out / "x.npy", caught["x"])

    quoted = " ".join(t.replace('"', "'") for t in tokens)
    print(f'attn-trace import {weights} --style {style} --prefix {prefix} --x {args.out / "x.npy"} '
          f'--tokens "{quoted}" -o {args.out / "layer.json"}')


if __name__ == "__main__":
    main()
