#include "trace/trace.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace attn {

std::string step_formula(Step step, const Problem& p) {
  const auto plus_bias = [](const std::vector<double>& b, std::string_view name) {
    return b.empty() ? std::string() : fmt::format(" + {}", name);
  };
  const std::string_view source = p.cross ? "C" : "X";
  switch (step) {
    case Step::q: return fmt::format("Q = X·W_q{}", plus_bias(p.b_q, "b_q"));
    case Step::k: return fmt::format("K = {}·W_k{}", source, plus_bias(p.b_k, "b_k"));
    case Step::v: return fmt::format("V = {}·W_v{}", source, plus_bias(p.b_v, "b_v"));
    case Step::scaled:
      return p.scale_given ? fmt::format("S' = S · {}", p.scale) : fmt::format("S' = S / √{}", p.d_k);
    case Step::masked:
      return p.mask.kind == MaskKind::none ? "S'' = S' (mask: none)"
                                           : fmt::format("S'' = S' where allowed, -inf elsewhere (mask: {})",
                                                         p.mask.summary());
    case Step::output:
      return p.has_output_projection() ? fmt::format("Y = O·W_o{}", plus_bias(p.b_o, "b_o"))
                                       : "Y = O (no W_o: the output is the merged heads)";
    default: return std::string(step_info(step).formula);
  }
}

std::string step_description(Step step, const Problem& p) {
  if (step == Step::output && !p.has_output_projection())
    return "the result: the merged heads as they are, since the input has no output projection";
  if (step == Step::masked && p.mask.kind == MaskKind::none)
    return "no mask: every query may see every key, so this is the scaled scores unchanged";
  return std::string(step_info(step).description);
}

bool StepFilter::keeps(Step step) const {
  return only.empty() || std::find(only.begin(), only.end(), step) != only.end();
}

TraceCollector::TraceCollector(std::shared_ptr<const Problem> problem, std::string dtype, StepFilter filter)
    : filter_(std::move(filter)) {
  trace_.problem = std::move(problem);
  trace_.dtype = std::move(dtype);
}

void TraceCollector::keep(Step step, Tensor<double> value) {
  if (!trace_.problem->batched) {
    // A 2-D input's trace has no batch axis: drop the engine's leading axis of extent 1.
    Shape shape(value.shape().begin() + 1, value.shape().end());
    std::vector<double> data(value.values().begin(), value.values().end());
    value = Tensor<double>(std::move(shape), std::move(data));
  }
  trace_.steps.push_back(
      {step, step_formula(step, *trace_.problem), step_description(step, *trace_.problem), std::move(value)});
}

Trace TraceCollector::finish(std::vector<EmptyRow> empty_rows) && {
  const Problem& p = *trace_.problem;
  for (const EmptyRow& row : empty_rows) {
    const std::string& token = p.tokens[row.batch][row.query];
    trace_.warnings.push_back(
        p.batched ? fmt::format("batch item {}, query {} (\"{}\"): the mask leaves no key to attend, so its "
                                "weights and head output are zero",
                                row.batch, row.query, token)
                  : fmt::format("query {} (\"{}\"): the mask leaves no key to attend, so its weights and "
                                "head output are zero",
                                row.query, token));
  }
  trace_.empty_rows = std::move(empty_rows);
  return std::move(trace_);
}

}  // namespace attn
