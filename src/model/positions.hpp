#pragma once
// Where each token sits, as the math needs it: rotary position embeddings (RoPE) and ALiBi's linear
// biases, resolved from the input's `rope` and `alibi` (docs/input-format.md).

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "tensor/tensor.hpp"

namespace attn {

// Which features turn together. half: feature e with e + dims/2 (Hugging Face's Llama, rotate_half);
// interleaved: 2i with 2i + 1 (RoFormer, GPT-J).
enum class RopeStyle { half, interleaved };

std::string_view to_string(RopeStyle style);

// The two features that pair i of `pairs` (dims/2) turns together in `style`.
struct RopePair {
  std::size_t a, b;
};
constexpr RopePair rope_pair(RopeStyle style, std::size_t i, std::size_t pairs) {
  return style == RopeStyle::half ? RopePair{i, i + pairs} : RopePair{2 * i, 2 * i + 1};
}

struct Rope {
  double theta = 10000;  // the base of the frequencies
  RopeStyle style = RopeStyle::half;
  std::size_t dims = 0;                   // features rotated per head: even, <= d_k; the rest pass through
  std::vector<double> positions;          // (n) of the queries, whole numbers >= 0
  std::vector<double> context_positions;  // (m) of the keys: `positions` again for self-attention
  std::vector<double> frequencies;        // (dims/2) θ_i = theta^(-2i/dims)
  // The angles' cosines and sines, position · θ_i, in float64 (an engine rounds them as it holds inputs).
  Tensor<double> cos_q, sin_q;  // (n, dims/2)
  Tensor<double> cos_k, sin_k;  // (m, dims/2)
};

struct Alibi {
  bool standard = true;                 // the slopes of the ALiBi paper's rule, not a list of the input
  std::vector<double> slopes;           // (h) one per query head
  std::vector<double> query_positions;  // (n) pos_i
  std::vector<double> key_positions;    // (m) pos_j
};

// θ_i = theta^(-2i/dims), i = 0 … dims/2 - 1.
std::vector<double> rope_frequencies(double theta, std::size_t dims);

// cos and sin of position · θ_i: each (positions, dims/2).
std::pair<Tensor<double>, Tensor<double>> rope_table(std::span<const double> positions,
                                                     std::span<const double> frequencies);

// The standard slopes for h heads (Press et al., ALiBi, arXiv:2108.12409): for h a power of two,
// s_k = 2^(-8(k+1)/h); otherwise those of the largest power of two h' < h, then every other slope of
// 2h' (the 1st, 3rd, …) until there are h.
std::vector<double> alibi_slopes(std::size_t h);

}  // namespace attn
