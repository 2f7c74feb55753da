#include "trace/trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ops/attention.hpp"

namespace attn {

const std::array<TileField<FlashTile>, 9>& tile_fields() {
  using A = TileAxis;
  static const std::array<TileField<FlashTile>, 9> fields = {{
      {"S", "S", &FlashTile::S, A::queries, A::keys},
      {"m_prev", "m_prev", &FlashTile::m_prev, A::queries, A::none, false, true},
      {"m_new", "m_new", &FlashTile::m_new, A::queries, A::none, false, true},
      {"alpha", "alpha", &FlashTile::alpha, A::queries, A::none, false, true},
      {"P", "P", &FlashTile::P, A::queries, A::keys},
      {"l_prev", "l_prev", &FlashTile::l_prev, A::queries, A::none, false, true},
      {"l_new", "l_new", &FlashTile::l_new, A::queries, A::none, false, true},
      {"O", "O", &FlashTile::O, A::queries, A::d_v},
      {"P_drop", "P_drop", &FlashTile::P_drop, A::queries, A::keys, true},
  }};
  return fields;
}

const std::array<TileField<FlashBackwardTile>, 6>& backward_tile_fields() {
  using A = TileAxis;
  static const std::array<TileField<FlashBackwardTile>, 6> fields = {{
      {"P", "P = exp(S − lse)", &FlashBackwardTile::P, A::queries, A::keys},
      {"dP", "dP = dO·Vᵀ", &FlashBackwardTile::dP, A::queries, A::keys},
      {"dS", "dS = P ⊙ (dP − D)", &FlashBackwardTile::dS, A::queries, A::keys},
      {"dQ_add", "dQ_i += scale·dS·K_j", &FlashBackwardTile::dQ_add, A::queries, A::d_k},
      {"dK_j", "dK_j", &FlashBackwardTile::dK_j, A::keys, A::d_k},
      {"dV_j", "dV_j", &FlashBackwardTile::dV_j, A::keys, A::d_v},
  }};
  return fields;
}

TileState tile_state(const FlashTile& tile) {
  TileState out;
  std::vector<const Tensor<double>*> columns;
  for (const TileField<FlashTile>& field : tile_fields())
    if (field.state) {
      out.names.emplace_back(field.name);
      columns.push_back(&(tile.*field.member));
    }
  const std::size_t rows = columns.empty() ? 0 : columns.front()->size();
  for (std::size_t r = 0; r < rows; ++r)
    for (const Tensor<double>* column : columns) out.values.push_back(column->values()[r]);
  return out;
}

Shape tile_field_shape(TileAxis rows, TileAxis cols, std::size_t r, std::size_t c, const Problem& p) {
  const auto extent = [&](TileAxis a) -> std::size_t {
    switch (a) {
      case TileAxis::queries: return r;
      case TileAxis::keys: return c;
      case TileAxis::d_k: return p.d_k;
      case TileAxis::d_v: return p.d_v;
      case TileAxis::none: break;
    }
    return 0;
  };
  if (cols == TileAxis::none) return {extent(rows)};
  return {extent(rows), extent(cols)};
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
