#pragma once
// The rows of engine/rows.hpp, their types and their forward and backward ops: what each step computes
// from the steps before it, and what its gradient sends back to what it read. engine/row_terms.hpp holds
// their error terms, engine/rows.hpp the table of rows and the walks over it; include that one.
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
#include "model/dropout.hpp"

namespace attn {

template <class T>
using ForwardValues = std::array<Tensor<T>, step_count>;
template <class T>
using Gradients = std::array<Tensor<T>, table_size>;

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
// The steps whose forward values a row's backward reads, for problem p: what a pass saves for it (as
// PyTorch's save_for_backward does). What a row's forward reads is the step table's (inputs_of).
using RowSaves = std::vector<Step> (*)(const Problem& p);

// What rounding scales with at one step: the size of what each value sums (Σ|terms| of its sum), element
// by element, and how many terms its longest sum has.
struct Terms {
  Tensor<double> of;
  double count = 0;
};
// The forward values a row's terms read, by slot (the first step_count slots of a table of steps).
using ExactValues = std::span<const Tensor<double>, step_count>;
// A step's terms, from the exact values x of the steps before it, its own value and the problem (its
// inputs in float64).
using RowTerms = Terms (*)(ExactValues x, const Tensor<double>& own, const Problem& p);

template <class T>
struct RowMath {
  Step step;
  RowForward<T> forward;
  RowBackward<T> backward;
  RowSaves saves;
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

// The step a step reads in place of an optional one (q_rot for q_heads with RoPE; dropped for the weights
// with dropout; a stage of the score chain reads the one before it, stage_reads below).
inline Step queries_read(const Problem& p) { return p.rope ? Step::q_rot : Step::q_heads; }
inline Step keys_read(const Problem& p) { return p.rope ? Step::k_rot : Step::k_heads; }
inline Step weights_read(const Problem& p) { return chain_has(Stage::dropout, p) ? Step::dropped : Step::weights; }

// What the backward of a row reads of the forward's values (RowSaves).
inline std::vector<Step> saves_nothing(const Problem&) { return {}; }
// the two factors of a product: Q and K for the scores, the weights and V for the weighted sum
inline std::vector<Step> saves_factors(const Problem& p) { return {queries_read(p), keys_read(p)}; }
inline std::vector<Step> saves_weighted(const Problem& p) { return {weights_read(p), Step::v_heads}; }
// its own output: the softmax's backward is written in it
inline std::vector<Step> saves_weights(const Problem& p) {
  if (p.sinks.empty()) return {Step::weights};
  return {Step::weights, Step::sink_weights};
}
inline std::vector<Step> saves_shares(const Problem&) { return {Step::weights, Step::sink_weights}; }
// the merged heads, which W_o's gradient reads
inline std::vector<Step> saves_merged(const Problem& p) {
  if (!p.has_output_projection()) return {};
  return {Step::concat};
}

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

// ---- the score chain's stages (model/score_chain.hpp): each an elementwise map of the step it reads,
// forward, back and on magnitudes, from the chain's own scalar forms

// f(w, k) for every score of a (B, h, n, m) value: w where it sits, k its place in the values.
template <class T, class F>
void each_score(const Tensor<T>& S, F&& f) {
  const std::size_t B = S.dim(0), h = S.dim(1), n = S.dim(2), m = S.dim(3);
  std::size_t k = 0;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) f(Where{b, hd, i, j}, k++);
}

// The step a stage reads: the step of the elementwise stage before it that the input has, else the scores;
// dropout reads the weights.
inline Step stage_reads(Stage s, const Problem& p) {
  if (stage_info(s).kind == StageKind::weight_factor) return Step::weights;
  const std::optional<Stage> before = stage_before(s, p);
  return before ? stage_step(*before) : Step::scores;
}

// Y[b][hd][i][j] = stage(X[b][hd][i][j]) at (b, hd, i, j)              X, Y (B, h, n, m)
template <class T, Stage S>
Tensor<T> stage_forward(const ForwardValues<T>& x, const RowContext<T>& c) {
  const Tensor<T>& X = x[slot(stage_reads(S, c.p))];
  Tensor<T> Y(X.shape());
  each_score(X, [&](const Where& w, std::size_t k) { Y.values()[k] = c.in.chain.forward(S, w, X.values()[k]); });
  return Y;
}
// dX = the stage's backward of dY, from its own value Y where it reads it (the cap's slope)
template <class T, Stage S>
void stage_backward(const Tensor<T>& dY, const ForwardValues<T>& x, const RowContext<T>& c, Gradients<T>& d) {
  const Tensor<T>* Y = stage_info(S).reads_own ? &x[slot(stage_step(S))] : nullptr;
  Tensor<T> dX(dY.shape());
  each_score(dY, [&](const Where& w, std::size_t k) {
    dX.values()[k] = c.in.chain.backward(S, w, Y != nullptr ? Y->values()[k] : T{0}, dY.values()[k]);
  });
  send(d, stage_reads(S, c.p), std::move(dX));
}
template <Stage S>
std::vector<Step> stage_saves(const Problem&) {
  if (stage_info(S).reads_own) return {stage_step(S)};
  return {};
}

// ---- the softmax, with the sinks' logits in its rows when the input has them

template <class T>
Tensor<T> weights(const ForwardValues<T>& x, const RowContext<T>& c) {
  if (c.p.sinks.empty()) return softmax_rows(x[slot(Step::masked)]);
  Tensor<T> share;
  return softmax_rows_with_sinks(x[slot(Step::masked)], c.in.chain.sinks(), share);
}
// The sinks' shares of each row: the same softmax, its other result   -> (B, h, n)
template <class T>
Tensor<T> sink_weights(const ForwardValues<T>& x, const RowContext<T>& c) {
  Tensor<T> share;
  (void)softmax_rows_with_sinks(x[slot(Step::masked)], c.in.chain.sinks(), share);
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

}  // namespace rows

}  // namespace attn
