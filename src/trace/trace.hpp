#pragma once
// A recorded run: the problem it ran on and every step that was asked for, in double
// (exact for float32 values too) with the dtype they were computed in.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/naive.hpp"
#include "model/problem.hpp"
#include "tensor/tensor.hpp"
#include "trace/observer.hpp"
#include "trace/steps.hpp"

namespace attn {

struct StepRecord {
  Step step;
  std::string formula;      // with this problem's details: "Q = X·W_q + b_q"
  std::string description;  // one sentence: what it means
  Tensor<double> value;   // the step's shape; a leading batch axis only for a batched input
};

struct Trace {
  std::shared_ptr<const Problem> problem;
  std::string dtype;                  // "float32" or "float64"
  std::vector<StepRecord> steps;      // in the order the engine ran them
  std::vector<EmptyRow> empty_rows;
  std::vector<std::string> warnings;  // for people: one sentence each
  std::string engine = "naive";       // which computation made the steps
  // Set when only one query head was kept: every head axis then has extent 1 and holds this head
  // (a key/value head axis holds the head it reads).
  std::optional<std::size_t> head;
};

// The formula of `step` as it applies to `p` (bias terms only when present, and so on).
std::string step_formula(Step step, const Problem& p);
// Its one-sentence meaning for `p`.
std::string step_description(Step step, const Problem& p);

// Which steps, and which head of them, to keep.
struct StepFilter {
  std::vector<Step> only;            // empty: every step
  std::optional<std::size_t> head;   // only this query head (and the key/value head it reads)
  bool keeps(Step step) const;
};

// The head that position `index` of a head axis of `trace` stands for.
std::size_t head_at(const Trace& trace, bool kv_axis, std::size_t index);

// Keeps a copy of every step the filter lets through.
class TraceCollector final : public Observer {
 public:
  TraceCollector(std::shared_ptr<const Problem> problem, std::string dtype, StepFilter filter = {});

  bool wants(Step step) const override { return filter_.keeps(step); }
  void on(Step step, const Tensor<float>& value) override { keep(step, cast<double>(value)); }
  void on(Step step, const Tensor<double>& value) override { keep(step, value); }

  // The finished trace, with a warning per row that had nothing to attend.
  Trace finish(std::vector<EmptyRow> empty_rows) &&;

 private:
  void keep(Step step, Tensor<double> value);
  void warn_non_finite();

  Trace trace_;
  StepFilter filter_;
};

}  // namespace attn
