#include "bench/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "ops/attention.hpp"
#include "model/score_chain.hpp"

namespace attn {

std::vector<std::size_t> sample_rows(std::size_t n, std::size_t count) {
  std::vector<std::size_t> rows;
  if (n <= count) {
    for (std::size_t i = 0; i < n; ++i) rows.push_back(i);
    return rows;
  }
  if (count == 1) return {0};
  // row k = round(k·(n − 1)/(count − 1)): distinct, since n > count
  for (std::size_t k = 0; k < count; ++k) rows.push_back((k * (n - 1) + (count - 1) / 2) / (count - 1));
  return rows;
}

RowReference reference_rows(const Problem& p, std::size_t count) {
  RowReference ref;
  ref.rows = sample_rows(p.n, count);
  const std::size_t R = ref.rows.size(), B = p.B, h = p.h, g = p.g, m = p.m, d_k = p.d_k, d_v = p.d_v;
  // Every key and value once, in double: K = C·W_k + b_k, V = C·W_v + b_v, split into heads.
  Tensor<double> K = split_heads(project(p.C, p.W_k, std::span<const double>(p.b_k)), g);        // (B, g, m, d_k)
  const Tensor<double> V = split_heads(project(p.C, p.W_v, std::span<const double>(p.b_v)), g);  // (B, g, m, d_v)
  // The sampled queries alone.
  Tensor<double> X_rows({B, R, p.d_model});  // (B, R, d_model)
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t c = 0; c < p.d_model; ++c) X_rows(b, r, c) = p.X(b, ref.rows[r], c);
  Tensor<double> Q = split_heads(project(X_rows, p.W_q, std::span<const double>(p.b_q)), h);  // (B, h, R, d_k)
  if (p.rope) {
    const std::size_t P = p.rope->cos_q.dim(1);
    Tensor<double> cos_rows({R, P}), sin_rows({R, P});  // the sampled queries' angles
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t e = 0; e < P; ++e) {
        cos_rows(r, e) = p.rope->cos_q(ref.rows[r], e);
        sin_rows(r, e) = p.rope->sin_q(ref.rows[r], e);
      }
    Q = rotate(Q, cos_rows, sin_rows, p.rope->style);
    K = rotate(K, p.rope->cos_k, p.rope->sin_k, p.rope->style);
  }

  // O[b][hd][r] = Σ_j a_j·v_j, the weights of row i from the score chain (model/score_chain.hpp): each
  // score through its elementwise stages, the softmax with the head's sink when the input has sinks, each
  // weight times dropout's factor. One row at a time, so nothing of size n × m is held.
  const ScoreChain<double> chain(p, DType::float64);
  Tensor<double> O({B, h, R, d_v});  // (B, h, R, d_v)
  std::vector<double> s(m);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      for (std::size_t r = 0; r < R; ++r) {
        const std::size_t i = ref.rows[r];
        const bool sink = chain.has(Stage::sinks);
        double max = sink ? chain.sink(hd) : -std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j < m; ++j) {
          double dot = 0;
          for (std::size_t e = 0; e < d_k; ++e) dot += Q(b, hd, r, e) * K(b, kv, j, e);
          s[j] = chain.score({b, hd, i, j}, dot);
          max = std::max(max, s[j]);
        }
        if (max == -std::numeric_limits<double>::infinity()) continue;  // nothing to attend: zeros
        double sum = sink ? std::exp(chain.sink(hd) - max) : 0;         // less the max, so exp never overflows
        for (std::size_t j = 0; j < m; ++j)
          s[j] = s[j] == -std::numeric_limits<double>::infinity() ? 0 : std::exp(s[j] - max);
        for (std::size_t j = 0; j < m; ++j) sum += s[j];
        for (std::size_t j = 0; j < m; ++j) {
          if (s[j] == 0) continue;
          const double a = s[j] / sum * (chain.has(Stage::dropout) ? chain.factor({b, hd, i, j}) : 1.0);
          for (std::size_t e = 0; e < d_v; ++e) O(b, hd, r, e) += a * V(b, kv, j, e);
        }
      }
    }
  Tensor<double> Y = merge_heads(O);  // (B, R, h·d_v)
  ref.Y = p.has_output_projection() ? project(Y, p.W_o, std::span<const double>(p.b_o)) : std::move(Y);
  return ref;
}

namespace {

template <class T>
double error_of(const RowReference& ref, const Tensor<T>& Y) {
  const std::size_t R = ref.rows.size();
  if (Y.rank() != 3 || ref.Y.rank() != 3 || Y.dim(0) != ref.Y.dim(0) || Y.dim(2) != ref.Y.dim(2) ||
      (R > 0 && ref.rows.back() >= Y.dim(1)))
    throw std::invalid_argument(
        fmt::format("max_error: output {} against reference rows {}", Y.shape(), ref.Y.shape()));
  double worst = 0;
  for (std::size_t b = 0; b < Y.dim(0); ++b)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t c = 0; c < Y.dim(2); ++c) {
        const double e = std::abs(static_cast<double>(Y(b, ref.rows[r], c)) - ref.Y(b, r, c));
        if (std::isnan(e)) return std::numeric_limits<double>::quiet_NaN();
        worst = std::max(worst, e);
      }
  return worst;
}

}  // namespace

double max_error(const RowReference& reference, const Tensor<float>& output) { return error_of(reference, output); }
double max_error(const RowReference& reference, const Tensor<double>& output) { return error_of(reference, output); }

}  // namespace attn
