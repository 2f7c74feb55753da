#pragma once
// `attn-trace new`: an input (docs/input-format.md) of the sizes a teacher asks for, filled with
// seeded numbers that are the same on every machine, and a description saying what was asked.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/mask.hpp"
#include "ops/random.hpp"

namespace attn {

// What `attn-trace new` was asked for; the sizes are checked by the command before it gets here.
struct NewInputRequest {
  std::vector<std::string> tokens;          // the queries, one row of X each
  std::vector<std::string> context_tokens;  // cross-attention's keys and values; empty: self-attention
  std::size_t d_model = 4;
  std::size_t heads = 1;
  std::size_t kv_heads = 1;        // divides heads
  std::size_t d_k = 4;             // also d_v
  MaskKind mask = MaskKind::none;  // none, causal or sliding_window
  std::size_t window = 0;          // sliding_window only
  bool output_projection = false;  // write W_o, (heads·d_k, d_model)
  bool integers = false;           // whole numbers: X in 0..1, weights in -1..1
  std::uint64_t seed = 0;
};

// The input's numbers: X (and the context's X), then W_q, W_k, W_v and W_o, row by row from one
// SplitMix64 stream. Decimals: X uniform in [-1, 1], W_q and W_k in [-3, 3]/√d_model (so that the
// scaled scores spread about 1 and the weights have structure), W_v and W_o in [-1, 1]/√d_model, all in
// hundredths; whole numbers: X in 0..1 and weights in -1..1, so that a class can multiply them by hand.
// The JSON has one matrix row per line, its columns aligned.
std::string make_new_input(const NewInputRequest& request);

// An upper bound on the memory make_new_input takes (the matrices' texts, the whole text, its growth), computed from
// the sizes alone and saturating instead of overflowing: checked against --max-memory before building.
std::size_t new_input_bytes(const NewInputRequest& request);

// `lead` (the indented key), then a (rows, cols) matrix of `texts` (row-major), one row a line, each
// right-aligned to `width` columns (0: the widest text's): how new and import write matrices.
std::string matrix_text(const std::string& lead, std::size_t rows, std::size_t cols,
                        const std::vector<std::string>& texts, std::size_t width = 0);

// "made by attn-trace new: 4 tokens, d_model 4, 2 heads of d_k 2, …, seed 0": the input's description.
std::string new_input_description(const NewInputRequest& request);

}  // namespace attn
