#include "trace/trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ops/attention.hpp"

namespace attn {

namespace {

// "0…4", or the list when the positions do not count up by one: "5, 6, 9".
std::string positions_text(const std::vector<double>& pos) {
  bool counting = true;
  for (std::size_t t = 1; t < pos.size() && counting; ++t) counting = pos[t] == pos[t - 1] + 1;
  if (counting && pos.size() > 2) return fmt::format("{}…{}", pos.front(), pos.back());
  return fmt::format("{}", fmt::join(pos, ", "));
}

// "q_rot = RoPE(q, pos): pairs (i, i + 2) turn by pos·θ_i, θ_i = 10000^(-2i/4), pos = 0…2".
std::string rope_formula(const Problem& p, bool keys) {
  const Rope& r = *p.rope;
  const std::string pairs = r.style == RopeStyle::half ? fmt::format("(i, i + {})", r.dims / 2) : "(2i, 2i + 1)";
  const std::string rest =
      r.dims < p.d_k ? fmt::format("; features {}…{} pass through", r.dims, p.d_k - 1) : std::string();
  return fmt::format("{} = RoPE({}, pos): pairs {} turn by pos·θ_i, θ_i = {}^(-2i/{}), pos = {}{}",
                     keys ? "k_rot" : "q_rot", keys ? "k" : "q", pairs, r.theta, r.dims,
                     positions_text(keys ? r.context_positions : r.positions), rest);
}

}  // namespace

std::string step_formula(Step step, const Problem& p) {
  const auto plus_bias = [](const std::vector<double>& b, std::string_view name) {
    return b.empty() ? std::string() : fmt::format(" + {}", name);
  };
  const std::string_view source = p.cross ? "C" : "X";
  switch (step) {
    case Step::q: return fmt::format("Q = X·W_q{}", plus_bias(p.b_q, "b_q"));
    case Step::k: return fmt::format("K = {}·W_k{}", source, plus_bias(p.b_k, "b_k"));
    case Step::v: return fmt::format("V = {}·W_v{}", source, plus_bias(p.b_v, "b_v"));
    case Step::scaled: return p.scale_given ? fmt::format("S' = S · {}", p.scale) : fmt::format("S' = S / √{}", p.d_k);
    case Step::q_rot: return rope_formula(p, false);
    case Step::k_rot: return rope_formula(p, true);
    case Step::bias:
      return fmt::format("S' + B, B[i][j] = -m_h·(pos_i - pos_j), m = {:.4g}{}, pos_i = {}, pos_j = {}",
                         fmt::join(p.alibi->slopes, ", "), p.alibi->standard ? " (ALiBi's standard slopes)" : "",
                         positions_text(p.alibi->query_positions), positions_text(p.alibi->key_positions));
    case Step::masked: {
      const std::string_view before = p.alibi ? "S' + B" : "S'";
      return p.mask.kind == MaskKind::none
                 ? fmt::format("S'' = {} (mask: none)", before)
                 : fmt::format("S'' = {} where allowed, -inf elsewhere (mask: {})", before, p.mask.summary());
    }
    case Step::output:
      return p.has_output_projection() ? fmt::format("Y = O·W_o{}", plus_bias(p.b_o, "b_o"))
                                       : "Y = O (no W_o: the output is the merged heads)";
    default: return std::string(step_info(step).formula);
  }
}

namespace {

// How many query rows (over every batch item) the mask leaves with no key to attend.
std::size_t rows_the_mask_empties(const Problem& p) {
  if (p.mask.kind == MaskKind::none) return 0;
  std::size_t empty = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      const auto [first, last] = p.mask.band(i);
      bool any = false;
      for (std::size_t j = first; j < last && !any; ++j) any = p.mask.allows(b, i, j);
      if (!any) ++empty;
    }
  return empty;
}

}  // namespace

std::string step_description(Step step, const Problem& p) {
  if (step == Step::weights)
    if (const std::size_t empty = rows_the_mask_empties(p); empty != 0)
      return fmt::format(
          "how much each query attends to each key: every row is ≥ 0 and sums to 1, except the {} row{} that the mask "
          "left with no key, whose weights are all 0",
          empty, empty == 1 ? "" : "s");
  if (step == Step::output && !p.has_output_projection())
    return "the result: the merged heads as they are, since the input has no output projection";
  if (step == Step::masked && p.mask.kind == MaskKind::none)
    return p.alibi ? "no mask: every query may see every key, so this is the biased scores unchanged"
                   : "no mask: every query may see every key, so this is the scaled scores unchanged";
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
