#pragma once
// The backward of each equation of ops/attention.hpp, beside it by name: d_ + the forward's name. Each
// takes the gradient of the forward's result (and what the forward read) and returns the gradient of
// one of its inputs, L being the scalar the upstream gradient dY = ∂L/∂Y defines (L = Σ Y ⊙ dY).
// Shapes as there: B batch, n queries, m keys, h query heads, g key/value heads, d_k, d_v head widths.

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "model/positions.hpp"
#include "ops/attention.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// ------------------------------------------------------------------------------------ projections

// Y = X·W + b, back to X:                            dY (B, n, d_out), W (d_in, d_out) -> (B, n, d_in)
// dX = dY·Wᵀ          dX[b][i][r] = Σ_c dY[b][i][c] · W[r][c]
template <class T>
Tensor<T> d_project_input(const Tensor<T>& dY, const Tensor<T>& W) {
  detail::require(dY.rank() == 3 && W.rank() == 2 && dY.dim(2) == W.dim(1), "d_project_input",
                  fmt::format("dY {} · W {}ᵀ: inner sizes differ", dY.shape(), W.shape()));
  const std::size_t B = dY.dim(0), n = dY.dim(1), d_in = W.dim(0), d_out = W.dim(1);
  Tensor<T> dX({B, n, d_in});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < n; ++i) {
      const T* dy = &dY(b, i, 0);
      for (std::size_t r = 0; r < d_in; ++r) {
        const T* w = &W(r, 0);  // row r of W: contiguous over c
        T sum = 0;
        for (std::size_t c = 0; c < d_out; ++c) sum += dy[c] * w[c];
        dX(b, i, r) = sum;
      }
    }
  return dX;
}

// Y = X·W + b, back to W: one matrix for every token of every batch item, so their parts add up.
// dW = Σ_b X_bᵀ·dY_b   dW[r][c] = Σ_b Σ_i X[b][i][r] · dY[b][i][c]     X (B, n, d_in), dY (B, n, d_out)
// -> (d_in, d_out)
template <class T>
Tensor<T> d_project_weight(const Tensor<T>& X, const Tensor<T>& dY) {
  detail::require(X.rank() == 3 && dY.rank() == 3 && X.dim(0) == dY.dim(0) && X.dim(1) == dY.dim(1), "d_project_weight",
                  fmt::format("X {} and dY {}: the tokens differ", X.shape(), dY.shape()));
  const std::size_t B = X.dim(0), n = X.dim(1), d_in = X.dim(2), d_out = dY.dim(2);
  Tensor<T> dW({d_in, d_out});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < n; ++i) {
      const T* x = &X(b, i, 0);
      const T* dy = &dY(b, i, 0);
      // i-r-c order: the inner loop walks a row of dW and of dY, contiguous in memory.
      for (std::size_t r = 0; r < d_in; ++r) {
        T* dw = &dW(r, 0);
        for (std::size_t c = 0; c < d_out; ++c) dw[c] += x[r] * dy[c];
      }
    }
  return dW;
}

// Y = X·W + b, back to b: every token added the same b.
// db = Σ_b Σ_i dY[b][i]                                            dY (B, n, d_out) -> (d_out)
template <class T>
Tensor<T> d_project_bias(const Tensor<T>& dY) {
  detail::require(dY.rank() == 3, "d_project_bias", "expects (B, n, d_out)");
  const std::size_t B = dY.dim(0), n = dY.dim(1), d_out = dY.dim(2);
  Tensor<T> db({d_out});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < d_out; ++c) db(c) += dY(b, i, c);
  return db;
}

// ------------------------------------------------------------------------------ heads and rotation

// A relayout moves values without computing: its backward moves the gradients back the same way.
// split_heads's backward is merge_heads, and merge_heads's is split_heads (ops/attention.hpp).

// RoPE's backward: the rotation is orthogonal, so its transpose (the turn by -angle) carries the gradient.
// dY (B, H, T, d), cos and sin (T, P)                                               -> (B, H, T, d)
// dX[..][t][a] =  dY[..][t][a]·cos[t][i] + dY[..][t][b]·sin[t][i]
// dX[..][t][b] = -dY[..][t][a]·sin[t][i] + dY[..][t][b]·cos[t][i]
template <class T>
Tensor<T> d_rotate(const Tensor<T>& dY, const Tensor<T>& cos, const Tensor<T>& sin, RopeStyle style) {
  detail::require(dY.rank() == 4 && cos.rank() == 2 && cos.shape() == sin.shape() && cos.dim(0) == dY.dim(2) &&
                      2 * cos.dim(1) <= dY.dim(3),
                  "d_rotate", fmt::format("dY {} and the angles {} do not fit", dY.shape(), cos.shape()));
  const std::size_t B = dY.dim(0), H = dY.dim(1), T_ = dY.dim(2), P = cos.dim(1);
  Tensor<T> dX = dY;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < H; ++hd)
      for (std::size_t t = 0; t < T_; ++t) {
        const T* dy = &dY(b, hd, t, 0);
        T* dx = &dX(b, hd, t, 0);
        for (std::size_t i = 0; i < P; ++i) {
          const auto [a, c] = rope_pair(style, i, P);
          dx[a] = dy[a] * cos(t, i) + dy[c] * sin(t, i);
          dx[c] = dy[c] * cos(t, i) - dy[a] * sin(t, i);
        }
      }
  return dX;
}

// ------------------------------------------------------------------------------------ scores

// S = Q·Kᵀ per head, back to Q:                     dS (B, h, n, m), K (B, g, m, d_k) -> (B, h, n, d_k)
// dQ[b][hd][i][c] = Σ_j dS[b][hd][i][j] · K[b][kv][j][c],  kv = kv_head_of(hd)
template <class T>
Tensor<T> d_scores_queries(const Tensor<T>& dS, const Tensor<T>& K) {
  detail::require(dS.rank() == 4 && K.rank() == 4 && dS.dim(0) == K.dim(0) && dS.dim(3) == K.dim(2) && K.dim(1) > 0 &&
                      dS.dim(1) % K.dim(1) == 0,
                  "d_scores_queries", fmt::format("dS {} and K {} do not fit", dS.shape(), K.shape()));
  return weighted_sum(dS, K);  // the same sum as O = P·V: over the keys, with dS in the weights' place
}

// S = Q·Kᵀ per head, back to K: a key/value head is read by h/g query heads, so their parts add up.
// dK[b][kv][j][c] = Σ_{hd reads kv} Σ_i dS[b][hd][i][j] · Q[b][hd][i][c]
// dS (B, h, n, m), Q (B, h, n, d_k), g key heads                                  -> (B, g, m, d_k)
template <class T>
Tensor<T> d_scores_keys(const Tensor<T>& dS, const Tensor<T>& Q, std::size_t g) {
  detail::require(dS.rank() == 4 && Q.rank() == 4 && dS.dim(0) == Q.dim(0) && dS.dim(1) == Q.dim(1) &&
                      dS.dim(2) == Q.dim(2) && g > 0 && dS.dim(1) % g == 0,
                  "d_scores_keys",
                  fmt::format("dS {} and Q {} with {} key heads do not fit", dS.shape(), Q.shape(), g));
  const std::size_t B = dS.dim(0), h = dS.dim(1), n = dS.dim(2), m = dS.dim(3), d = Q.dim(3);
  Tensor<T> dK({B, g, m, d});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      for (std::size_t i = 0; i < n; ++i) {
        const T* q = &Q(b, hd, i, 0);
        for (std::size_t j = 0; j < m; ++j) {
          const T ds = dS(b, hd, i, j);
          if (ds == 0) continue;  // a masked score passes nothing back
          T* dk = &dK(b, kv, j, 0);
          for (std::size_t c = 0; c < d; ++c) dk[c] += ds * q[c];
        }
      }
    }
  return dK;
}

// The mask's backward: a forbidden score was set to the constant -inf, so nothing flows back through it.
// dS' = dS'' where allowed, 0 elsewhere                  dS (B, h, n, m); allows(b, i, j) -> bool
template <class T, class Allows>
Tensor<T> d_apply_mask(const Tensor<T>& dS, const Allows& allows) {
  detail::require(dS.rank() == 4, "d_apply_mask", "expects (B, h, n, m)");
  const std::size_t B = dS.dim(0), h = dS.dim(1), n = dS.dim(2), m = dS.dim(3);
  Tensor<T> out = dS;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j)
        if (!allows(b, i, j)) {
          for (std::size_t hd = 0; hd < h; ++hd) out(b, hd, i, j) = 0;
        }
  return out;
}

// S_c = c·tanh(S'/c), back to S':                          dS_c, S_c (B, h, n, m), c > 0 -> (B, h, n, m)
// dS'[..] = dS_c[..] · (1 - (S_c[..]/c)²)
template <class T>
Tensor<T> d_softcap(const Tensor<T>& dS, const Tensor<T>& capped, T c) {
  detail::require(dS.shape() == capped.shape(), "d_softcap",
                  fmt::format("dS_c {} and S_c {} differ", dS.shape(), capped.shape()));
  Tensor<T> out = dS;
  for (std::size_t k = 0; k < out.size(); ++k) out.values()[k] *= softcap_slope(capped.values()[k], c);
  return out;
}

// ------------------------------------------------------------------------------------ softmax

// A = softmax(S) along each row, back to S, with the identity
//   dS = A ⊙ (dA - D),  D = rowsum(dA ⊙ A)
// which is the Jacobian diag(A) - A·Aᵀ of each row applied to dA without forming it (m × m per row).
// dS[r][j] = A[r][j] · (dA[r][j] - Σ_j' dA[r][j'] · A[r][j'])      A, dA (any leading shape, m last)
// A row with nothing to attend has A = 0, so its dS is 0: its softmax could not move.
template <class T>
Tensor<T> d_softmax_rows(const Tensor<T>& A, const Tensor<T>& dA) {
  detail::require(A.shape() == dA.shape() && A.rank() >= 1, "d_softmax_rows",
                  fmt::format("A {} and dA {} differ", A.shape(), dA.shape()));
  const std::size_t m = A.shape().back();
  Tensor<T> dS(A.shape());
  if (m == 0) return dS;
  const std::size_t rows = A.size() / m;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::span<const T> a = A.values().subspan(r * m, m);
    const std::span<const T> da = dA.values().subspan(r * m, m);
    const std::span<T> out = dS.values().subspan(r * m, m);
    T D = 0;
    for (std::size_t j = 0; j < m; ++j) D += da[j] * a[j];
    for (std::size_t j = 0; j < m; ++j) out[j] = a[j] * (da[j] - D);
  }
  return dS;
}

// The sinks' logits, back from the softmax: the sink is a column of the row whose dA is 0 (it has no
// value), so the softmax's backward at it is a_sink · (0 - D), D = rowsum(dA ⊙ A) over the keys; each
// head's sink gathers it from every query of every batch item.
// dsink[hd] = -Σ_{b,i} a_sink[b][hd][i] · Σ_j dA[b][hd][i][j] · A[b][hd][i][j]
// A, dA (B, h, n, m), sink_share (B, h, n)                                                  -> (h)
template <class T>
Tensor<T> d_sinks(const Tensor<T>& A, const Tensor<T>& dA, const Tensor<T>& sink_share) {
  detail::require(
      A.rank() == 4 && A.shape() == dA.shape() && sink_share.rank() == 3 && sink_share.dim(0) == A.dim(0) &&
          sink_share.dim(1) == A.dim(1) && sink_share.dim(2) == A.dim(2),
      "d_sinks",
      fmt::format("A {}, dA {} and the sinks' shares {} do not fit", A.shape(), dA.shape(), sink_share.shape()));
  const std::size_t B = A.dim(0), h = A.dim(1), n = A.dim(2), m = A.dim(3);
  Tensor<T> d({h});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i) {
        T D = 0;
        for (std::size_t j = 0; j < m; ++j) D += dA(b, hd, i, j) * A(b, hd, i, j);
        d(hd) -= sink_share(b, hd, i) * D;
      }
  return d;
}

// The sinks' shares, back to the scores and the sinks: a_sink = exp(sink - M)/l is one more entry of the
// row's softmax, so its backward is the softmax's, with only that entry's gradient d_share nonzero:
// dS[r][j] = -d_share[r]·a_sink[r]·A[r][j],  dsink[hd] = Σ_{b,i} d_share·a_sink·(1 - a_sink).
// (Nothing in attention reads the shares, so a backward pass sends 0 this way: this is for a row's own
// check, and for whoever reads them.)    d_share, sink_share (B, h, n), A (B, h, n, m) -> dS (B, h, n, m)
template <class T>
Tensor<T> d_sink_share_scores(const Tensor<T>& d_share, const Tensor<T>& sink_share, const Tensor<T>& A) {
  detail::require(
      A.rank() == 4 && d_share.shape() == sink_share.shape() && sink_share.size() * A.dim(3) == A.size(),
      "d_sink_share_scores",
      fmt::format("d_share {}, the shares {} and A {} do not fit", d_share.shape(), sink_share.shape(), A.shape()));
  const std::size_t m = A.dim(3);
  Tensor<T> dS(A.shape());
  for (std::size_t r = 0; r < sink_share.size(); ++r)
    for (std::size_t j = 0; j < m; ++j)
      dS.values()[r * m + j] = -d_share.values()[r] * sink_share.values()[r] * A.values()[r * m + j];
  return dS;
}
//                                                                     d_share, sink_share (B, h, n) -> (h)
template <class T>
Tensor<T> d_sink_share_sinks(const Tensor<T>& d_share, const Tensor<T>& sink_share) {
  const std::size_t h = sink_share.dim(1), n = sink_share.dim(2);
  Tensor<T> d({h});
  for (std::size_t r = 0; r < sink_share.size(); ++r) {
    const T a = sink_share.values()[r];
    d(r / n % h) += d_share.values()[r] * a * (1 - a);
  }
  return d;
}

// The same gradient from what a flash backward keeps, with no weight formed: a_sink = exp(sink - lse)
// and D = rowsum(dO ⊙ O), one number per row each.
// dsink[hd] = -Σ_{b,i} exp(sinks[hd] - lse[b][hd][i]) · D[b][hd][i]
// sinks (h); lse, D (B, h, n), row-major, n queries                                          -> (h)
template <class T>
std::vector<T> d_sinks_from_rows(std::span<const T> sinks, std::span<const T> lse, std::span<const T> D,
                                 std::size_t n) {
  const std::size_t h = sinks.size();
  detail::require(lse.size() == D.size() && h > 0 && n > 0 && lse.size() % (h * n) == 0, "d_sinks_from_rows",
                  fmt::format("{} sinks, {} lse and {} D of {} queries do not fit", h, lse.size(), D.size(), n));
  std::vector<T> d(h, T{0});
  for (std::size_t row = 0; row < lse.size(); ++row) {
    const std::size_t hd = row / n % h;  // rows run over (b, head, query)
    d[hd] -= std::exp(sinks[hd] - lse[row]) * D[row];
  }
  return d;
}

// ------------------------------------------------------------------------------- weighted sum

// O = A·V per head, back to A: every key's weight, masked or not, changes O by its value.
// dA = dO·Vᵀ   dA[b][hd][i][j] = Σ_c dO[b][hd][i][c] · V[b][kv][j][c]
// dO (B, h, n, d_v), V (B, g, m, d_v)                                               -> (B, h, n, m)
template <class T>
Tensor<T> d_weighted_sum_weights(const Tensor<T>& dO, const Tensor<T>& V) {
  return scores(dO, V);  // the same dot products as S = Q·Kᵀ, with dO and V in Q's and K's places
}

// O = A·V per head, back to V: a key/value head is read by h/g query heads, so their parts add up.
// dV[b][kv][j][c] = Σ_{hd reads kv} Σ_i A[b][hd][i][j] · dO[b][hd][i][c]
// A (B, h, n, m), dO (B, h, n, d_v), g value heads                                  -> (B, g, m, d_v)
template <class T>
Tensor<T> d_weighted_sum_values(const Tensor<T>& A, const Tensor<T>& dO, std::size_t g) {
  return d_scores_keys(A, dO, g);  // the same sum as dK = dSᵀ·Q, with A and dO in dS's and Q's places
}

// ------------------------------------------------------------------------------------ sums

// a + b, element by element: the gradients of one tensor that reached it along several paths.
template <class T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  detail::require(a.shape() == b.shape(), "add", fmt::format("{} + {}: shapes differ", a.shape(), b.shape()));
  Tensor<T> out = a;
  for (std::size_t k = 0; k < out.size(); ++k) out.values()[k] += b.values()[k];
  return out;
}

// The transpose of a matrix: a weight's gradient in PyTorch's out × in layout.
template <class T>
Tensor<T> transposed(const Tensor<T>& M) {
  detail::require(M.rank() == 2, "transposed", "expects a matrix");
  Tensor<T> out({M.dim(1), M.dim(0)});
  for (std::size_t r = 0; r < M.dim(0); ++r)
    for (std::size_t c = 0; c < M.dim(1); ++c) out(c, r) = M(r, c);
  return out;
}

}  // namespace attn
