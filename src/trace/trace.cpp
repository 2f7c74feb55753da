#include "trace/trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ops/attention.hpp"

namespace attn {

bool StepFilter::keeps(Step step) const {
  if (none) return false;
  return only.empty() || std::find(only.begin(), only.end(), step) != only.end();
}

std::size_t head_at(const Trace& trace, bool kv_axis, std::size_t index) {
  if (!trace.head) return index;
  const Problem& p = *trace.problem;
  return kv_axis ? kv_head_of(*trace.head, p.h, p.g) : *trace.head;
}

Shape traced_shape(Step step, const Problem& p, bool one_head) { return step_shape(step, p, p.batched, one_head); }

const StepRecord* find_step(const Trace& trace, Step step) {
  for (const StepRecord& rec : trace.steps)
    if (rec.step == step) return &rec;
  return nullptr;
}

Tensor<double> with_batch_axis(const Tensor<double>& value, std::size_t rank) {
  if (value.rank() == rank) return value;
  Shape shape = value.shape();
  shape.insert(shape.begin(), 1);
  return Tensor<double>(std::move(shape), std::vector<double>(value.values().begin(), value.values().end()));
}

Tensor<double> select_head(const Tensor<double>& value, std::size_t axis, std::size_t keep) {
  Shape shape = value.shape();
  std::size_t outer = 1;
  for (std::size_t a = 0; a < axis; ++a) outer *= shape[a];
  const std::size_t heads = shape[axis];
  const std::size_t block = heads == 0 ? 0 : value.size() / (outer * heads);
  shape[axis] = 1;
  std::vector<double> data;
  data.reserve(outer * block);
  for (std::size_t o = 0; o < outer; ++o) {
    const auto first = value.values().begin() + static_cast<std::ptrdiff_t>((o * heads + keep) * block);
    data.insert(data.end(), first, first + static_cast<std::ptrdiff_t>(block));
  }
  return Tensor<double>(std::move(shape), std::move(data));
}

Trace keep_only(Trace trace, const StepFilter& filter) {
  const Problem& p = *trace.problem;
  const bool slice = filter.head && !trace.head;  // a trace saved with --head holds that head only
  const std::size_t head_axis = p.batched ? 1 : 0;
  std::vector<StepRecord> kept;
  for (StepRecord& s : trace.steps) {
    if (!filter.keeps(s.step)) continue;
    const Axis first = step_info(s.step).axes.front();
    if (slice && (first == Axis::head || first == Axis::kv_head))
      s.value =
          select_head(s.value, head_axis, first == Axis::kv_head ? kv_head_of(*filter.head, p.h, p.g) : *filter.head);
    kept.push_back(std::move(s));
  }
  trace.steps = std::move(kept);
  if (trace.flash) {
    FlashRecord& f = *trace.flash;
    if (!filter.tiles) {
      f.tiles.clear();
      f.finals.clear();
    } else if (filter.head) {
      std::erase_if(f.tiles, [&](const FlashTile& t) { return t.head != *filter.head; });
      std::erase_if(f.finals, [&](const FlashFinal& d) { return d.head != *filter.head; });
    }
    if (slice) f.lse = select_head(f.lse, head_axis, *filter.head);
  }
  if (filter.head) trace.head = filter.head;
  return trace;
}

}  // namespace attn
