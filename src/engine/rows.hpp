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
// The rows' types and ops are in engine/row_math.hpp, their error terms in engine/row_terms.hpp; this
// file holds the table and the walks, and is the one to include.

#include <array>
#include <cstddef>
#include <optional>

#include "engine/row_math.hpp"
#include "engine/row_terms.hpp"

namespace attn {

// Every forward step's row, in the table's order: row k is step k. A step added to the table without
// a row here fails to compile (the size), and one out of order fails the test of the rows.
template <class T>
const std::array<RowMath<T>, step_count>& row_math() {
  static const std::array<RowMath<T>, step_count> table = {{
      {Step::q, rows::q<T>, rows::d_q<T>, rows::q_terms, rows::d_q_terms},
      {Step::k, rows::k<T>, rows::d_k<T>, rows::k_terms, rows::d_k_terms},
      {Step::v, rows::v<T>, rows::d_v<T>, rows::v_terms, rows::d_v_terms},
      {Step::q_heads, rows::q_heads<T>, rows::d_q_heads<T>, rows::nothing_summed, rows::d_q_heads<double>},
      {Step::k_heads, rows::k_heads<T>, rows::d_k_heads<T>, rows::nothing_summed, rows::d_k_heads<double>},
      {Step::v_heads, rows::v_heads<T>, rows::d_v_heads<T>, rows::nothing_summed, rows::d_v_heads<double>},
      {Step::q_rot, rows::q_rot<T>, rows::d_q_rot<T>, rows::q_rot_terms, rows::d_q_rot_terms},
      {Step::k_rot, rows::k_rot<T>, rows::d_k_rot<T>, rows::k_rot_terms, rows::d_k_rot_terms},
      {Step::scores, rows::scores_row<T>, rows::d_scores_row<T>, rows::scores_terms, rows::d_scores_row<double>},
      {Step::scaled, rows::scaled<T>, rows::d_scaled<T>, rows::one_product, rows::d_scaled_terms},
      {Step::capped, rows::capped<T>, rows::d_capped<T>, rows::capped_terms, rows::d_capped_terms},
      {Step::bias, rows::bias<T>, rows::d_bias<T>, rows::bias_terms, rows::d_bias<double>},
      {Step::masked, rows::masked<T>, rows::d_masked<T>, rows::nothing_summed, rows::d_masked_terms},
      {Step::weights, rows::weights<T>, rows::d_weights<T>, rows::weights_terms, rows::d_weights_terms},
      {Step::sink_weights, rows::sink_weights<T>, rows::d_sink_weights<T>, rows::weights_terms,
       rows::d_sink_weights_terms},
      {Step::dropped, rows::dropped<T>, rows::d_dropped<T>, rows::one_product, rows::d_dropped_terms},
      {Step::head_outputs, rows::head_outputs<T>, rows::d_head_outputs<T>, rows::head_outputs_terms,
       rows::d_head_outputs_terms},
      {Step::concat, rows::concat<T>, rows::d_concat<T>, rows::nothing_summed, rows::d_concat<double>},
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
