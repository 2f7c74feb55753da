#include "trace/trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ops/attention.hpp"

namespace attn {

bool step_applies(Step step, const Problem& p) {
  switch (step_info(step).needs) {
    case Needs::rope: return p.rope.has_value();
    case Needs::alibi: return p.alibi.has_value();
    case Needs::softcap: return p.softcap.has_value();
    case Needs::sinks: return !p.sinks.empty();
    case Needs::dropout: return p.dropout.has_value();
    case Needs::cross: return p.cross;
    case Needs::w_o: return p.has_output_projection();
    case Needs::b_q: return !p.b_q.empty();
    case Needs::b_k: return !p.b_k.empty();
    case Needs::b_v: return !p.b_v.empty();
    case Needs::b_o: return !p.b_o.empty();
    case Needs::always: return true;
  }
  return true;
}

std::vector<Step> steps_of(const Problem& p) {
  std::vector<Step> steps;
  for (const Step s : all_steps())
    if (step_applies(s, p)) steps.push_back(s);
  return steps;
}

std::vector<Step> gradient_steps_of(const Problem& p) {
  std::vector<Step> steps;
  for (const Step s : gradient_steps())
    if (step_applies(s, p)) steps.push_back(s);
  return steps;
}

std::vector<Step> inputs_of(Step step, const Problem& p) {
  std::vector<Step> listed;
  for (const Step s : step_info(step).inputs)
    if (step_applies(s, p)) listed.push_back(s);
  std::vector<Step> direct;
  for (const Step s : listed) {
    const bool through_another = std::any_of(listed.begin(), listed.end(), [&](Step o) { return depends_on(o, s); });
    if (!through_another) direct.push_back(s);
  }
  return direct;
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
