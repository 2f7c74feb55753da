#pragma once
// The error terms of the rows of engine/rows.hpp (include that one): for each step what its values sum
// and how many terms its longest sum has (`terms`), and its backward on magnitudes (`d_terms`).

#include <cmath>
#include <cstddef>
#include <vector>

#include "engine/row_math.hpp"
#include "ops/bounds.hpp"

namespace attn {

namespace rows {
// ---- the error terms: what each step sums, forward (x_terms) and backward (d_x_terms, on magnitudes)
//
// Forward, from the exact values before the step: a projection sums d_in products and its bias, a dot
// product d_k, the weighted sum m; a scale or a dropout is one product, the cap three roundings (s/c, tanh,
// the product by c; its slope is at most 1), ALiBi's sum two, the softmax m terms (and the sink's); a
// relayout or the mask sums nothing. Backward, the same formulas as the rows' backward on magnitudes,
// except where a bound is simpler than the formula: the cap's slope and the mask pass the size on
// unchanged (at most 1, or 0 where the weight is 0 anyway), dropout's keep mask is bounded by its largest
// factor 1/(1 − p), and the softmax's D by Σ|dO|·|O|.

inline Terms as_summed(const Tensor<double>& own, double count) { return {magnitude(own), count}; }

// |In|·|W| + |b| over d_in + 1 terms (compare's projection_error scales it by the rounding)
inline Terms projected_terms(const Tensor<double>& In, const Tensor<double>& W, std::span<const double> b) {
  std::vector<double> b_abs(b.begin(), b.end());
  for (double& x : b_abs) x = std::fabs(x);
  return {project(magnitude(In), magnitude(W), std::span<const double>(b_abs)), static_cast<double>(W.dim(0) + 1)};
}
inline Terms q_terms(ExactValues, const Tensor<double>&, const Problem& p) {
  return projected_terms(p.X, p.W_q, p.b_q);
}
inline Terms k_terms(ExactValues, const Tensor<double>&, const Problem& p) {
  return projected_terms(p.C, p.W_k, p.b_k);
}
inline Terms v_terms(ExactValues, const Tensor<double>&, const Problem& p) {
  return projected_terms(p.C, p.W_v, p.b_v);
}
// Y = In·W + b on magnitudes: |dY|·|W|ᵀ to In, |In|ᵀ·|dY| to W, Σ|dY| to b
inline void projected_terms_back(const Tensor<double>& dY, const Tensor<double>& In, const Tensor<double>& W, bool bias,
                                 Step input, Step weight, Step b, const Problem& p, Gradients<double>& d) {
  projected_back(dY, magnitude(In), magnitude(W), bias, input, weight, b, p, d);
}
inline void d_q_terms(const Tensor<double>& dQ, const ForwardValues<double>&, const RowContext<double>& c,
                      Gradients<double>& d) {
  projected_terms_back(dQ, c.in.X, c.in.W_q, !c.p.b_q.empty(), Step::d_X, Step::d_W_q, Step::d_b_q, c.p, d);
}
inline void d_k_terms(const Tensor<double>& dK, const ForwardValues<double>&, const RowContext<double>& c,
                      Gradients<double>& d) {
  projected_terms_back(dK, c.in.C, c.in.W_k, !c.p.b_k.empty(), c.p.cross ? Step::d_context : Step::d_X, Step::d_W_k,
                       Step::d_b_k, c.p, d);
}
inline void d_v_terms(const Tensor<double>& dV, const ForwardValues<double>&, const RowContext<double>& c,
                      Gradients<double>& d) {
  projected_terms_back(dV, c.in.C, c.in.W_v, !c.p.b_v.empty(), c.p.cross ? Step::d_context : Step::d_X, Step::d_W_v,
                       Step::d_b_v, c.p, d);
}

// a relayout (the heads split or merged) or the mask: nothing summed. A relayout's backward carries the
// sizes as it carries the gradients, so its row's backward serves as its d_terms.
inline Terms nothing_summed(ExactValues, const Tensor<double>& own, const Problem&) { return as_summed(own, 0); }

// RoPE: two products and one sum per feature, |x_a|·|c| + |x_b|·|s|; back the same way
inline Terms q_rot_terms(ExactValues x, const Tensor<double>&, const Problem& p) {
  const Rope& r = *p.rope;
  return {rotation_magnitude(magnitude(x[slot(Step::q_heads)]), r.cos_q, r.sin_q, r.style), 2};
}
inline Terms k_rot_terms(ExactValues x, const Tensor<double>&, const Problem& p) {
  const Rope& r = *p.rope;
  return {rotation_magnitude(magnitude(x[slot(Step::k_heads)]), r.cos_k, r.sin_k, r.style), 2};
}
inline void d_q_rot_terms(const Tensor<double>& dy, const ForwardValues<double>&, const RowContext<double>& c,
                          Gradients<double>& d) {
  const Rope& r = *c.p.rope;
  send(d, Step::q_heads, rotation_magnitude(dy, r.cos_q, r.sin_q, r.style));
}
inline void d_k_rot_terms(const Tensor<double>& dy, const ForwardValues<double>&, const RowContext<double>& c,
                          Gradients<double>& d) {
  const Rope& r = *c.p.rope;
  send(d, Step::k_heads, rotation_magnitude(dy, r.cos_k, r.sin_k, r.style));
}

// |Q|·|K|ᵀ over d_k terms; back, |dS|·|K| and |dS|ᵀ·|Q|
inline Terms scores_terms(ExactValues x, const Tensor<double>&, const Problem& p) {
  return {scores(magnitude(x[slot(queries_read(p))]), magnitude(x[slot(keys_read(p))])), static_cast<double>(p.d_k)};
}

// a stage of the score chain: its terms and their count, and its backward on magnitudes, the chain's own
// (model/score_chain.hpp)
template <Stage S>
Terms stage_terms(ExactValues x, const Tensor<double>& own, const Problem& p) {
  const ScoreChain<double> chain(p, DType::float64);
  const Tensor<double>& in = x[slot(stage_reads(S, p))];
  Tensor<double> of(own.shape());
  each_score(own, [&](const Where& w, std::size_t k) {
    of.values()[k] = chain.terms(S, w, in.empty() ? 0.0 : in.values()[k], own.values()[k]);
  });
  return {std::move(of), stage_info(S).roundings};
}
template <Stage S>
void stage_d_terms(const Tensor<double>& dy, const ForwardValues<double>&, const RowContext<double>& c,
                   Gradients<double>& d) {
  Tensor<double> dx(dy.shape());
  each_score(dy, [&](const Where& w, std::size_t k) { dx.values()[k] = c.in.chain.d_terms(S, w, dy.values()[k]); });
  send(d, stage_reads(S, c.p), std::move(dx));
}

// the softmax: m terms in each row's sum (and the sink's)
inline Terms weights_terms(ExactValues, const Tensor<double>& own, const Problem& p) {
  return as_summed(own, static_cast<double>(p.m + (p.sinks.empty() ? 0 : 1)));
}
// dS'' = A ⊙ (dA − D): A ⊙ (|dA| + |D|), with |D| bounded by Σ|dO|·|O| (the gradient of the head outputs
// and their values, both here by then); a sink's, Σ_rows share · Σ_j A·|dA|
inline void d_weights_terms(const Tensor<double>& dA, const ForwardValues<double>& x, const RowContext<double>& c,
                            Gradients<double>& d) {
  const Problem& p = c.p;
  const Tensor<double>& A = x[slot(Step::weights)];
  const Tensor<double>& O_h = x[slot(Step::head_outputs)];
  const Tensor<double>& dO_h = d[slot(Step::head_outputs)];
  const Tensor<double>& share = x[slot(Step::sink_weights)];
  Tensor<double> dS = dA;
  Tensor<double> d_sinks({p.h}, 0.0);
  const std::size_t m = p.m, d_v = p.d_v;
  for (std::size_t r = 0; m > 0 && r < dS.size() / m; ++r) {
    double D = 0;
    for (std::size_t e = 0; e < d_v; ++e) D += dO_h.values()[r * d_v + e] * O_h.values()[r * d_v + e];
    double row = 0;
    for (std::size_t j = 0; j < m; ++j) {
      const double a = A.values()[r * m + j], dP = dA.values()[r * m + j];
      row += a * dP;
      dS.values()[r * m + j] = a * (dP + D);
    }
    if (!p.sinks.empty()) d_sinks((r / p.n) % p.h) += share.values()[r] * row;  // r runs over (b, head, query)
  }
  if (!p.sinks.empty()) send(d, Step::d_sinks, std::move(d_sinks));
  send(d, Step::masked, std::move(dS));
}
// the shares' own backward on magnitudes: |dy|·share·A to the scores, |dy|·share·(1 − share) to the sinks
inline void d_sink_weights_terms(const Tensor<double>& dy, const ForwardValues<double>& x, const RowContext<double>&,
                                 Gradients<double>& d) {
  const Tensor<double>& share = x[slot(Step::sink_weights)];
  send(d, Step::masked, magnitude(d_sink_share_scores(dy, share, x[slot(Step::weights)])));
  send(d, Step::d_sinks, d_sink_share_sinks(dy, share));
}

// 1/(1 − p), the largest factor dropout multiplies a weight by (1 without dropout)
inline double keep_factor(const Problem& p) { return p.dropout ? 1 / (1 - p.dropout->p) : 1; }

// |A|·|V| over m terms; back, |dO|·|V|ᵀ to the weights read and (A/(1 − p))ᵀ·|dO| to V
inline Terms head_outputs_terms(ExactValues x, const Tensor<double>&, const Problem& p) {
  return {weighted_sum(magnitude(x[slot(weights_read(p))]), magnitude(x[slot(Step::v_heads)])),
          static_cast<double>(p.m)};
}
inline void d_head_outputs_terms(const Tensor<double>& dO, const ForwardValues<double>& x, const RowContext<double>& c,
                                 Gradients<double>& d) {
  send(d, Step::v_heads, d_weighted_sum_values(scale(x[slot(Step::weights)], keep_factor(c.p)), dO, c.p.g));
  send(d, weights_read(c.p), d_weighted_sum_weights(dO, x[slot(Step::v_heads)]));
}

inline Terms output_terms(ExactValues x, const Tensor<double>& own, const Problem& p) {
  if (!p.has_output_projection()) return as_summed(own, 0);
  return projected_terms(x[slot(Step::concat)], p.W_o, p.b_o);
}
inline void d_output_terms(const Tensor<double>& dY, const ForwardValues<double>& x, const RowContext<double>& c,
                           Gradients<double>& d) {
  const Problem& p = c.p;
  if (!p.has_output_projection()) return send(d, Step::concat, Tensor<double>(dY));
  send(d, Step::concat, d_project_input(dY, magnitude(c.in.W_o)));
  d[slot(Step::d_W_o)] = in_file_layout(p, d_project_weight(x[slot(Step::concat)], dY));
  if (!p.b_o.empty()) d[slot(Step::d_b_o)] = d_project_bias(dY);
}

}  // namespace rows

}  // namespace attn
