#!/usr/bin/env bash
# Writes the bundled examples of real model layers, data/*_layer.json, with `attn-trace import` from the
# weights that tests/models/make_weights.py generates (tests/data/models/), so that data/ shows the whole
# path from weight files to a trace. Run from anywhere; paths in the files are relative to the source.
#   usage: tests/models/make_examples.sh path/to/attn-trace [OUT_DIR]   (OUT_DIR default: data/)
# tests/models/check_examples.sh runs it into a temporary folder and requires the same bytes as data/.
set -euo pipefail
bin=$(realpath "$1")
cd "$(dirname "$0")/../.."
out=${2:-data}
models=tests/data/models
"$bin" import "$models/gpt2/model.safetensors" --style gpt2 --prefix transformer.h.0.attn. \
  --x "$models/x_5x8.npy" --tokens "The cat sat on the" -o "$out/gpt2_layer.json"
"$bin" import "$models/llama/model.safetensors" --style llama --prefix model.layers.0.self_attn. \
  --x "$models/x_6x16.npy" --tokens "The cat sat on the mat" -o "$out/llama_layer.json"
"$bin" import "$models/bert" --style bert --prefix bert.encoder.layer.0.attention. \
  --x "$models/x_2x4x8.npy" --tokens "my dog is cute" -o "$out/bert_layer.json"
"$bin" import "$models/torch_mha/model.safetensors" --style torch-mha --prefix "" --heads 2 \
  --x "$models/x_5x8.npy" --tokens "I like green tea too" -o "$out/torch_mha_layer.json"
