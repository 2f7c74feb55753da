#pragma once
// What both engines share: the inputs in the run's scalar type, the projections before attention and
// after it, the rows with nothing to attend, and the result.

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "model/problem.hpp"
#include "ops/attention.hpp"
#include "tensor/tensor.hpp"
#include "observe/observer.hpp"
#include "observe/records.hpp"

namespace attn {

template <class T>
struct AttentionResult {
  Tensor<T> output;                  // (B, n, d_out)
  std::vector<EmptyRow> empty_rows;  // rows with nothing to attend, in order
  std::size_t peak_score_bytes = 0;  // most bytes held at once for scores and weights, as counted
  Tensor<T> lse;                     // (B, h, n) log-sum-exp of each row: flash only
};

// Counts the bytes an engine holds for score-sized buffers, and the most it held at once.
class ByteMeter {
 public:
  void hold(std::size_t bytes) { peak_ = std::max(peak_, now_ += bytes); }
  void release(std::size_t bytes) { now_ -= bytes; }
  std::size_t peak() const { return peak_; }

 private:
  std::size_t now_ = 0;
  std::size_t peak_ = 0;
};

template <class T>
std::size_t bytes_of(const Tensor<T>& t) {
  return t.size() * sizeof(T);
}

// The rows that the mask leaves without a single key (the same for every head).
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
      : X(cast<T>(p.X)),
        C(cast<T>(p.C)),
        W_q(cast<T>(p.W_q)),
        W_k(cast<T>(p.W_k)),
        W_v(cast<T>(p.W_v)),
        W_o(cast<T>(p.W_o)),
        b_q(p.b_q.begin(), p.b_q.end()),
        b_k(p.b_k.begin(), p.b_k.end()),
        b_v(p.b_v.begin(), p.b_v.end()),
        b_o(p.b_o.begin(), p.b_o.end()) {}
};

template <class T>
struct Heads {
  Tensor<T> Q;  // (B, h, n, d_k)
  Tensor<T> K;  // (B, g, m, d_k)
  Tensor<T> V;  // (B, g, m, d_v)
};

// Project the tokens into queries, keys and values, and split them into heads (steps q … v_heads).
template <class T>
Heads<T> project_heads(const Problem& p, const Inputs<T>& in, Observer& observer) {
  const Tensor<T> Q = project(in.X, in.W_q, std::span<const T>(in.b_q));  // (B, n, h·d_k)
  report(observer, Step::q, Q);
  const Tensor<T> K = project(in.C, in.W_k, std::span<const T>(in.b_k));  // (B, m, g·d_k)
  report(observer, Step::k, K);
  const Tensor<T> V = project(in.C, in.W_v, std::span<const T>(in.b_v));  // (B, m, g·d_v)
  report(observer, Step::v, V);

  Heads<T> heads{split_heads(Q, p.h), split_heads(K, p.g), split_heads(V, p.g)};
  report(observer, Step::q_heads, heads.Q);
  report(observer, Step::k_heads, heads.K);
  report(observer, Step::v_heads, heads.V);
  return heads;
}

// Merge the heads' outputs and project them out (steps concat, output).
template <class T>
Tensor<T> merge_and_project(const Problem& p, const Inputs<T>& in, const Tensor<T>& O_h, Observer& observer) {
  Tensor<T> O = merge_heads(O_h);  // (B, n, h·d_v)
  report(observer, Step::concat, O);
  Tensor<T> Y = p.has_output_projection() ? project(O, in.W_o, std::span<const T>(in.b_o)) : std::move(O);
  report(observer, Step::output, Y);  // (B, n, d_out)
  return Y;
}

}  // namespace attn
