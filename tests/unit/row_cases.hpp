#pragma once
// The seeded problems of the rows' harness (tests/unit/rows_test.cpp, row_walks_test.cpp): random numbers
// in every matrix, one input per kind of step, so that between them they have every `Needs` of the step
// table (rope in both styles, alibi, softcap, sinks, dropout, cross-attention, W_o, each bias, GQA, a
// batch, a mask, the out_in layout); and the rows walked plainly on them, forward and backward.

#include <cstddef>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/common.hpp"
#include "engine/rows.hpp"
#include "io/load.hpp"
#include "model/problem.hpp"

namespace attn::row_cases {

inline std::string matrix(std::mt19937& rng, std::size_t rows, std::size_t cols) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::string out = "[";
  for (std::size_t r = 0; r < rows; ++r) {
    out += r ? ",[" : "[";
    for (std::size_t c = 0; c < cols; ++c) out += fmt::format("{}{:.17g}", c ? "," : "", u(rng));
    out += "]";
  }
  return out + "]";
}

inline std::string vector_of(std::mt19937& rng, std::size_t size) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::string out = "[";
  for (std::size_t k = 0; k < size; ++k) out += fmt::format("{}{:.17g}", k ? "," : "", u(rng));
  return out + "]";
}

struct Case {
  std::string name;
  Problem p;
};

// Inputs of n = 4 tokens, d_model = 6, heads of d_k = 2 (d_v = 3 with W_o), each seeded by its place.
inline std::vector<Case> cases() {
  std::vector<Case> out;
  const auto add = [&out](std::string name, const std::string& extra, std::size_t h, std::size_t g, bool w_o,
                          bool biases, bool cross, unsigned seed) {
    std::mt19937 rng(seed);
    const std::size_t n = 4, m = cross ? 5 : 4, d_model = 6, d_ctx = cross ? 3 : 6, d_k = 2, d_v = w_o ? 3 : 2;
    // a weight (in, out), written out × in for the out_in layout
    const bool out_in = extra.find("out_in") != std::string::npos;
    const auto weight = [&](std::size_t in, std::size_t out_width) {
      return out_in ? matrix(rng, out_width, in) : matrix(rng, in, out_width);
    };
    std::string json =
        fmt::format(R"({{"n_heads": {}, "n_kv_heads": {}, "X": {}, "W_q": {}, "W_k": {}, "W_v": {})", h, g,
                    matrix(rng, n, d_model), weight(d_model, h * d_k), weight(d_ctx, g * d_k), weight(d_ctx, g * d_v));
    if (cross) json += fmt::format(R"(, "context": {{"X": {}}})", matrix(rng, m, d_ctx));
    if (w_o) json += fmt::format(R"(, "W_o": {})", weight(h * d_v, 5));
    if (biases)
      json += fmt::format(R"(, "b_q": {}, "b_k": {}, "b_v": {})", vector_of(rng, h * d_k), vector_of(rng, g * d_k),
                          vector_of(rng, g * d_v));
    if (biases && w_o) json += fmt::format(R"(, "b_o": {})", vector_of(rng, 5));
    json += extra + "}";
    out.push_back({std::move(name), load_problem(json, "rows_test.json")});
  };
  add("plain, W_o and every bias", "", 2, 2, true, true, false, 1);
  add("GQA, causal", R"(, "mask": "causal")", 4, 2, false, false, false, 2);
  add("RoPE (half), GQA", R"(, "rope": {"theta": 100, "style": "half"}, "mask": "causal")", 2, 1, true, false, false,
      3);
  add("RoPE (interleaved)", R"(, "rope": {"theta": 10, "style": "interleaved"})", 2, 2, false, true, false, 4);
  add("ALiBi, softcap", R"(, "alibi": true, "softcap": 1.5, "mask": "causal")", 2, 2, false, false, false, 5);
  add("sinks, sliding window", R"(, "sinks": [0.5, -1], "mask": {"type": "sliding_window", "window": 2})", 2, 2, true,
      false, false, 6);
  add("dropout", R"(, "dropout": {"p": 0.25, "seed": 7})", 2, 2, true, true, false, 7);
  add("cross-attention, out_in", R"(, "layout": "out_in")", 2, 1, true, true, true, 8);
  add("softcap, sinks, dropout, ALiBi", R"(, "softcap": 2, "sinks": [1, 0.25], "alibi": [0.5, 0.125],
      "dropout": {"p": 0.5, "seed": 3}, "mask": "causal")",
      2, 2, true, true, false, 9);
  return out;
}

// The forward of every step of `p` over the rows, in T, from the inputs `in`.
template <class T>
ForwardValues<T> forward_walk(const Problem& p, const Inputs<T>& in) {
  const RowContext<T> ctx{p, in};
  ForwardValues<T> x;
  walk_forward<T>(
      p, x, [&ctx](Step s, const ForwardValues<T>& v) { return row_of<T>(s).forward(v, ctx); },
      [](Step, Tensor<T> t) { return t; });
  return x;
}

// Every gradient of `p` over the rows, in T, from ∂L/∂output = dY, by gradient step; with `order`, the
// gradient steps in the order the walk kept them.
template <class T>
Gradients<T> backward_walk(const Problem& p, const Inputs<T>& in, const ForwardValues<T>& x, const Tensor<T>& dY,
                           std::vector<Step>* order = nullptr) {
  const RowContext<T> ctx{p, in};
  Gradients<T> d, kept;
  d[slot(Step::output)] = dY;
  walk_backward<T>(
      p, x, d,
      [&ctx](Step s, const Tensor<T>& dy, const ForwardValues<T>& v, Gradients<T>& into) {
        row_of<T>(s).backward(dy, v, ctx, into);
      },
      [&kept, order](Step g, Tensor<T> t) {
        if (order != nullptr) order->push_back(g);
        kept[slot(g)] = t;
        return t;
      });
  return kept;
}

}  // namespace attn::row_cases
