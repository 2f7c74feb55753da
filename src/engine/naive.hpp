#pragma once
// Naive attention: every step computed in full, in the order of the trace, in scalar type T: the rows of
// engine/rows.hpp walked in pipeline order. In a half storage type (engine/common.hpp) every step is
// rounded to it as it is stored; the scale stays a T number, and the softmax runs in T from the stored
// masked scores.

#include <array>
#include <optional>
#include <vector>

#include "engine/common.hpp"
#include "engine/rows.hpp"

namespace attn {

// The plain pass over the rows of engine/rows.hpp lets each value go once the last step that reads it is
// made: `Liveness` says which step that is. A score-sized value (is_score_step) is counted by the meter
// from the moment it is made until it is let go.
struct Liveness {
  // by slot: the last step of p, in pipeline order, whose forward reads the step (inputs_of), if any
  std::array<std::optional<Step>, step_count> last_forward{};
  // by slot: the step of p whose backward reads it last (its row's saves), if any: the backward walks
  // the pipeline in reverse, so this is the earliest such step
  std::array<std::optional<Step>, step_count> last_backward{};

  Liveness(const Problem& p, bool backward) {
    const std::vector<Step> steps = steps_of(p);
    for (const Step s : steps)
      for (const Step t : inputs_of(s, p)) last_forward[slot(t)] = s;
    if (!backward) return;
    const std::array<std::size_t, step_count> readers = reader_counts(p);
    // the backward walks the pipeline in reverse: the earliest step that saves a value reads it last
    for (const Step s : steps) {
      if (readers[slot(s)] == 0 && s != Step::output) continue;  // read by nothing: it has no gradient
      for (const Step t : row_of<double>(s).saves(p))
        if (!last_backward[slot(t)]) last_backward[slot(t)] = s;
    }
  }
  // Does the forward pass keep step t after step s, which reads it, is made?
  bool kept_after(Step t, Step s) const { return last_forward[slot(t)] != s || last_backward[slot(t)].has_value(); }
};

template <class T>
void hold(ByteMeter& meter, Step s, const Tensor<T>& value) {
  if (is_score_step(s)) meter.hold(bytes_of(value));
}
template <class T>
void let_go(ByteMeter& meter, Step s, Tensor<T>& value) {
  if (is_score_step(s)) meter.release(bytes_of(value));
  value = Tensor<T>();
}

// The naive forward pass: the rows of `p` in pipeline order, each step stored rounded to the storage and
// reported as it is made, each value let go once the last step that reads it is made (`live`: with a
// backward pass, the values it reads, the rows' saves, are kept for it). Returns what is kept, the output
// among them; `meter` counts the score-sized values held.
template <class T>
ForwardValues<T> naive_forward(const Problem& p, const Inputs<T>& in, Observer& observer, ByteMeter& meter,
                               DType storage, const Liveness& live) {
  const RowContext<T> c{p, in};
  const Keeper<T> keep(observer, storage);
  ForwardValues<T> x;
  walk_forward<T>(
      p, x, [&c](Step s, const ForwardValues<T>& v) { return row_of<T>(s).forward(v, c); },
      [&](Step s, Tensor<T> value) {
        value = keep(s, std::move(value));
        hold(meter, s, value);
        for (const Step t : inputs_of(s, p))
          if (!live.kept_after(t, s)) let_go(meter, t, x[slot(t)]);
        return value;
      });
  return x;
}

template <class T>
AttentionResult<T> run_naive(const Problem& p, Observer& observer, DType storage = DType::float32) {
  require_storage<T>("run_naive", storage);
  const Inputs<T> in(p, storage);
  ByteMeter meter;
  ForwardValues<T> x = naive_forward(p, in, observer, meter, storage, Liveness(p, false));
  return {std::move(x[slot(Step::output)]), find_empty_rows(p), meter.peak(), Tensor<T>()};
}

// Compiled once, in engine/instances.cpp, rather than in every file that runs the engine.
extern template AttentionResult<float> run_naive<float>(const Problem&, Observer&, DType);
extern template AttentionResult<double> run_naive<double>(const Problem&, Observer&, DType);
extern template AttentionResult<long double> run_naive<long double>(const Problem&, Observer&, DType);

}  // namespace attn
