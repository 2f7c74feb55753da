#pragma once
// The math of every forward step, one row each, beside the step table (observe/steps.hpp) that says what
// each step is: `forward`, the op that computes the step from the steps before it, `backward`, the op
// that sends the step's gradient back to what it read, and the error terms of both: `terms`, the size of
// what each value of the step sums and how many terms its longest sum has, and `d_terms`, its backward
// on magnitudes (|dy| through |inputs|), which sends on the size of what each gradient sums. Rounding
// moves a value by at most (count + 2)·u times its terms: compare's noise floor and diff's judge read
// them (gradient_magnitudes below). The plain passes walk these rows (walk_forward, walk_backward below);
// the mistakes of lessons/catalogue.hpp are overrides of a row's op; flash and the fast path stay
// hand-fused and are checked against the rows. tests/unit/rows_test.cpp runs every row against an
// independent formula, its backward against central differences of its forward, and both error terms
// against the rounding of a float32 run.
//
// A forward step S has its gradient ∂L/∂S in the gradient step named d_S (d_scores for scores) where the
// table has one; `bias` (ALiBi's, a plain sum) passes its gradient on unchanged and `sink_weights` (read by
// nothing after it) has none. The leaves, X, the context and the parameters, have theirs in d_X …
// d_sinks. Values are kept by slot: a forward step's value in its own (ForwardValues), and in a pass of
// gradients (Gradients) ∂L/∂S in the slot of S, a leaf's in the slot of its gradient step (d_X …).

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/common.hpp"
#include "observe/steps.hpp"
#include "ops/attention.hpp"
#include "ops/attention_backward.hpp"
#include "ops/bounds.hpp"
#include "ops/dropout.hpp"

namespace attn {

template <class T>
using ForwardValues = std::array<Tensor<T>, step_count>;
template <class T>
using Gradients = std::array<Tensor<T>, table_size>;

constexpr std::size_t slot(Step s) { return static_cast<std::size_t>(s); }

// What a row reads besides the steps: the problem and its inputs in T (rounded to the run's storage).
template <class T>
struct RowContext {
  const Problem& p;
  const Inputs<T>& in;
};

// The step a row computes from the values of the steps before it (x: each step's value by slot).
template <class T>
using RowForward = Tensor<T> (*)(const ForwardValues<T>& x, const RowContext<T>& c);
// Adds to d, by slot, what the step's gradient dy sends back to each input it read (a step's, or a
// leaf's: X, the context, a parameter), given the forward values x.
template <class T>
using RowBackward = void (*)(const Tensor<T>& dy, const ForwardValues<T>& x, const RowContext<T>& c, Gradients<T>& d);

// What rounding scales with at one step: the size of what each value sums (Σ|terms| of its sum), element
// by element, and how many terms its longest sum has.
struct Terms {
  Tensor<double> of;
  double count = 0;
};
// The forward values a row's terms read, by slot (the first step_count slots of a table of steps).
using ExactValues = std::span<const Tensor<double>, step_count>;
// A step's terms, from the exact values x of the steps before it and its own value.
using RowTerms = Terms (*)(ExactValues x, const Tensor<double>& own, const RowContext<double>& c);

template <class T>
struct RowMath {
  Step step;
  RowForward<T> forward;
  RowBackward<T> backward;
  RowTerms terms;
  // the backward on magnitudes: x holds |each step|, dy the size of the step's gradient's terms
  RowBackward<double> d_terms;
};

// The gradient step that holds ∂L/∂step (d_scores for scores), or none (bias, sink_weights; a gradient).
inline std::optional<Step> gradient_of(Step step) {
  if (is_gradient_step(step)) return std::nullopt;
  return step_from_name(std::string("d_") + std::string(step_info(step).name));
}

namespace rows {

// d[s] += g (or d[s] = g, when nothing was sent there yet): the paths into one value add up.
template <class T>
void send(Gradients<T>& d, Step s, Tensor<T> g) {
  Tensor<T>& into = d[slot(s)];
  if (into.empty()) into = std::move(g);
  else into = add(g, into);  // the later path first: dQ + (dK + dV), the order the sum was written in
}

// The step a step reads in place of an optional one (q_rot for q_heads with RoPE; the last of scaled,
// capped, bias before the mask; dropped for the weights with dropout).
inline Step queries_read(const Problem& p) { return p.rope ? Step::q_rot : Step::q_heads; }
inline Step keys_read(const Problem& p) { return p.rope ? Step::k_rot : Step::k_heads; }
inline Step before_mask(const Problem& p) { return p.alibi ? Step::bias : p.softcap ? Step::capped : Step::scaled; }
inline Step before_bias(const Problem& p) { return p.softcap ? Step::capped : Step::scaled; }
inline Step weights_read(const Problem& p) { return p.dropout ? Step::dropped : Step::weights; }

// A weight's gradient in the input file's layout: in × out, or out × in (PyTorch's).
template <class T>
Tensor<T> in_file_layout(const Problem& p, Tensor<T> dW) {
  return p.layout == Layout::out_in ? transposed(dW) : dW;
}

// ---- the projections: Y = X·W + b

// Q = X·W_q + b_q                                                    -> (B, n, h·d_k)
template <class T>
Tensor<T> q(const ForwardValues<T>&, const RowContext<T>& c) {
  return project(c.in.X, c.in.W_q, std::span<const T>(c.in.b_q));
}
// K = C·W_k + b_k (C = X in self-attention)                          -> (B, m, g·d_k)
template <class T>
Tensor<T> k(const ForwardValues<T>&, const RowContext<T>& c) {
  return project(c.in.C, c.in.W_k, std::span<const T>(c.in.b_k));
}
// V = C·W_v + b_v                                                    -> (B, m, g·d_v)
template <class T>
Tensor<T> v(const ForwardValues<T>&, const RowContext<T>& c) {
  return project(c.in.C, c.in.W_v, std::span<const T>(c.in.b_v));
}

// Y = In·W + b, back to In (into `input`, X's or the context's), W and b.
template <class T>
void projected_back(const Tensor<T>& dY, const Tensor<T>& In, const Tensor<T>& W, bool bias, Step input, Step weight,
                    Step b, const Problem& p, Gradients<T>& d) {
  send(d, input, d_project_input(dY, W));
  d[slot(weight)] = in_file_layout(p, d_project_weight(In, dY));
  if (bias) d[slot(b)] = d_project_bias(dY);
}
template <class T>
void d_q(const Tensor<T>& dQ, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  projected_back(dQ, c.in.X, c.in.W_q, !c.p.b_q.empty(), Step::d_X, Step::d_W_q, Step::d_b_q, c.p, d);
}
// The context's gradient is X's in self-attention: X is the keys' and values' input there too.
template <class T>
void d_k(const Tensor<T>& dK, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  projected_back(dK, c.in.C, c.in.W_k, !c.p.b_k.empty(), c.p.cross ? Step::d_context : Step::d_X, Step::d_W_k,
                 Step::d_b_k, c.p, d);
}
template <class T>
void d_v(const Tensor<T>& dV, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  projected_back(dV, c.in.C, c.in.W_v, !c.p.b_v.empty(), c.p.cross ? Step::d_context : Step::d_X, Step::d_W_v,
                 Step::d_b_v, c.p, d);
}

// ---- the heads: a relayout, whose backward is the inverse relayout

template <class T>
Tensor<T> q_heads(const ForwardValues<T>& x, const RowContext<T>& c) {
  return split_heads(x[slot(Step::q)], c.p.h);
}
template <class T>
Tensor<T> k_heads(const ForwardValues<T>& x, const RowContext<T>& c) {
  return split_heads(x[slot(Step::k)], c.p.g);
}
template <class T>
Tensor<T> v_heads(const ForwardValues<T>& x, const RowContext<T>& c) {
  return split_heads(x[slot(Step::v)], c.p.g);
}
template <class T>
void d_q_heads(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>&, Gradients<T>& d) {
  send(d, Step::q, merge_heads(dy));
}
template <class T>
void d_k_heads(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>&, Gradients<T>& d) {
  send(d, Step::k, merge_heads(dy));
}
template <class T>
void d_v_heads(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>&, Gradients<T>& d) {
  send(d, Step::v, merge_heads(dy));
}

// ---- RoPE: an orthogonal turn, whose backward is its transpose

template <class T>
Tensor<T> q_rot(const ForwardValues<T>& x, const RowContext<T>& c) {
  return rotate(x[slot(Step::q_heads)], c.in.cos_q, c.in.sin_q, c.p.rope->style);
}
template <class T>
Tensor<T> k_rot(const ForwardValues<T>& x, const RowContext<T>& c) {
  return rotate(x[slot(Step::k_heads)], c.in.cos_k, c.in.sin_k, c.p.rope->style);
}
template <class T>
void d_q_rot(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  send(d, Step::q_heads, d_rotate(dy, c.in.cos_q, c.in.sin_q, c.p.rope->style));
}
template <class T>
void d_k_rot(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  send(d, Step::k_heads, d_rotate(dy, c.in.cos_k, c.in.sin_k, c.p.rope->style));
}

// ---- the scores

// S = Q·Kᵀ per head                                                  -> (B, h, n, m)
template <class T>
Tensor<T> scores_row(const ForwardValues<T>& x, const RowContext<T>& c) {
  return scores(x[slot(queries_read(c.p))], x[slot(keys_read(c.p))]);
}
// dQ = dS·K, dK = dSᵀ·Q summed over the query heads that share the key head
template <class T>
void d_scores_row(const Tensor<T>& dS, const ForwardValues<T>& x, const RowContext<T>& c, Gradients<T>& d) {
  send(d, queries_read(c.p), d_scores_queries(dS, x[slot(keys_read(c.p))]));
  send(d, keys_read(c.p), d_scores_keys(dS, x[slot(queries_read(c.p))], c.p.g));
}

// S' = S·scale
template <class T>
Tensor<T> scaled(const ForwardValues<T>& x, const RowContext<T>& c) {
  return scale(x[slot(Step::scores)], static_cast<T>(c.p.scale));
}
template <class T>
void d_scaled(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  send(d, Step::scores, scale(dy, static_cast<T>(c.p.scale)));
}

// S_c = c·tanh(S'/c)
template <class T>
Tensor<T> capped(const ForwardValues<T>& x, const RowContext<T>& c) {
  return softcap(x[slot(Step::scaled)], static_cast<T>(*c.p.softcap));
}
// dS' = dS_c ⊙ (1 − (S_c/c)²): the cap's slope, from its own output
template <class T>
void d_capped(const Tensor<T>& dy, const ForwardValues<T>& x, const RowContext<T>& c, Gradients<T>& d) {
  send(d, Step::scaled, d_softcap(dy, x[slot(Step::capped)], static_cast<T>(*c.p.softcap)));
}

// S'' = S' + ALiBi's bias: a constant added, so the gradient passes through unchanged
template <class T>
Tensor<T> bias(const ForwardValues<T>& x, const RowContext<T>& c) {
  return add_alibi(x[slot(before_bias(c.p))], std::span<const T>(c.in.slopes), std::span<const T>(c.in.pos_q),
                   std::span<const T>(c.in.pos_k));
}
template <class T>
void d_bias(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  send(d, before_bias(c.p), Tensor<T>(dy));
}

// −∞ where the mask forbids a key; nothing flows back through a forbidden score
template <class T>
Tensor<T> masked(const ForwardValues<T>& x, const RowContext<T>& c) {
  const Problem& p = c.p;
  return apply_mask(x[slot(before_mask(p))],
                    [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); });
}
template <class T>
void d_masked(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  const Problem& p = c.p;
  send(d, before_mask(p),
       d_apply_mask(dy, [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); }));
}

// ---- the softmax, with the sinks' logits in its rows when the input has them

template <class T>
Tensor<T> weights(const ForwardValues<T>& x, const RowContext<T>& c) {
  if (c.p.sinks.empty()) return softmax_rows(x[slot(Step::masked)]);
  Tensor<T> share;
  return softmax_rows_with_sinks(x[slot(Step::masked)], std::span<const T>(c.in.sinks), share);
}
// The sinks' shares of each row: the same softmax, its other result   -> (B, h, n)
template <class T>
Tensor<T> sink_weights(const ForwardValues<T>& x, const RowContext<T>& c) {
  Tensor<T> share;
  (void)softmax_rows_with_sinks(x[slot(Step::masked)], std::span<const T>(c.in.sinks), share);
  return share;
}
// dS'' = A ⊙ (dA − D), D = rowsum(dA ⊙ A); with sinks, the sinks' logits get −Σ a_sink·D
template <class T>
void d_weights(const Tensor<T>& dA, const ForwardValues<T>& x, const RowContext<T>& c, Gradients<T>& d) {
  const Tensor<T>& A = x[slot(Step::weights)];
  if (!c.p.sinks.empty()) send(d, Step::d_sinks, d_sinks(A, dA, x[slot(Step::sink_weights)]));
  send(d, Step::masked, d_softmax_rows(A, dA));
}
// the shares' own backward, to the scores and the sinks (a backward pass sends nothing this way: nothing
// after the shares reads them)
template <class T>
void d_sink_weights(const Tensor<T>& dy, const ForwardValues<T>& x, const RowContext<T>&, Gradients<T>& d) {
  const Tensor<T>& share = x[slot(Step::sink_weights)];
  send(d, Step::masked, d_sink_share_scores(dy, share, x[slot(Step::weights)]));
  send(d, Step::d_sinks, d_sink_share_sinks(dy, share));
}

// A_drop = A ⊙ Z/(1 − p), the keep mask Z drawn from the seed: the gradient goes back through the same mask
template <class T>
Tensor<T> dropped(const ForwardValues<T>& x, const RowContext<T>& c) {
  return apply_dropout(x[slot(Step::weights)], DropoutMask(*c.p.dropout));
}
template <class T>
void d_dropped(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  send(d, Step::weights, apply_dropout(dy, DropoutMask(*c.p.dropout)));
}

// ---- the weighted sum, the heads merged, the output projection

// O_h = A·V per head                                                  -> (B, h, n, d_v)
template <class T>
Tensor<T> head_outputs(const ForwardValues<T>& x, const RowContext<T>& c) {
  return weighted_sum(x[slot(weights_read(c.p))], x[slot(Step::v_heads)]);
}
// dA = dO·Vᵀ, dV = Aᵀ·dO summed over the query heads that share the value head
template <class T>
void d_head_outputs(const Tensor<T>& dO, const ForwardValues<T>& x, const RowContext<T>& c, Gradients<T>& d) {
  send(d, weights_read(c.p), d_weighted_sum_weights(dO, x[slot(Step::v_heads)]));
  send(d, Step::v_heads, d_weighted_sum_values(x[slot(weights_read(c.p))], dO, c.p.g));
}

template <class T>
Tensor<T> concat(const ForwardValues<T>& x, const RowContext<T>&) {
  return merge_heads(x[slot(Step::head_outputs)]);
}
template <class T>
void d_concat(const Tensor<T>& dy, const ForwardValues<T>&, const RowContext<T>& c, Gradients<T>& d) {
  send(d, Step::head_outputs, split_heads(dy, c.p.h));
}

// Y = O·W_o + b_o, or O itself without W_o
template <class T>
Tensor<T> output(const ForwardValues<T>& x, const RowContext<T>& c) {
  const Tensor<T>& O = x[slot(Step::concat)];
  if (!c.p.has_output_projection()) return O;
  return project(O, c.in.W_o, std::span<const T>(c.in.b_o));
}
template <class T>
void d_output(const Tensor<T>& dY, const ForwardValues<T>& x, const RowContext<T>& c, Gradients<T>& d) {
  const Problem& p = c.p;
  if (!p.has_output_projection()) return send(d, Step::concat, Tensor<T>(dY));
  send(d, Step::concat, d_project_input(dY, c.in.W_o));
  d[slot(Step::d_W_o)] = in_file_layout(p, d_project_weight(x[slot(Step::concat)], dY));
  if (!p.b_o.empty()) d[slot(Step::d_b_o)] = d_project_bias(dY);
}

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

// |In|·|W| + |b| over d_in + 1 terms
inline Terms projected_terms(const Tensor<double>& In, const Tensor<double>& W, const std::vector<double>& b) {
  std::vector<double> b_abs(b);
  for (double& x : b_abs) x = std::fabs(x);
  return {project(magnitude(In), magnitude(W), std::span<const double>(b_abs)), static_cast<double>(W.dim(0) + 1)};
}
inline Terms q_terms(ExactValues, const Tensor<double>&, const RowContext<double>& c) {
  return projected_terms(c.in.X, c.in.W_q, c.in.b_q);
}
inline Terms k_terms(ExactValues, const Tensor<double>&, const RowContext<double>& c) {
  return projected_terms(c.in.C, c.in.W_k, c.in.b_k);
}
inline Terms v_terms(ExactValues, const Tensor<double>&, const RowContext<double>& c) {
  return projected_terms(c.in.C, c.in.W_v, c.in.b_v);
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

// the heads: nothing summed; the relayout's backward carries the sizes as it carries the gradients
inline Terms relayout_terms(ExactValues, const Tensor<double>& own, const RowContext<double>&) {
  return as_summed(own, 0);
}
inline Terms q_heads_terms(ExactValues x, const Tensor<double>& own, const RowContext<double>& c) {
  return relayout_terms(x, own, c);
}
inline Terms k_heads_terms(ExactValues x, const Tensor<double>& own, const RowContext<double>& c) {
  return relayout_terms(x, own, c);
}
inline Terms v_heads_terms(ExactValues x, const Tensor<double>& own, const RowContext<double>& c) {
  return relayout_terms(x, own, c);
}
constexpr RowBackward<double> d_q_heads_terms = d_q_heads<double>;
constexpr RowBackward<double> d_k_heads_terms = d_k_heads<double>;
constexpr RowBackward<double> d_v_heads_terms = d_v_heads<double>;

// RoPE: two products and one sum per feature, |x_a|·|c| + |x_b|·|s|; back the same way
inline Terms q_rot_terms(ExactValues x, const Tensor<double>&, const RowContext<double>& c) {
  const Rope& r = *c.p.rope;
  return {rotation_magnitude(magnitude(x[slot(Step::q_heads)]), r.cos_q, r.sin_q, r.style), 2};
}
inline Terms k_rot_terms(ExactValues x, const Tensor<double>&, const RowContext<double>& c) {
  const Rope& r = *c.p.rope;
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
inline Terms scores_terms(ExactValues x, const Tensor<double>&, const RowContext<double>& c) {
  return {scores(magnitude(x[slot(queries_read(c.p))]), magnitude(x[slot(keys_read(c.p))])),
          static_cast<double>(c.p.d_k)};
}
constexpr RowBackward<double> d_scores_terms = d_scores_row<double>;

inline Terms scaled_terms(ExactValues, const Tensor<double>& own, const RowContext<double>&) {
  return as_summed(own, 1);
}
inline void d_scaled_terms(const Tensor<double>& dy, const ForwardValues<double>&, const RowContext<double>& c,
                           Gradients<double>& d) {
  send(d, Step::scores, scale(dy, std::fabs(c.p.scale)));
}

inline Terms capped_terms(ExactValues, const Tensor<double>& own, const RowContext<double>&) {
  return as_summed(own, 3);
}
inline void d_capped_terms(const Tensor<double>& dy, const ForwardValues<double>&, const RowContext<double>&,
                           Gradients<double>& d) {
  send(d, Step::scaled, Tensor<double>(dy));
}

// S' + b: |S'| + |b| over two terms (the product of the bias and the sum)
inline Terms bias_terms(ExactValues x, const Tensor<double>&, const RowContext<double>& c) {
  const Problem& p = c.p;
  Tensor<double> of = magnitude(x[slot(before_bias(p))]);
  for (std::size_t b = 0; b < of.dim(0); ++b)
    for (std::size_t hd = 0; hd < of.dim(1); ++hd)
      for (std::size_t i = 0; i < of.dim(2); ++i)
        for (std::size_t j = 0; j < of.dim(3); ++j)
          of(b, hd, i, j) +=
              std::fabs(alibi_bias(p.alibi->slopes[hd], p.alibi->query_positions[i], p.alibi->key_positions[j]));
  return {std::move(of), 2};
}
constexpr RowBackward<double> d_bias_terms = d_bias<double>;

inline Terms masked_terms(ExactValues x, const Tensor<double>& own, const RowContext<double>& c) {
  return relayout_terms(x, own, c);
}
inline void d_masked_terms(const Tensor<double>& dy, const ForwardValues<double>&, const RowContext<double>& c,
                           Gradients<double>& d) {
  send(d, before_mask(c.p), Tensor<double>(dy));
}

// the softmax: m terms in each row's sum (and the sink's)
inline Terms weights_terms(ExactValues, const Tensor<double>& own, const RowContext<double>& c) {
  return as_summed(own, static_cast<double>(c.p.m + (c.p.sinks.empty() ? 0 : 1)));
}
inline Terms sink_weights_terms(ExactValues x, const Tensor<double>& own, const RowContext<double>& c) {
  return weights_terms(x, own, c);
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
inline Terms dropped_terms(ExactValues, const Tensor<double>& own, const RowContext<double>&) {
  return as_summed(own, 1);  // one product by 1/(1 − p), or 0
}
inline void d_dropped_terms(const Tensor<double>& dy, const ForwardValues<double>&, const RowContext<double>& c,
                            Gradients<double>& d) {
  send(d, Step::weights, scale(dy, keep_factor(c.p)));
}

// |A|·|V| over m terms; back, |dO|·|V|ᵀ to the weights read and (A/(1 − p))ᵀ·|dO| to V
inline Terms head_outputs_terms(ExactValues x, const Tensor<double>&, const RowContext<double>& c) {
  return {weighted_sum(magnitude(x[slot(weights_read(c.p))]), magnitude(x[slot(Step::v_heads)])),
          static_cast<double>(c.p.m)};
}
inline void d_head_outputs_terms(const Tensor<double>& dO, const ForwardValues<double>& x, const RowContext<double>& c,
                                 Gradients<double>& d) {
  send(d, Step::v_heads, d_weighted_sum_values(scale(x[slot(Step::weights)], keep_factor(c.p)), dO, c.p.g));
  send(d, weights_read(c.p), d_weighted_sum_weights(dO, x[slot(Step::v_heads)]));
}

inline Terms concat_terms(ExactValues x, const Tensor<double>& own, const RowContext<double>& c) {
  return relayout_terms(x, own, c);
}
constexpr RowBackward<double> d_concat_terms = d_concat<double>;

inline Terms output_terms(ExactValues x, const Tensor<double>& own, const RowContext<double>& c) {
  if (!c.p.has_output_projection()) return as_summed(own, 0);
  return projected_terms(x[slot(Step::concat)], c.in.W_o, c.in.b_o);
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

// Every forward step's row, in the table's order: row k is step k. A step added to the table without
// a row here fails to compile (the size), and one out of order fails the test of the rows.
template <class T>
const std::array<RowMath<T>, step_count>& row_math() {
  static const std::array<RowMath<T>, step_count> table = {{
      {Step::q, rows::q<T>, rows::d_q<T>, rows::q_terms, rows::d_q_terms},
      {Step::k, rows::k<T>, rows::d_k<T>, rows::k_terms, rows::d_k_terms},
      {Step::v, rows::v<T>, rows::d_v<T>, rows::v_terms, rows::d_v_terms},
      {Step::q_heads, rows::q_heads<T>, rows::d_q_heads<T>, rows::q_heads_terms, rows::d_q_heads_terms},
      {Step::k_heads, rows::k_heads<T>, rows::d_k_heads<T>, rows::k_heads_terms, rows::d_k_heads_terms},
      {Step::v_heads, rows::v_heads<T>, rows::d_v_heads<T>, rows::v_heads_terms, rows::d_v_heads_terms},
      {Step::q_rot, rows::q_rot<T>, rows::d_q_rot<T>, rows::q_rot_terms, rows::d_q_rot_terms},
      {Step::k_rot, rows::k_rot<T>, rows::d_k_rot<T>, rows::k_rot_terms, rows::d_k_rot_terms},
      {Step::scores, rows::scores_row<T>, rows::d_scores_row<T>, rows::scores_terms, rows::d_scores_terms},
      {Step::scaled, rows::scaled<T>, rows::d_scaled<T>, rows::scaled_terms, rows::d_scaled_terms},
      {Step::capped, rows::capped<T>, rows::d_capped<T>, rows::capped_terms, rows::d_capped_terms},
      {Step::bias, rows::bias<T>, rows::d_bias<T>, rows::bias_terms, rows::d_bias_terms},
      {Step::masked, rows::masked<T>, rows::d_masked<T>, rows::masked_terms, rows::d_masked_terms},
      {Step::weights, rows::weights<T>, rows::d_weights<T>, rows::weights_terms, rows::d_weights_terms},
      {Step::sink_weights, rows::sink_weights<T>, rows::d_sink_weights<T>, rows::sink_weights_terms,
       rows::d_sink_weights_terms},
      {Step::dropped, rows::dropped<T>, rows::d_dropped<T>, rows::dropped_terms, rows::d_dropped_terms},
      {Step::head_outputs, rows::head_outputs<T>, rows::d_head_outputs<T>, rows::head_outputs_terms,
       rows::d_head_outputs_terms},
      {Step::concat, rows::concat<T>, rows::d_concat<T>, rows::concat_terms, rows::d_concat_terms},
      {Step::output, rows::output<T>, rows::d_output<T>, rows::output_terms, rows::d_output_terms},
  }};
  return table;
}

template <class T>
const RowMath<T>& row_of(Step step) {
  return row_math<T>()[slot(step)];
}

// The forward pass over the rows: every step of `p` in pipeline order, each from the values of the steps
// before it. `compute(step, x)` makes the step (its row's forward, or what a mistake does instead), and
// `keep(step, value)` stores it and returns what the steps after it read in its place (x).
template <class T, class Compute, class Keep>
void walk_forward(const Problem& p, ForwardValues<T>& x, Compute&& compute, Keep&& keep) {
  for (const Step s : all_steps())
    if (step_applies(s, p)) x[slot(s)] = keep(s, compute(s, static_cast<const ForwardValues<T>&>(x)));
}

// The backward pass over the rows, ∂L/∂output in d[output]: the steps of `p` in reverse, each sending its
// gradient back to what it read (`send(step, dy, d)`: its row's backward, or what a mistake does instead).
// When the walk reaches a step, every step that read it has sent its part, so its gradient is whole:
// `keep(gradient step, value)` stores it and returns what is sent on in its place. The leaves' gradients
// (d_X … d_sinks) are whole at the end, and kept then, in the table's order.
template <class T, class Send, class Keep>
void walk_backward(const Problem& p, const ForwardValues<T>& x, Gradients<T>& d, Send&& send, Keep&& keep) {
  const std::array<Step, step_count>& steps = all_steps();
  for (std::size_t k = steps.size(); k-- > 0;) {
    const Step s = steps[k];
    if (!step_applies(s, p)) continue;
    Tensor<T>& dy = d[slot(s)];
    if (const std::optional<Step> g = gradient_of(s)) dy = keep(*g, std::move(dy));
    if (!dy.empty()) send(s, static_cast<const Tensor<T>&>(dy), x, d);
  }
  for (const Step g : gradient_steps())
    if (!d[slot(g)].empty() && step_applies(g, p)) d[slot(g)] = keep(g, std::move(d[slot(g)]));
}

// The size of what every gradient sums, element by element, by gradient step (d_output … d_sinks): the
// rows' d_terms walked back from |∂L/∂output|, on the magnitudes of the forward values `value_of(step)`
// (a reference run's, or what a dump's steps started from). With the rounding's count, compare --backward's
// noise floor and diff's tolerance of a gradient.
template <class ValueOf>
Gradients<double> gradient_magnitudes(const Problem& p, ValueOf&& value_of) {
  ForwardValues<double> x;
  for (const Step s : all_steps())
    if (step_applies(s, p)) x[slot(s)] = magnitude(Tensor<double>(value_of(s)));
  Gradients<double> d;
  d[slot(Step::output)] = magnitude(Tensor<double>(value_of(Step::d_output)));
  const Inputs<double> in(p, DType::float64);
  const RowContext<double> c{p, in};
  Gradients<double> M;
  walk_backward(
      p, static_cast<const ForwardValues<double>&>(x), d,
      [&c](Step s, const Tensor<double>& dy, const ForwardValues<double>& values, Gradients<double>& into) {
        row_of<double>(s).d_terms(dy, values, c, into);
      },
      [&M](Step g, Tensor<double> value) {
        M[slot(g)] = value;
        return value;
      });
  return M;
}

}  // namespace attn
