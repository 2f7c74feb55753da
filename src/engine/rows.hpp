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

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/row_math.hpp"
#include "engine/row_terms.hpp"

namespace attn {

// The row of a stage of the score chain: the chain's forward, backward and terms, mapped over the scores.
template <class T, Stage S>
RowMath<T> stage_row() {
  return {stage_step(S),        rows::stage_forward<T, S>, rows::stage_backward<T, S>,
          rows::stage_saves<S>, rows::stage_terms<S>,      rows::stage_d_terms<S>};
}

// Does a stage's step have the generic row of its stage (stage_row)? An elementwise stage's and a factor
// on the weights' do; the sinks' column is the softmax's other result, with its own row (sink_weights).
constexpr bool has_stage_row(Stage s) {
  return chain_stage_table[static_cast<std::size_t>(s)].kind != StageKind::sink_column;
}
constexpr std::size_t stage_row_count() {
  std::size_t count = 0;
  for (const StageInfo& s : chain_stage_table) count += has_stage_row(s.stage) ? 1 : 0;
  return count;
}

template <class T, Stage S>
void add_stage_row(std::vector<RowMath<T>>& out) {
  if constexpr (has_stage_row(S)) out.push_back(stage_row<T, S>());
}

// The generic row of every stage that has one, in the chain's order.
template <class T, std::size_t... K>
std::vector<RowMath<T>> stage_rows(std::index_sequence<K...>) {
  std::vector<RowMath<T>> out;
  (add_stage_row<T, static_cast<Stage>(K)>(out), ...);
  return out;
}

// Every forward step's row: row k is step k. The steps of the score chain's stages take their stage's
// generic row (stage_rows); every other step's is written here. A step added to the table without a row
// does not compile (std::to_array counts the rows written, and the static_assert holds them with the
// stages' to step_count); tests/unit/rows_test.cpp checks that each slot holds its own step's row.
template <class T>
const std::array<RowMath<T>, step_count>& row_math() {
  static const std::array<RowMath<T>, step_count> table = [] {
    const auto own = std::to_array<RowMath<T>>({
        {Step::q, rows::q<T>, rows::d_q<T>, rows::saves_nothing, rows::q_terms, rows::d_q_terms},
        {Step::k, rows::k<T>, rows::d_k<T>, rows::saves_nothing, rows::k_terms, rows::d_k_terms},
        {Step::v, rows::v<T>, rows::d_v<T>, rows::saves_nothing, rows::v_terms, rows::d_v_terms},
        {Step::q_heads, rows::q_heads<T>, rows::d_q_heads<T>, rows::saves_nothing, rows::nothing_summed,
         rows::d_q_heads<double>},
        {Step::k_heads, rows::k_heads<T>, rows::d_k_heads<T>, rows::saves_nothing, rows::nothing_summed,
         rows::d_k_heads<double>},
        {Step::v_heads, rows::v_heads<T>, rows::d_v_heads<T>, rows::saves_nothing, rows::nothing_summed,
         rows::d_v_heads<double>},
        {Step::q_rot, rows::q_rot<T>, rows::d_q_rot<T>, rows::saves_nothing, rows::q_rot_terms, rows::d_q_rot_terms},
        {Step::k_rot, rows::k_rot<T>, rows::d_k_rot<T>, rows::saves_nothing, rows::k_rot_terms, rows::d_k_rot_terms},
        {Step::scores, rows::scores_row<T>, rows::d_scores_row<T>, rows::saves_factors, rows::scores_terms,
         rows::d_scores_row<double>},
        {Step::weights, rows::weights<T>, rows::d_weights<T>, rows::saves_weights, rows::weights_terms,
         rows::d_weights_terms},
        {Step::sink_weights, rows::sink_weights<T>, rows::d_sink_weights<T>, rows::saves_shares, rows::weights_terms,
         rows::d_sink_weights_terms},
        {Step::head_outputs, rows::head_outputs<T>, rows::d_head_outputs<T>, rows::saves_weighted,
         rows::head_outputs_terms, rows::d_head_outputs_terms},
        {Step::concat, rows::concat<T>, rows::d_concat<T>, rows::saves_nothing, rows::nothing_summed,
         rows::d_concat<double>},
        {Step::output, rows::output<T>, rows::d_output<T>, rows::saves_merged, rows::output_terms,
         rows::d_output_terms},
    });
    static_assert(std::tuple_size_v<std::remove_const_t<decltype(own)>> + stage_row_count() == step_count,
                  "one row per forward step: its own, or its stage's");
    std::array<RowMath<T>, step_count> out{};
    for (const RowMath<T>& r : own) out[slot(r.step)] = r;
    for (const RowMath<T>& r : stage_rows<T>(std::make_index_sequence<stage_count>{})) out[slot(r.step)] = r;
    return out;
  }();
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

// What an engine's attention gives the rows after it (walk_around_attention): the head outputs, and with
// sinks each row's share of its head's sink.
template <class T>
struct AttentionOut {
  Tensor<T> head_outputs;  // (B, h, n, d_v)
  Tensor<T> sink_weights;  // (B, h, n), or empty
};

// The forward rows of every step an engine forms whole around its attention: the projections, the heads
// and RoPE before it, the merge and the output projection after it, each kept by `keep` (a Keeper: rounded
// to the storage, reported). `attend(x)` stands for the score steps, which such an engine never forms
// whole: called once, in the place of the scores, with the values the scores read, it returns what the rows
// after them read. Returns the values of the steps formed, by slot (the score steps empty).
template <class T, class Attend>
ForwardValues<T> walk_around_attention(const Problem& p, const Inputs<T>& in, const Keeper<T>& keep, Attend&& attend) {
  const RowContext<T> c{p, in};
  ForwardValues<T> x;
  AttentionOut<T> out;
  walk_forward<T>(
      p, x,
      [&](Step s, const ForwardValues<T>& v) -> Tensor<T> {
        if (s == Step::scores) out = attend(v);
        if (s == Step::sink_weights) return std::move(out.sink_weights);
        if (s == Step::head_outputs) return std::move(out.head_outputs);
        if (is_score_step(s)) return {};
        return row_of<T>(s).forward(v, c);
      },
      [&keep](Step s, Tensor<T> value) { return value.empty() ? value : keep(s, std::move(value)); });
  return x;
}

// How many steps of `p` read each step's value (the step table's inputs_of), by slot.
inline std::array<std::size_t, step_count> reader_counts(const Problem& p) {
  std::array<std::size_t, step_count> count{};
  for (const Step s : steps_of(p))
    for (const Step t : inputs_of(s, p)) ++count[slot(t)];
  return count;
}

// The forward step whose gradient the gradient step g is (scores for d_scores), or none for a leaf's
// (d_X … d_sinks).
inline std::optional<Step> step_of_gradient(Step g) {
  static const std::array<std::optional<Step>, table_size> of = [] {  // by slot of the gradient step
    std::array<std::optional<Step>, table_size> steps{};
    for (const Step s : all_steps())
      if (const std::optional<Step> d = gradient_of(s)) steps[slot(*d)] = s;
    return steps;
  }();
  return of[slot(g)];
}

// The backward pass over the rows, ∂L/∂output in d[output]: the steps of `p` in reverse, each sending its
// gradient back to what it read (`send(step, dy, d)`: its row's backward, or what a mistake does instead;
// it may let d[step] go once sent). A step's gradient is whole once the walk has passed every step that
// reads it (inputs_of); a leaf's (d_X … d_sinks) at the end. Whole gradients are kept in the table's
// order (gradient_steps), each as soon as it and those before it are whole: `keep(gradient step,
// value)` stores it and returns what is sent on in its place.
template <class T, class Send, class Keep>
void walk_backward(const Problem& p, const ForwardValues<T>& x, Gradients<T>& d, Send&& send, Keep&& keep) {
  std::array<std::size_t, step_count> unread = reader_counts(p);  // the readers the walk has not passed yet
  const std::array<Step, gradient_step_count>& order = gradient_steps();
  std::size_t next = 0;  // the first gradient of `order` not kept yet
  const auto keep_whole = [&](bool at_end) {
    for (; next < order.size(); ++next) {
      const Step g = order[next];
      if (!step_applies(g, p)) continue;
      const std::optional<Step> s = step_of_gradient(g);
      if (s ? unread[slot(*s)] > 0 : !at_end) return;
      Tensor<T>& value = d[slot(s.value_or(g))];
      if (!value.empty()) value = keep(g, std::move(value));
    }
  };
  const auto kept = [&order, &next](Step g) {
    return static_cast<std::size_t>(std::find(order.begin(), order.end(), g) - order.begin()) < next;
  };
  keep_whole(false);
  const std::array<Step, step_count>& steps = all_steps();
  for (std::size_t k = steps.size(); k-- > 0;) {
    const Step s = steps[k];
    if (!step_applies(s, p)) continue;
    const Tensor<T>& dy = d[slot(s)];
    if (!dy.empty()) {
      if (const std::optional<Step> g = gradient_of(s); g && !kept(*g))
        throw std::logic_error(
            fmt::format("walk_backward: {} is sent back before it is kept: the table's gradient "
                        "order is not one a backward pass can keep",
                        step_info(*g).name));
      send(s, dy, x, d);
    }
    for (const Step t : inputs_of(s, p)) --unread[slot(t)];
    keep_whole(false);
  }
  keep_whole(true);
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
