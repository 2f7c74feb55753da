#pragma once
// Naive attention: every step computed in full, in the order of the trace, in scalar type T.

#include <cstddef>
#include <span>
#include <vector>

#include "model/problem.hpp"
#include "ops/attention.hpp"
#include "tensor/tensor.hpp"
#include "trace/observer.hpp"

namespace attn {

// A query row that the mask leaves with no key to attend (zero weights, zero head output).
struct EmptyRow {
  std::size_t batch;
  std::size_t query;
  friend bool operator==(const EmptyRow&, const EmptyRow&) = default;
};

template <class T>
struct AttentionResult {
  Tensor<T> output;                  // (B, n, d_out)
  std::vector<EmptyRow> empty_rows;  // rows with nothing to attend, in order
};

// The rows that `mask` leaves without a single key (the same for every head).
inline std::vector<EmptyRow> find_empty_rows(const Problem& p) {
  std::vector<EmptyRow> rows;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      const auto [first, last] = p.mask.band(i);
      bool any = false;
      for (std::size_t j = first; j < last && !any; ++j) any = p.mask.allows(b, i, j);
      if (!any) rows.push_back({b, i});
    }
  return rows;
}

// The problem's inputs rounded to T, the arithmetic of a run.
template <class T>
struct Inputs {
  Tensor<T> X, C, W_q, W_k, W_v, W_o;
  std::vector<T> b_q, b_k, b_v, b_o;

  explicit Inputs(const Problem& p)
      : X(cast<T>(p.X)), C(cast<T>(p.C)), W_q(cast<T>(p.W_q)), W_k(cast<T>(p.W_k)), W_v(cast<T>(p.W_v)),
        W_o(cast<T>(p.W_o)), b_q(p.b_q.begin(), p.b_q.end()), b_k(p.b_k.begin(), p.b_k.end()),
        b_v(p.b_v.begin(), p.b_v.end()), b_o(p.b_o.begin(), p.b_o.end()) {}
};

template <class T>
AttentionResult<T> run_naive(const Problem& p, Observer& observer) {
  const Inputs<T> in(p);
  const auto allows = [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); };

  // pass 1: project the tokens into queries, keys and values
  const Tensor<T> Q = project(in.X, in.W_q, std::span<const T>(in.b_q));  // (B, n, h·d_k)
  report(observer, Step::q, Q);
  const Tensor<T> K = project(in.C, in.W_k, std::span<const T>(in.b_k));  // (B, m, g·d_k)
  report(observer, Step::k, K);
  const Tensor<T> V = project(in.C, in.W_v, std::span<const T>(in.b_v));  // (B, m, g·d_v)
  report(observer, Step::v, V);

  // pass 2: split into heads
  const Tensor<T> Qh = split_heads(Q, p.h);  // (B, h, n, d_k)
  report(observer, Step::q_heads, Qh);
  const Tensor<T> Kh = split_heads(K, p.g);  // (B, g, m, d_k)
  report(observer, Step::k_heads, Kh);
  const Tensor<T> Vh = split_heads(V, p.g);  // (B, g, m, d_v)
  report(observer, Step::v_heads, Vh);

  // pass 3: query dot key, scaled, masked
  const Tensor<T> S = scores(Qh, Kh);  // (B, h, n, m)
  report(observer, Step::scores, S);
  const Tensor<T> S_scaled = scale(S, static_cast<T>(p.scale));  // (B, h, n, m)
  report(observer, Step::scaled, S_scaled);
  const Tensor<T> S_masked = apply_mask(S_scaled, allows);  // (B, h, n, m)
  report(observer, Step::masked, S_masked);

  // pass 4: softmax each row into attention weights
  const Tensor<T> A = softmax_rows(S_masked);  // (B, h, n, m)
  report(observer, Step::weights, A);

  // pass 5: average the values with the weights, per head
  const Tensor<T> O_h = weighted_sum(A, Vh);  // (B, h, n, d_v)
  report(observer, Step::head_outputs, O_h);

  // pass 6: merge the heads and project out
  Tensor<T> O = merge_heads(O_h);  // (B, n, h·d_v)
  report(observer, Step::concat, O);
  Tensor<T> Y = p.has_output_projection() ? project(O, in.W_o, std::span<const T>(in.b_o)) : std::move(O);
  report(observer, Step::output, Y);  // (B, n, d_out)

  return {std::move(Y), find_empty_rows(p)};
}

}  // namespace attn
