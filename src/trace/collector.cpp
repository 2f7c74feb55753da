#include "trace/trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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
  if (none) return false;
  return only.empty() || std::find(only.begin(), only.end(), step) != only.end();
}

std::size_t head_at(const Trace& trace, bool kv_axis, std::size_t index) {
  if (!trace.head) return index;
  const Problem& p = *trace.problem;
  return kv_axis ? kv_head_of(*trace.head, p.h, p.g) : *trace.head;
}

TraceCollector::TraceCollector(std::shared_ptr<const Problem> problem, std::string dtype, StepFilter filter,
                               std::optional<FlashBlocks> flash)
    : filter_(std::move(filter)) {
  trace_.problem = std::move(problem);
  trace_.dtype = std::move(dtype);
  trace_.head = filter_.head;
  if (flash) {
    trace_.engine = "flash";
    trace_.flash = FlashRecord{flash->block_q, flash->block_k, {}, {}, {}, {}};
  }
}

namespace {

// `value` (B, heads, …) cut down to (B, 1, …) holding head `keep` only.
Tensor<double> select_head(const Tensor<double>& value, std::size_t keep) {
  Shape shape = value.shape();
  const std::size_t B = shape[0], heads = shape[1];
  const std::size_t block = value.size() / (B * heads);
  shape[1] = 1;
  std::vector<double> data;
  data.reserve(B * block);
  for (std::size_t b = 0; b < B; ++b) {
    const auto first = value.values().begin() + static_cast<std::ptrdiff_t>((b * heads + keep) * block);
    data.insert(data.end(), first, first + static_cast<std::ptrdiff_t>(block));
  }
  return Tensor<double>(std::move(shape), std::move(data));
}

}  // namespace

Tensor<double> TraceCollector::as_traced(Tensor<double> value, bool has_head_axis, bool kv_axis) const {
  if (trace_.head && has_head_axis) value = select_head(value, head_at(trace_, kv_axis, 0));
  if (!trace_.problem->batched) {
    // A 2-D input's trace has no batch axis: drop the engine's leading axis of extent 1.
    Shape shape(value.shape().begin() + 1, value.shape().end());
    std::vector<double> data(value.values().begin(), value.values().end());
    value = Tensor<double>(std::move(shape), std::move(data));
  }
  return value;
}

Shape traced_shape(Step step, const Problem& p, bool one_head) {
  Shape shape;
  if (p.batched) shape.push_back(p.B);
  for (const Axis axis : step_info(step).axes) {
    switch (axis) {
      case Axis::query: shape.push_back(p.n); break;
      case Axis::key: shape.push_back(p.m); break;
      case Axis::head: shape.push_back(one_head ? 1 : p.h); break;
      case Axis::kv_head: shape.push_back(one_head ? 1 : p.g); break;
      case Axis::feature:
        switch (step) {
          case Step::q: shape.push_back(p.h * p.d_k); break;
          case Step::k: shape.push_back(p.g * p.d_k); break;
          case Step::v: shape.push_back(p.g * p.d_v); break;
          case Step::q_heads:
          case Step::k_heads: shape.push_back(p.d_k); break;
          case Step::concat: shape.push_back(p.h * p.d_v); break;
          case Step::output: shape.push_back(p.d_out); break;
          default: shape.push_back(p.d_v); break;  // v_heads, head_outputs
        }
        break;
    }
  }
  return shape;
}

void TraceCollector::keep(Step step, Tensor<double> value) {
  const Axis first = step_info(step).axes.front();
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

void TraceCollector::warn_non_finite() {
  // Finite inputs can still overflow on the way (a huge dot product): say where it first happened.
  for (const StepRecord& rec : trace_.steps) {
    const std::span<const double> v = rec.value.values();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const bool masked_out = rec.step == Step::masked && v[i] == -std::numeric_limits<double>::infinity();
      if (std::isfinite(v[i]) || masked_out) continue;
      Shape index(rec.value.rank());
      for (std::size_t a = index.size(), rest = i; a-- > 0; rest /= rec.value.dim(a)) index[a] = rest % rec.value.dim(a);
      trace_.warnings.push_back(fmt::format(
          "{} has a non-finite value ({}) at [{}]: the arithmetic overflowed{}", step_info(rec.step).name, v[i],
          fmt::join(index, ", "), trace_.dtype == "float32" ? "; --dtype float64 has a far wider range" : ""));
      return;
    }
  }
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
  warn_non_finite();
  return std::move(trace_);
}

}  // namespace attn
