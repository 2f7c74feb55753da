#pragma once
// One attention computation, fully resolved: what the loader produces and every engine consumes.
// Values are kept in double; an engine rounds them to its own scalar type.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/positions.hpp"
#include "model/score_chain.hpp"
#include "tensor/tensor.hpp"

namespace attn {

enum class Layout { in_out, out_in };

// Where the backward pass's upstream gradient dY = ∂L/∂Y comes from: 1 everywhere (L = ΣY), the
// input's "dY", or a seeded standard normal (--grad-seed).
enum class Upstream { ones, input, seeded };

// What the score chain reads (the scale, the mask, ALiBi, softcap, sinks, dropout) is its own part of the
// problem: ScoreInputs, model/score_chain.hpp.
struct Problem : ScoreInputs {
  std::string description;
  bool batched = false;       // X was 3-D; otherwise B == 1 and traces drop the batch axis
  bool cross = false;         // keys and values come from `context`, not X
  std::size_t B = 1;          // batch items
  std::size_t n = 0;          // queries (rows of X)
  std::size_t m = 0;          // keys (rows of the context, n for self-attention)
  std::size_t d_model = 0;    // width of X
  std::size_t d_context = 0;  // width of the context (d_model for self-attention)
  std::size_t h = 1;          // query heads
  std::size_t g = 1;          // key/value heads; h % g == 0
  std::size_t d_k = 0;        // query/key width per head
  std::size_t d_v = 0;        // value width per head
  std::size_t d_out = 0;      // width of the output: W_o's, or h·d_v without W_o

  std::vector<std::vector<std::string>> tokens;          // (B, n) labels of the queries
  std::vector<std::vector<std::string>> context_tokens;  // (B, m) labels of the keys

  Tensor<double> X;  // (B, n, d_model)
  Tensor<double> C;  // (B, m, d_context); a copy of X for self-attention

  // Weights in the math convention (in_out), whatever the file's layout.
  Tensor<double> W_q;                      // (d_model, h·d_k)
  Tensor<double> W_k;                      // (d_context, g·d_k)
  Tensor<double> W_v;                      // (d_context, g·d_v)
  Tensor<double> W_o;                      // (h·d_v, d_out), empty when the input has none
  std::vector<double> b_q, b_k, b_v, b_o;  // empty when absent

  Layout layout = Layout::in_out;
  std::optional<Rope> rope;  // rotary position embeddings of q and k, when the input has `rope`
  // What the input says of the model its layer comes from (`model`), which no pass uses: a decode's
  // cache for the whole model (trace/decode.hpp). Each absent when the input does not say it.
  struct ModelFacts {
    std::optional<std::size_t> layers;          // how many attention layers the model has
    std::optional<std::size_t> context_length;  // the longest sequence it was made for
  };
  ModelFacts model;

  // The backward pass's dY (B, n, d_out): the input's "dY" or drawn from grad_seed; empty when it is 1
  // everywhere (engine/backward.hpp, upstream_gradient).
  Tensor<double> dY;
  Upstream upstream = Upstream::ones;
  std::uint64_t grad_seed = 0;  // Upstream::seeded only

  bool has_output_projection() const { return !W_o.empty(); }
};

}  // namespace attn
