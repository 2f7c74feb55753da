#pragma once
// One small pure function per equation of attention. Every tensor carries a leading batch axis B
// (1 for a 2-D input), so each step of the naive engine is exactly one call here.
// Shapes: B batch, n queries, m keys, h query heads, g key/value heads, d_k, d_v head widths.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "model/heads.hpp"
#include "model/positions.hpp"
#include "model/dropout.hpp"
#include "model/score_chain.hpp"
#include "tensor/tensor.hpp"

namespace attn {

namespace detail {
inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw std::invalid_argument(fmt::format("{}: {}", op, what));
}
}  // namespace detail

// Y = X·W + b                                    X (B, n, d_in), W (d_in, d_out), b (d_out) or empty
// Y[b][i][c] = Σ_r X[b][i][r] · W[r][c] + b[c]   -> (B, n, d_out)
template <class T>
Tensor<T> project(const Tensor<T>& X, const Tensor<T>& W, std::span<const T> bias) {
  detail::require(X.rank() == 3 && W.rank() == 2 && X.dim(2) == W.dim(0), "project",
                  fmt::format("X {} · W {}: inner sizes differ", X.shape(), W.shape()));
  detail::require(bias.empty() || bias.size() == W.dim(1), "project",
                  fmt::format("bias of {} for {} outputs", bias.size(), W.dim(1)));
  const std::size_t B = X.dim(0), n = X.dim(1), d_in = X.dim(2), d_out = W.dim(1);
  Tensor<T> Y({B, n, d_out});
  const T* w = W.values().data();
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t i = 0; i < n; ++i) {
      const T* x = &X(b, i, 0);
      T* y = &Y(b, i, 0);
      // i-r-c order: the inner loop walks a row of W and of Y, contiguous in memory.
      for (std::size_t r = 0; r < d_in; ++r) {
        const T x_r = x[r];
        const T* w_r = w + r * d_out;
        for (std::size_t c = 0; c < d_out; ++c) y[c] += x_r * w_r[c];
      }
      if (!bias.empty()) {
        for (std::size_t c = 0; c < d_out; ++c) y[c] += bias[c];
      }
    }
  }
  return Y;
}

// The last two axes swapped: (B, h, r, c) -> (B, h, c, r).
template <class T>
Tensor<T> swap_last_axes(const Tensor<T>& S) {
  const std::size_t B = S.dim(0), h = S.dim(1), r = S.dim(2), c = S.dim(3);
  Tensor<T> t({B, h, c, r});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < c; ++j) t(b, hd, j, i) = S(b, hd, i, j);
  return t;
}

// Split the features into heads: reshape (B, n, h·d) -> (B, n, h, d), then transpose -> (B, h, n, d).
// Heads[b][hd][i][c] = Y[b][i][hd·d + c]
template <class T>
Tensor<T> split_heads(const Tensor<T>& Y, std::size_t heads) {
  detail::require(Y.rank() == 3 && heads > 0 && Y.dim(2) % heads == 0, "split_heads",
                  fmt::format("{} features do not split into {} heads", Y.rank() == 3 ? Y.dim(2) : 0, heads));
  const std::size_t B = Y.dim(0), n = Y.dim(1), d = Y.dim(2) / heads;
  Tensor<T> H({B, heads, n, d});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < heads; ++hd)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < d; ++c) H(b, hd, i, c) = Y(b, i, hd * d + c);
  return H;
}

// Merge the heads back: transpose (B, h, n, d) -> (B, n, h, d), then reshape -> (B, n, h·d).
// Y[b][i][hd·d + c] = O[b][hd][i][c]
template <class T>
Tensor<T> merge_heads(const Tensor<T>& O) {
  detail::require(O.rank() == 4, "merge_heads", "expects (B, h, n, d)");
  const std::size_t B = O.dim(0), heads = O.dim(1), n = O.dim(2), d = O.dim(3);
  Tensor<T> Y({B, n, heads * d});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < heads; ++hd)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < d; ++c) Y(b, i, hd * d + c) = O(b, hd, i, c);
  return Y;
}

// RoPE: the first 2·P features of every token turn pair by pair through the angle of its position; the
// rest pass through. Pair i is (a, b) = (i, i + P) in the half style, (2i, 2i + 1) interleaved.
// X (B, H, T, d), cos and sin (T, P): cos and sin of position_t · θ_i          -> (B, H, T, d)
// Y[..][t][a] = X[..][t][a]·cos[t][i] - X[..][t][b]·sin[t][i]
// Y[..][t][b] = X[..][t][b]·cos[t][i] + X[..][t][a]·sin[t][i]
template <class T>
Tensor<T> rotate(const Tensor<T>& X, const Tensor<T>& cos, const Tensor<T>& sin, RopeStyle style) {
  detail::require(X.rank() == 4 && cos.rank() == 2 && cos.shape() == sin.shape() && cos.dim(0) == X.dim(2) &&
                      2 * cos.dim(1) <= X.dim(3),
                  "rotate", fmt::format("X {} and the angles {} do not fit", X.shape(), cos.shape()));
  const std::size_t B = X.dim(0), H = X.dim(1), T_ = X.dim(2), P = cos.dim(1);
  Tensor<T> Y = X;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < H; ++hd)
      for (std::size_t t = 0; t < T_; ++t) {
        const T* x = &X(b, hd, t, 0);
        T* y = &Y(b, hd, t, 0);
        for (std::size_t i = 0; i < P; ++i) {
          const auto [a, c] = rope_pair(style, i, P);
          y[a] = x[a] * cos(t, i) - x[c] * sin(t, i);
          y[c] = x[c] * cos(t, i) + x[a] * sin(t, i);
        }
      }
  return Y;
}

// S'' = S' + bias per head                       S (B, h, n, m), slopes (h), pos_q (n), pos_k (m)
// S''[b][hd][i][j] = S'[b][hd][i][j] - s_hd·(pos_q[i] - pos_k[j])               -> (B, h, n, m)
template <class T>
Tensor<T> add_alibi(const Tensor<T>& S, std::span<const T> slopes, std::span<const T> pos_q, std::span<const T> pos_k) {
  detail::require(S.rank() == 4 && slopes.size() == S.dim(1) && pos_q.size() == S.dim(2) && pos_k.size() == S.dim(3),
                  "add_alibi",
                  fmt::format("S {} with {} slopes, {} query and {} key positions", S.shape(), slopes.size(),
                              pos_q.size(), pos_k.size()));
  const std::size_t B = S.dim(0), h = S.dim(1), n = S.dim(2), m = S.dim(3);
  Tensor<T> out = S;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) out(b, hd, i, j) += alibi_term(slopes[hd], pos_q[i], pos_k[j]);
  return out;
}

// S = Q·Kᵀ per head                                Q (B, h, n, d_k), K (B, g, m, d_k) -> (B, h, n, m)
// S[b][hd][i][j] = Σ_c Q[b][hd][i][c] · K[b][kv][j][c],  kv = kv_head_of(hd)
template <class T>
Tensor<T> scores(const Tensor<T>& Q, const Tensor<T>& K) {
  detail::require(Q.rank() == 4 && K.rank() == 4 && Q.dim(0) == K.dim(0) && Q.dim(3) == K.dim(3) && K.dim(1) > 0 &&
                      Q.dim(1) % K.dim(1) == 0,
                  "scores", fmt::format("Q {} and K {} do not fit", Q.shape(), K.shape()));
  const std::size_t B = Q.dim(0), h = Q.dim(1), n = Q.dim(2), d_k = Q.dim(3), g = K.dim(1), m = K.dim(2);
  Tensor<T> S({B, h, n, m});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      for (std::size_t i = 0; i < n; ++i) {
        const T* q = &Q(b, hd, i, 0);
        for (std::size_t j = 0; j < m; ++j) {
          const T* k = &K(b, kv, j, 0);
          T dot = 0;
          for (std::size_t c = 0; c < d_k; ++c) dot += q[c] * k[c];
          S(b, hd, i, j) = dot;
        }
      }
    }
  return S;
}

// S' = S · scale, element by element (any shape).
template <class T>
Tensor<T> scale(const Tensor<T>& S, T factor) {
  Tensor<T> out = S;
  for (T& s : out.values()) s *= factor;
  return out;
}

// S_c = c·tanh(S'/c), element by element (any shape)      S' (B, h, n, m), c > 0 -> (B, h, n, m)
template <class T>
Tensor<T> softcap(const Tensor<T>& S, T c) {
  Tensor<T> out = S;
  for (T& s : out.values()) s = softcap_term(s, c);
  return out;
}

// Masked scores: -inf where the mask forbids query i to see key j, so that exp() makes it exactly 0.
// S (B, h, n, m); allows(b, i, j) -> bool is the same for every head.
template <class T, class Allows>
Tensor<T> apply_mask(const Tensor<T>& S, const Allows& allows) {
  detail::require(S.rank() == 4, "apply_mask", "expects (B, h, n, m)");
  const std::size_t B = S.dim(0), h = S.dim(1), n = S.dim(2), m = S.dim(3);
  Tensor<T> out = S;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j)
        if (!allows(b, i, j)) {
          for (std::size_t hd = 0; hd < h; ++hd) out(b, hd, i, j) = -std::numeric_limits<T>::infinity();
        }
  return out;
}

// P = softmax(S) along each row (the last axis), any leading shape.
// P[r][j] = exp(S[r][j] - max_r) / Σ_j' exp(S[r][j'] - max_r)
// Subtracting the row max is so exp never overflows; a row whose every entry is -inf has nothing to
// attend and gets all-zero weights instead of 0/0 = NaN.
template <class T>
Tensor<T> softmax_rows(const Tensor<T>& S) {
  detail::require(S.rank() >= 1, "softmax_rows", "expects at least one axis");
  const std::size_t m = S.shape().back();
  Tensor<T> P(S.shape());
  if (m == 0) return P;
  const std::size_t rows = S.size() / m;
  const std::span<const T> s = S.values();
  const std::span<T> p = P.values();
  for (std::size_t r = 0; r < rows; ++r) {
    const std::span<const T> row = s.subspan(r * m, m);
    const std::span<T> out = p.subspan(r * m, m);
    const T max = *std::max_element(row.begin(), row.end());
    if (max == -std::numeric_limits<T>::infinity()) continue;  // nothing to attend: zeros
    T sum = 0;
    for (std::size_t j = 0; j < m; ++j) {
      out[j] = std::exp(row[j] - max);
      sum += out[j];
    }
    for (std::size_t j = 0; j < m; ++j) out[j] /= sum;
  }
  return P;
}

// P = softmax along each row with one sink logit per head: the sink joins each row's max and denominator
// but has no value, so the row's weights sum to 1 - a_sink.     S (B, h, n, m), sinks (h) -> P (B, h, n, m)
// M = max(sink_h, max_j S[r][j]),  l = exp(sink_h - M) + Σ_j exp(S[r][j] - M)
// P[r][j] = exp(S[r][j] - M) / l,  sink_share[b][hd][i] = exp(sink_h - M) / l              -> (B, h, n)
// A row whose every entry is -inf puts all its weight on the sink: P = 0, a_sink = 1.
// The sink logit is learned per head and taken raw: it is not scaled, capped or biased like the scores.
template <class T>
Tensor<T> softmax_rows_with_sinks(const Tensor<T>& S, std::span<const T> sinks, Tensor<T>& sink_share) {
  detail::require(S.rank() == 4 && sinks.size() == S.dim(1), "softmax_rows_with_sinks",
                  fmt::format("S {} with {} sinks", S.shape(), sinks.size()));
  const std::size_t B = S.dim(0), h = S.dim(1), n = S.dim(2), m = S.dim(3);
  Tensor<T> P(S.shape());
  sink_share = Tensor<T>({B, h, n});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i) {
        const T* row = m > 0 ? &S(b, hd, i, 0) : nullptr;
        T* out = m > 0 ? &P(b, hd, i, 0) : nullptr;
        const T sink = sinks[hd];
        T max = sink;
        for (std::size_t j = 0; j < m; ++j) max = std::max(max, row[j]);
        T sum = std::exp(sink - max);
        const T sink_exp = sum;
        for (std::size_t j = 0; j < m; ++j) {
          out[j] = std::exp(row[j] - max);
          sum += out[j];
        }
        for (std::size_t j = 0; j < m; ++j) out[j] /= sum;
        sink_share(b, hd, i) = sink_exp / sum;
      }
  return P;
}

// Dropout of the weights: A[b][hd][i][j] · 1/(1 - p) where the keep mask keeps it, 0 where it drops it
// (model/dropout.hpp).                                              A (B, h, n, m) -> (B, h, n, m)
template <class T>
Tensor<T> apply_dropout(const Tensor<T>& A, const DropoutMask& mask) {
  detail::require(A.rank() == 4, "apply_dropout", "expects (B, h, n, m)");
  const std::size_t B = A.dim(0), h = A.dim(1), n = A.dim(2), m = A.dim(3);
  Tensor<T> out = A;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) out(b, hd, i, j) *= mask.factor<T>(b, hd, i, j);
  return out;
}

// O = P·V per head                                 P (B, h, n, m), V (B, g, m, d_v) -> (B, h, n, d_v)
// O[b][hd][i][c] = Σ_j P[b][hd][i][j] · V[b][kv][j][c],  kv = kv_head_of(hd)
template <class T>
Tensor<T> weighted_sum(const Tensor<T>& P, const Tensor<T>& V) {
  detail::require(P.rank() == 4 && V.rank() == 4 && P.dim(0) == V.dim(0) && P.dim(3) == V.dim(2) && V.dim(1) > 0 &&
                      P.dim(1) % V.dim(1) == 0,
                  "weighted_sum", fmt::format("P {} and V {} do not fit", P.shape(), V.shape()));
  const std::size_t B = P.dim(0), h = P.dim(1), n = P.dim(2), m = P.dim(3), g = V.dim(1), d_v = V.dim(3);
  Tensor<T> O({B, h, n, d_v});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      for (std::size_t i = 0; i < n; ++i) {
        T* o = &O(b, hd, i, 0);
        for (std::size_t j = 0; j < m; ++j) {
          const T p = P(b, hd, i, j);
          if (p == 0) continue;  // a masked key adds nothing
          const T* v = &V(b, kv, j, 0);
          for (std::size_t c = 0; c < d_v; ++c) o[c] += p * v[c];
        }
      }
    }
  return O;
}

}  // namespace attn
