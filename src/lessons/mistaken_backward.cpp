#include "lessons/mistaken_backward.hpp"

#include <utility>

#include "engine/backward.hpp"
#include "engine/common.hpp"
#include "engine/rows.hpp"
#include "ops/attention.hpp"
#include "ops/attention_backward.hpp"
#include "model/dropout.hpp"

namespace attn {

namespace {

// One query head of each group of h/g: the first (`last` false) or the last, as g heads.
// (B, h, r, c) -> (B, g, r, c)
template <class T>
Tensor<T> one_head_per_group(const Tensor<T>& S, std::size_t g, bool last) {
  const std::size_t B = S.dim(0), h = S.dim(1), r = S.dim(2), c = S.dim(3), group = h / g;
  Tensor<T> t({B, g, r, c});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t kv = 0; kv < g; ++kv) {
      const std::size_t hd = kv * group + (last ? group - 1 : 0);
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < c; ++j) t(b, kv, i, j) = S(b, hd, i, j);
    }
  return t;
}

// The gradient of a key/value head from the query heads that read it: dK = dSᵀ·Q (or dV = Aᵀ·dO, with A
// and dO in dS's and Q's places), summed over the group, or with the GQA mistakes from one head of it.
// dS (B, h, n, m), Q (B, h, n, d) -> (B, g, m, d)
template <class T>
Tensor<T> key_head_gradient(const Tensor<T>& dS, const Tensor<T>& Q, std::size_t g, Mistake v) {
  if (v == Mistake::gqa_first_head || v == Mistake::gqa_last_head) {
    const bool last = v == Mistake::gqa_last_head;
    return d_scores_keys(one_head_per_group(dS, g, last), one_head_per_group(Q, g, last), g);
  }
  return d_scores_keys(dS, Q, g);
}

// The softmax's backward with the row term D given:  dS = A ⊙ (dA - D)
// dS[r][j] = A[r][j] · (dA[r][j] - D[r])                               A, dA (B, h, n, m), D (B·h·n)
template <class T>
Tensor<T> softmax_backward_with(const Tensor<T>& A, const Tensor<T>& dA, const std::vector<T>& D) {
  const std::size_t m = A.shape().back();
  Tensor<T> dS(A.shape());
  for (std::size_t r = 0; m > 0 && r < A.size() / m; ++r)
    for (std::size_t j = 0; j < m; ++j)
      dS.values()[r * m + j] = A.values()[r * m + j] * (dA.values()[r * m + j] - D[r]);
  return dS;
}

// dS'' from dA, as the mistake computes it: D = rowsum(dA) without the weights, D = rowsum(dO) without
// O, or the whole backward along the columns; otherwise the identity, D = rowsum(dA ⊙ A).
//                                                             A, dA (B, h, n, m), dO_h (B, h, n, d_v)
template <class T>
Tensor<T> softmax_backward(const Tensor<T>& A, const Tensor<T>& dA, const Tensor<T>& dO_h, Mistake v) {
  const std::size_t m = A.shape().back(), row_count = m > 0 ? A.size() / m : 0, d_v = dO_h.shape().back();
  if (v == Mistake::softmax_d_from_da) {
    // D[r] = Σ_j dA[r][j], without the weights
    std::vector<T> D(row_count, T{0});
    for (std::size_t r = 0; r < row_count; ++r)
      for (std::size_t j = 0; j < m; ++j) D[r] += dA.values()[r * m + j];
    return softmax_backward_with(A, dA, D);
  }
  if (v == Mistake::softmax_d_from_do) {
    // D[r] = Σ_e dO[r][e], without O
    std::vector<T> D(row_count, T{0});
    for (std::size_t r = 0; r < row_count; ++r)
      for (std::size_t e = 0; e < d_v; ++e) D[r] += dO_h.values()[r * d_v + e];
    return softmax_backward_with(A, dA, D);
  }
  if (v == Mistake::softmax_backward_columns)
    return swap_last_axes(d_softmax_rows(swap_last_axes(A), swap_last_axes(dA)));
  return d_softmax_rows(A, dA);
}

// What backward mistake `v` sends back from step `s` in place of its row's backward (engine/rows.hpp); false
// where it leaves the row as it is. dy is the step's gradient, x the forward's values, d what has been sent.
template <class T>
bool mistaken_send(Step s, const Tensor<T>& dy, const ForwardValues<T>& x, const RowContext<T>& c, Mistake v,
                   Gradients<T>& d) {
  const Problem& p = c.p;
  // the weighted sum: dV with A untransposed, or from one query head of each group
  const auto weighted_sum = [&] {
    const Tensor<T>& A = x[slot(rows::weights_read(p))];
    rows::send(d, rows::weights_read(p), d_weighted_sum_weights(dy, x[slot(Step::v_heads)]));
    rows::send(d, Step::v_heads, key_head_gradient(v == Mistake::dv_untransposed ? swap_last_axes(A) : A, dy, p.g, v));
    return true;
  };
  // the softmax's backward with D of another sum, or along the columns
  const auto softmax = [&] {
    const Tensor<T>& A = x[slot(Step::weights)];
    if (!p.sinks.empty()) d[slot(Step::d_sinks)] = d_sinks(A, dy, x[slot(Step::sink_weights)]);
    rows::send(d, Step::masked, softmax_backward(A, dy, d[slot(Step::head_outputs)], v));
    return true;
  };
  // dS transposed where it must not be, or not where it must; dK from one query head of each group
  const auto scores = [&] {
    const Tensor<T>& Q = x[slot(rows::queries_read(p))];
    const Tensor<T>& K = x[slot(rows::keys_read(p))];
    rows::send(d, rows::queries_read(p), d_scores_queries(v == Mistake::dq_transposed ? swap_last_axes(dy) : dy, K));
    rows::send(d, rows::keys_read(p),
               key_head_gradient(v == Mistake::dk_untransposed ? swap_last_axes(dy) : dy, Q, p.g, v));
    return true;
  };
  // The switch is over the mistakes, so that a new one is named here by the compiler and a new step needs
  // nothing.
  switch (v) {
    case Mistake::gqa_first_head:
    case Mistake::gqa_last_head:
      if (s == Step::head_outputs) return weighted_sum();
      if (s == Step::scores) return scores();
      break;
    case Mistake::dv_untransposed:
      if (s == Step::head_outputs) return weighted_sum();
      break;
    case Mistake::softmax_d_from_da:
    case Mistake::softmax_d_from_do:
    case Mistake::softmax_backward_columns:
      if (s == Step::weights) return softmax();
      break;
    // the scale left out of dS
    case Mistake::backward_no_scale:
      if (s != Step::scaled) break;
      rows::send(d, Step::scores, Tensor<T>(dy));
      return true;
    case Mistake::dq_transposed:
    case Mistake::dk_untransposed:
      if (s == Step::scores) return scores();
      break;
    // nothing mistaken, or a mistake of the forward pass (lessons/mistaken_forward.cpp)
    case Mistake::none:
    case Mistake::no_scale:
    case Mistake::no_mask:
    case Mistake::mask_after_softmax:
    case Mistake::softmax_columns:
    case Mistake::shared_qkv:
    case Mistake::wrong_reshape:
    case Mistake::minus_1e9:
    case Mistake::dropout_unscaled:
    case Mistake::scale_twice:
    case Mistake::k_untransposed:
    case Mistake::w_q_transposed:
    case Mistake::w_k_transposed:
    case Mistake::w_v_transposed:
    case Mistake::w_o_transposed:
    case Mistake::mask_sees_next:
    case Mistake::mask_misses_diagonal:
    case Mistake::align_flipped: break;
  }
  return false;
}

// The rows of engine/rows.hpp walked back from dY, each gradient stored rounded to the storage, with
// backward mistake `v` made in place of the rows it changes; where `given` holds a gradient, the
// gradients after it start from that value.
template <class T>
BackwardRun<T> run_backward(const Problem& p, const StepValues<T>& f, Mistake v, DType storage,
                            const GivenSteps& given) {
  const Inputs<T> in(p, storage);
  const RowContext<T> c{p, in};
  BackwardRun<T> out;
  const auto send = [&](Step s, const Tensor<T>& dy, const ForwardValues<T>& x, Gradients<T>& d) {
    if (!mistaken_send(s, dy, x, c, v, d)) row_of<T>(s).backward(dy, x, c, d);
  };
  const auto keep = [&](Step g, Tensor<T> computed) {
    round_stored(computed, storage);
    out.computed[slot(g)] = std::move(computed);
    out.carry[slot(g)] = given[slot(g)] ? cast<T>(*given[slot(g)]) : out.computed[slot(g)];
    return out.carry[slot(g)];
  };
  Gradients<T> d;
  d[slot(Step::output)] = upstream_gradient<T>(p, storage);  // dY (B, n, d_out)
  walk_backward<T>(p, f, d, send, keep);
  return out;
}

}  // namespace

template <class T>
BackwardRun<T> backward(const Problem& p, const StepValues<T>& forward, Mistake mistake, DType storage,
                        const GivenSteps& given) {
  return run_backward<T>(p, forward, mistake, storage, given);
}

template BackwardRun<float> backward<float>(const Problem&, const StepValues<float>&, Mistake, DType,
                                            const GivenSteps&);
template BackwardRun<double> backward<double>(const Problem&, const StepValues<double>&, Mistake, DType,
                                              const GivenSteps&);

}  // namespace attn
