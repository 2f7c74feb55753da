#pragma once
// The online softmax of FlashAttention: a row's softmax built up one tile of keys at a time, with a
// running max m, a running sum l and an unnormalised output O that are rescaled whenever m grows.
// ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 1, lines 8-12.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "model/run.hpp"
#include "ops/attention.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// The state of one query tile after a key tile has been folded in.
template <class T>
struct OnlineSoftmaxStep {
  Tensor<T> m_new;   // (Br)       running row max, including this tile
  Tensor<T> alpha;   // (Br)       exp(m_prev - m_new): how much the earlier tiles shrink
  Tensor<T> P;       // (Br, Bc)   exp(S - m_new): this tile's unnormalised weights
  Tensor<T> P_drop;  // (Br, Bc)  P after dropout, what P·V reads: with a dropout mask only
  Tensor<T> l_new;   // (Br)       running row sum of exp(S - m_new)
  Tensor<T> O;       // (Br, d_v)  running unnormalised output
};

// Fold score tile S into the running state (m_prev, l_prev, O_prev) of its query rows.
// S (Br, Bc) is already scaled and masked (-inf where forbidden); V (Bc, d_v) is the tile's values.
//   m_new = max(m_prev, rowmax(S))
//   alpha = exp(m_prev - m_new)             earlier tiles were summed against a smaller max
//   P     = exp(S - m_new)                  subtracting the max is so exp never overflows
//   l_new = alpha · l_prev + rowsum(P)
//   O     = diag(alpha) · O_prev + P·V      O[r][c] = alpha[r]·O_prev[r][c] + Σ_j P[r][j]·V[j][c]
// With dropout (`drop`, (Br, Bc): 1/(1 - p) where kept, 0 where dropped) the running sum l still sums P,
// the softmax's denominator, while O sums P_drop·V = (P ⊙ drop)·V: dropout comes after the softmax.
// A row that has seen only -inf so far keeps m = -inf, alpha = 1, P = 0: nothing to rescale yet.
// In a half `storage` type P is rounded to it before P·V, as FlashAttention feeds P to its half-precision
// matrix product, while l sums P unrounded; S, m, l, alpha and O stay in T (registers).
template <class T>
OnlineSoftmaxStep<T> online_softmax_update(const Tensor<T>& S, const Tensor<T>& m_prev, const Tensor<T>& l_prev,
                                           const Tensor<T>& O_prev, const Tensor<T>& V, DType storage = DType::float32,
                                           const Tensor<T>* drop = nullptr) {
  detail::require(S.rank() == 2 && V.rank() == 2 && O_prev.rank() == 2 && S.dim(1) == V.dim(0) &&
                      m_prev.size() == S.dim(0) && l_prev.size() == S.dim(0) && O_prev.dim(0) == S.dim(0) &&
                      O_prev.dim(1) == V.dim(1),
                  "online_softmax_update",
                  fmt::format("S {}, V {}, O {} and {} running rows do not fit", S.shape(), V.shape(), O_prev.shape(),
                              m_prev.size()));
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t Br = S.dim(0), Bc = S.dim(1), d_v = V.dim(1);
  OnlineSoftmaxStep<T> out{Tensor<T>({Br}),     Tensor<T>({Br}),
                           Tensor<T>({Br, Bc}), drop != nullptr ? Tensor<T>({Br, Bc}) : Tensor<T>(),
                           Tensor<T>({Br}),     O_prev};
  const Tensor<T>& weights = drop != nullptr ? out.P_drop : out.P;  // what P·V reads
  for (std::size_t r = 0; r < Br; ++r) {
    T m = m_prev(r);
    for (std::size_t j = 0; j < Bc; ++j) m = std::max(m, S(r, j));
    out.m_new(r) = m;
    if (m == minus_inf) {  // nothing to attend yet: the state stays (0, 0)
      out.alpha(r) = 1;
      out.l_new(r) = l_prev(r);
      continue;
    }
    const T alpha = std::exp(m_prev(r) - m);  // m_prev = -inf gives 0: there was nothing to rescale
    out.alpha(r) = alpha;
    T sum = 0;
    for (std::size_t j = 0; j < Bc; ++j) {
      const T p = std::exp(S(r, j) - m);
      sum += p;
      out.P(r, j) = stored(storage, p);
      if (drop != nullptr) out.P_drop(r, j) = stored(storage, out.P(r, j) * (*drop)(r, j));
    }
    out.l_new(r) = alpha * l_prev(r) + sum;
    T* o = &out.O(r, 0);
    for (std::size_t c = 0; c < d_v; ++c) o[c] *= alpha;
    for (std::size_t j = 0; j < Bc; ++j) {
      const T p = weights(r, j);
      if (p == 0) continue;  // a masked (or dropped) key adds nothing
      const T* v = &V(j, 0);
      for (std::size_t c = 0; c < d_v; ++c) o[c] += p * v[c];
    }
  }
  return out;
}

// The last step of a query tile: divide by the row sums once; lse = m + log(l).
// O (Br, d_v), m and l (Br). A row with l == 0 had nothing to attend: zero output, lse = -inf.
template <class T>
void finish_rows(Tensor<T>& O, Tensor<T>& lse, const Tensor<T>& m, const Tensor<T>& l) {
  const std::size_t Br = O.dim(0), d_v = O.dim(1);
  lse = Tensor<T>({Br});
  for (std::size_t r = 0; r < Br; ++r) {
    if (l(r) == 0) {
      for (std::size_t c = 0; c < d_v; ++c) O(r, c) = 0;
      lse(r) = -std::numeric_limits<T>::infinity();
      continue;
    }
    for (std::size_t c = 0; c < d_v; ++c) O(r, c) /= l(r);
    lse(r) = m(r) + std::log(l(r));
  }
}

// Flash-decoding's merge: one query row's softmax over S chunks of keys, each chunk's softmax done on its
// own, put together exactly. Chunk s gives o_s (its output, normalised within it) and lse_s = log Σ_{j in s}
// exp(s_j), -inf for a chunk with nothing to attend; a sink logit, when there is one, is one more chunk
// whose output is 0. Then
//   lse = log Σ_s exp(lse_s)       as M + log Σ_s exp(lse_s - M), M = max_s lse_s, so exp never overflows
//   o   = Σ_s exp(lse_s - lse) · o_s                      each chunk weighted by its share of the whole row
// lse_s (S), o_s (S, d_v), sink: -inf for none. ref: Dao, Haziza, Massa and Sizov, "Flash-Decoding for
// long-context inference" (2023); FlashInfer's merge of attention states (Ye et al., arXiv:2501.01005).
template <class T>
struct MergedRow {
  T lse;                 // -inf: nothing in any chunk to attend
  std::vector<T> share;  // (S) exp(lse_s - lse)
  T sink_share = 0;      // exp(sink - lse)
  std::vector<T> o;      // (d_v)
};

template <class T>
MergedRow<T> merge_chunks(std::span<const T> lse_s, const Tensor<T>& o_s,
                          T sink = -std::numeric_limits<T>::infinity()) {
  detail::require(o_s.rank() == 2 && o_s.dim(0) == lse_s.size(), "merge_chunks",
                  fmt::format("{} log-sum-exps for partial outputs {}", lse_s.size(), o_s.shape()));
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t S = lse_s.size(), d_v = o_s.dim(1);
  MergedRow<T> out{minus_inf, std::vector<T>(S, T(0)), T(0), std::vector<T>(d_v, T(0))};
  T M = sink;
  for (const T x : lse_s) M = std::max(M, x);
  if (M == minus_inf) return out;  // nothing to attend anywhere: zero output, as a plain row has
  T sum = std::exp(sink - M);      // 0 without a sink
  for (const T x : lse_s) sum += std::exp(x - M);
  out.lse = M + std::log(sum);
  out.sink_share = std::exp(sink - out.lse);
  for (std::size_t s = 0; s < S; ++s) {
    const T w = std::exp(lse_s[s] - out.lse);
    out.share[s] = w;
    if (w == 0) continue;  // an empty chunk adds nothing
    for (std::size_t c = 0; c < d_v; ++c) out.o[c] += w * o_s(s, c);
  }
  return out;
}

}  // namespace attn
