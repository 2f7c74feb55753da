#pragma once
// `attn-trace import`: one attention layer of a real model, read from its tensors under the names and
// layouts its library stores them in (docs/models.md), turned into an input (docs/input-format.md).

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dump.hpp"
#include "formats/dump_folder.hpp"
#include "io/read.hpp"
#include "model/mask.hpp"

namespace attn {

// How a model stores its attention layer:
//   gpt2       c_attn (d_model, 3·d_model) in × out, q k v side by side; c_proj; causal
//   llama      q_proj, k_proj, v_proj, o_proj out × in, grouped-query, RoPE; causal (Mistral, Qwen2 too)
//   bert       self.query, self.key, self.value, output.dense out × in; no mask
//   torch_mha  nn.MultiheadAttention: in_proj_weight (3·d_model, d_model) out × in, q k v stacked; no mask
//   gemma2     llama's tensors and RoPE, the scale query_pre_attn_scalar^-1/2 and the logit cap
//              attn_logit_softcapping of config.json; causal
enum class ImportStyle { gpt2, llama, bert, torch_mha, gemma2 };

// The command line's spellings, in the order of ImportStyle.
inline constexpr std::array<std::string_view, 5> import_style_names = {"gpt2", "llama", "bert", "torch-mha", "gemma2"};

std::optional<ImportStyle> import_style_by_name(std::string_view name);
std::string_view import_style_name(ImportStyle style);

// What a model's config.json says about attention; each absent when the file does not say it.
struct ModelConfig {
  std::string file;                              // as messages name it; "" when there is no config.json
  std::optional<std::size_t> heads;              // n_head (GPT-2), else num_attention_heads
  std::optional<std::size_t> kv_heads;           // num_key_value_heads
  std::optional<double> rope_theta;              // rope_theta
  std::optional<std::string> rope_scaling;       // rope_scaling's type, when it is set: not applied
  std::optional<std::size_t> head_dim;           // head_dim: checked against the shapes
  std::optional<double> query_pre_attn_scalar;   // Gemma 2: the scale is its -1/2 power
  std::optional<double> attn_logit_softcapping;  // Gemma 2: the logit cap c
  std::optional<std::size_t> sliding_window;     // Gemma 2: the window of its local layers, not applied
  std::optional<std::size_t> layers;             // n_layer (GPT-2), else num_hidden_layers: the input's model
  std::optional<std::size_t> context_length;     // n_positions, n_ctx, else max_position_embeddings: the same
};

// The config.json beside `weights` (in the folder, or in the folder of the .safetensors file), read
// within `limit`; an empty ModelConfig when there is none. A key of the wrong type is an InputError.
ModelConfig read_model_config(const std::string& weights, const MemoryLimit& limit);

struct ImportRequest {
  ImportStyle style = ImportStyle::gpt2;
  std::string prefix;                   // prepended to each tensor's name
  std::optional<std::size_t> heads;     // --heads; else the config's
  std::optional<std::size_t> kv_heads;  // --kv-heads; else the config's, else read from the shapes
  std::optional<double> rope_theta;     // --rope-theta; else the config's, else 10000
  std::vector<std::string> tokens;      // labels, one per token; empty: t0, t1, …
  std::optional<MaskKind> mask;         // none, causal or sliding_window; empty: the style's
  std::size_t window = 0;               // sliding_window only
  std::string weights_name;             // WEIGHTS as messages and the description name it
  std::string x_name;                   // --x as messages name it; "" when X is drawn at random
  std::uint64_t seed = 0;               // random X only
  std::size_t n = 8;                    // random X only: how many tokens
  MemoryLimit max_memory;               // random X only: refused when its text would take more
};

struct ImportedLayer {
  std::string json;                   // the input, one matrix row per line
  std::vector<std::string> warnings;  // what the input leaves out of the model, one sentence each
};

// The input for the layer `request.prefix` of `weights`, with X from `x` ((n, d_model) or
// (B, n, d_model)), or, when `x` is null, standard normal numbers to two decimal places from
// NormalSampler(request.seed), n rows of d_model, row by row. The weights are written as the model
// stores them, each number in the shortest text that reads back to the same double, so that float32
// and widened float16 or bfloat16 values arrive exactly: gpt2 in_out, the others with
// "layout": "out_in". A missing tensor (with the nearest name present), a shape the style cannot
// hold, heads that do not divide a width, X of another width: an InputError, one line each.
ImportedLayer import_layer(const std::vector<NamedDump>& weights, const ModelConfig& config, const DumpTensor* x,
                           const ImportRequest& request);

}  // namespace attn
