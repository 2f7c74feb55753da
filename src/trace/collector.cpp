#include "trace/collector.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include <fmt/format.h>

namespace attn {

TraceCollector::TraceCollector(std::shared_ptr<const Problem> problem, DType dtype, StepFilter filter,
                               std::optional<TileSize> flash)
    : filter_(std::move(filter)) {
  trace_.problem = std::move(problem);
  trace_.dtype = dtype;
  trace_.head = filter_.head;
  if (flash) {
    trace_.engine = Engine::flash;
    trace_.flash = FlashRecord{*flash, {}, {}, {}, {}};
  }
}

Tensor<double> TraceCollector::as_traced(Tensor<double> value, bool has_head_axis, bool kv_axis) const {
  if (trace_.head && has_head_axis) value = select_head(value, 1, head_at(trace_, kv_axis, 0));
  if (!trace_.problem->batched) {
    // A 2-D input's trace has no batch axis: drop the engine's leading axis of extent 1.
    Shape shape(value.shape().begin() + 1, value.shape().end());
    std::vector<double> data(value.values().begin(), value.values().end());
    value = Tensor<double>(std::move(shape), std::move(data));
  }
  return value;
}

void TraceCollector::expect_backward(std::optional<TileSize> flash) {
  trace_.backward = true;
  if (flash) trace_.flash_backward = FlashBackwardRecord{*flash, {}, {}};
}

void TraceCollector::keep(Step step, Tensor<double> value) {
  const Axis first = step_info(step).axes.front();
  // A parameter's gradient has neither a batch axis nor a head axis: it is kept whole.
  if (!step_info(step).parameter)
    value = as_traced(std::move(value), first == Axis::head || first == Axis::kv_head, first == Axis::kv_head);
  if (trace_.flash && step == Step::output) {
    trace_.flash->output = value;
    if (!filter_.keeps(step)) return;
  }
  std::string formula = step_formula(step, *trace_.problem);
  std::string description = step_description(step, *trace_.problem);
  if (trace_.flash && step == Step::head_outputs) {
    formula = "O_h = O / l (the flash pass's result, equal to A·V_h)";
    description = "each head's output: the flash pass's running output divided once by its running sum";
  }
  trace_.steps.push_back({step, std::move(formula), std::move(description), std::move(value)});
}

void TraceCollector::keep_lse(Tensor<double> lse) { trace_.flash->lse = as_traced(std::move(lse), true, false); }

void TraceCollector::keep_rows(Tensor<double> D) { trace_.flash_backward->D = as_traced(std::move(D), true, false); }

namespace {

// Which dtype would not have overflowed, as the end of the warning.
std::string_view wider_range_hint(DType dtype) {
  switch (dtype) {
    case DType::float16: return "; float16 stops at 65504, --dtype bfloat16 or float32 reach 3.4e38";
    case DType::float32:
    case DType::bfloat16: return "; --dtype float64 has a far wider range";
    case DType::float64: return "";
  }
  return "";
}

}  // namespace

void TraceCollector::warn_non_finite() {
  // Finite inputs can still overflow on the way (a huge dot product): say where it first happened.
  for (const StepRecord& rec : trace_.steps) {
    const std::span<const double> v = rec.value.values();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const bool masked_out = rec.step == Step::masked && v[i] == -std::numeric_limits<double>::infinity();
      if (std::isfinite(v[i]) || masked_out) continue;
      Shape index(rec.value.rank());
      for (std::size_t a = index.size(), rest = i; a-- > 0; rest /= rec.value.dim(a))
        index[a] = rest % rec.value.dim(a);
      trace_.warnings.push_back(fmt::format("{} has a non-finite value ({}) at [{}]: the arithmetic overflowed{}",
                                            step_info(rec.step).name, v[i], fmt::join(index, ", "),
                                            wider_range_hint(trace_.dtype)));
      return;
    }
  }
}

Trace TraceCollector::finish(std::vector<EmptyRow> empty_rows) && {
  const Problem& p = *trace_.problem;
  // Backward: L still depends on the row's weights (through O = A·V), but its softmax cannot move.
  const std::string_view gradients =
      trace_.backward ? "; its d_weights is dO·Vᵀ like any row's, and its d_masked, d_scaled and d_scores are zero "
                        "(the softmax of a row with nothing to attend cannot move)"
                      : "";
  for (const EmptyRow& row : empty_rows) {
    const std::string& token = p.tokens[row.batch][row.query];
    trace_.warnings.push_back(
        p.batched ? fmt::format("batch item {}, query {} (\"{}\"): the mask leaves no key to attend, so its "
                                "weights and head output are zero{}",
                                row.batch, row.query, token, gradients)
                  : fmt::format("query {} (\"{}\"): the mask leaves no key to attend, so its weights and "
                                "head output are zero{}",
                                row.query, token, gradients));
  }
  trace_.empty_rows = std::move(empty_rows);
  warn_non_finite();
  return std::move(trace_);
}

}  // namespace attn
