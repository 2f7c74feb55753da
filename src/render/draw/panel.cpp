#include "render/draw/panel.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace attn {

namespace {

// Labels along one axis: tokens for the query and key axes; for features, "h1.0" (head 1, feature 0)
// where the columns of several heads sit side by side, so the split into heads is visible.
std::vector<std::string> axis_labels(const Problem& p, Step step, Axis axis, std::size_t b, std::size_t count) {
  std::vector<std::string> out;
  out.reserve(count);
  std::size_t heads = 1;
  if (step == Step::q || step == Step::concat) heads = p.h;
  if (step == Step::k || step == Step::v) heads = p.g;
  const std::size_t width = std::max<std::size_t>(1, count / heads);
  for (std::size_t i = 0; i < count; ++i) {
    switch (axis) {
      case Axis::query: out.push_back(p.tokens[b][i]); break;
      case Axis::key: out.push_back(p.context_tokens[b][i]); break;
      default: out.push_back(heads == 1 ? fmt::format("{}", i) : fmt::format("h{}.{}", i / width, i % width));
    }
  }
  return out;
}

}  // namespace

double Panel::row_sum(std::size_t r) const {
  double sum = 0;
  for (std::size_t c = 0; c < cols; ++c) sum += values[r * cols + c];
  return sum;
}

std::string kv_head_caption(const Problem& p, std::size_t kv) {
  if (p.g == p.h) return fmt::format("head {}", kv);
  const std::size_t group = p.h / p.g;
  return group == 1 ? fmt::format("kv head {}", kv)
                    : fmt::format("kv head {} (read by query heads {}–{})", kv, kv * group, kv * group + group - 1);
}

namespace {

// With sinks, a panel of the weights gains a last column "sink": each row's share of its head's sink
// (the trace's sink_weights), so that the row, sink and all, sums to 1. `head_index` is the position of
// the panel's head on the traced head axis.
void add_sink_column(const Trace& trace, Panel& panel, std::size_t head_index) {
  const StepRecord* sink = find_step(trace, Step::sink_weights);
  if (sink == nullptr || panel.cols == 0) return;
  const Tensor<double> share = with_batch_axis(sink->value, 3);  // (B, h, n)
  if (panel.batch >= share.dim(0) || head_index >= share.dim(1) || share.dim(2) != panel.rows) return;
  const std::size_t cols = panel.cols + 1;
  std::vector<double> values(panel.rows * cols);
  std::vector<unsigned char> removed(panel.removed.empty() ? 0 : panel.rows * cols, 0);
  for (std::size_t r = 0; r < panel.rows; ++r) {
    for (std::size_t c = 0; c < panel.cols; ++c) {
      values[r * cols + c] = panel.values[r * panel.cols + c];
      if (!removed.empty()) removed[r * cols + c] = panel.removed[r * panel.cols + c];
    }
    values[r * cols + panel.cols] = share(panel.batch, head_index, r);
  }
  panel.values = std::move(values);
  panel.removed = std::move(removed);
  panel.col_labels.emplace_back("sink");
  panel.cols = cols;
}

}  // namespace

std::vector<Panel> panels(const Trace& trace, const StepRecord& rec) {
  const Problem& p = *trace.problem;
  const StepInfo& info = step_info(rec.step);
  const Shape& shape = rec.value.shape();
  const std::size_t rank = shape.size();
  const std::size_t rows = rank >= 2 ? shape[rank - 2] : 1, cols = rank >= 1 ? shape[rank - 1] : 1;
  std::vector<Axis> axes = info.axes;
  if (p.batched) axes.insert(axes.begin(), Axis::feature);  // placeholder for the batch axis
  const Axis row_axis = rank >= 2 ? axes[rank - 2] : Axis::feature, col_axis = axes[rank - 1];
  const std::size_t outer_rank = rank >= 2 ? rank - 2 : 0;
  std::size_t outer = 1;
  for (std::size_t a = 0; a < outer_rank; ++a) outer *= shape[a];

  const bool after_mask = rec.step == Step::masked || rec.step == Step::weights || rec.step == Step::dropped;
  std::vector<Panel> out;
  for (std::size_t k = 0; k < outer; ++k) {
    Panel panel;
    panel.step = rec.step;
    // Unravel k into (batch?, head?).
    std::size_t rest = k, index_of_head = 0;
    bool has_head = false;
    for (std::size_t a = outer_rank; a-- > 0;) {
      const std::size_t index = rest % shape[a];
      rest /= shape[a];
      if (p.batched && a == 0) panel.batch = index;
      else {
        index_of_head = index;
        has_head = true;
        panel.kv = axes[a] == Axis::kv_head;
      }
    }
    if (has_head) panel.head = head_at(trace, panel.kv, index_of_head);
    if (p.batched) panel.caption = fmt::format("batch {}", panel.batch);
    if (panel.head) {
      if (!panel.caption.empty()) panel.caption += ", ";
      panel.caption += panel.kv ? kv_head_caption(p, *panel.head) : fmt::format("head {}", *panel.head);
    }
    panel.rows = rows;
    panel.cols = cols;
    const auto v = rec.value.values().subspan(k * rows * cols, rows * cols);
    panel.values.assign(v.begin(), v.end());
    panel.row_labels = axis_labels(p, rec.step, row_axis, panel.batch, rows);
    panel.col_labels = axis_labels(p, rec.step, col_axis, panel.batch, cols);
    if (after_mask && row_axis == Axis::query && col_axis == Axis::key && p.mask.kind != MaskKind::none) {
      panel.removed.assign(rows * cols, 0);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) panel.removed[i * cols + j] = p.mask.allows(panel.batch, i, j) ? 0 : 1;
    }
    if (rec.step == Step::weights) {
      panel.empty_row.assign(rows, false);
      for (const EmptyRow& e : trace.empty_rows)
        if (e.batch == panel.batch && e.query < rows) panel.empty_row[e.query] = true;
      add_sink_column(trace, panel, index_of_head);
    }
    out.push_back(std::move(panel));
  }
  return out;
}

std::vector<Panel> rotation_panels(const Problem& p, Step step) {
  if (!p.rope || (step != Step::q_rot && step != Step::k_rot)) return {};
  const Rope& r = *p.rope;
  const bool keys = step == Step::k_rot;
  const std::vector<double>& pos = keys ? r.context_positions : r.positions;
  const std::vector<std::string>& tokens = keys ? p.context_tokens[0] : p.tokens[0];
  std::vector<Panel> out;
  for (const bool sine : {false, true}) {
    const Tensor<double>& t = sine ? (keys ? r.sin_k : r.sin_q) : (keys ? r.cos_k : r.cos_q);
    Panel panel;
    panel.step = step;
    panel.caption = fmt::format("{}(pos·θ_i)", sine ? "sin" : "cos");
    panel.rows = t.dim(0);
    panel.cols = t.dim(1);
    panel.values.assign(t.values().begin(), t.values().end());
    for (std::size_t k = 0; k < panel.rows; ++k) panel.row_labels.push_back(fmt::format("{} @{}", tokens[k], pos[k]));
    for (std::size_t i = 0; i < panel.cols; ++i) panel.col_labels.push_back(fmt::format("i={}", i));
    out.push_back(std::move(panel));
  }
  return out;
}

namespace {

// The largest value each row kept (0 for a row the mask emptied).
std::vector<double> kept_row_max(const Panel& panel) {
  std::vector<double> out(panel.rows, 0.0);
  for (std::size_t r = 0; r < panel.rows; ++r)
    for (std::size_t c = 0; c < panel.cols; ++c)
      if (!panel.is_removed(r, c) && std::isfinite(panel.values[r * panel.cols + c]))
        out[r] = std::max(out[r], panel.values[r * panel.cols + c]);
  return out;
}

// automatic: the row scale when the rows' largest weights (of rows with any) differ by more than
// row_scale_ratio times, else one scale for all.
WeightScale resolve(WeightScale asked, const std::vector<const Panel*>& list) {
  if (asked != WeightScale::automatic) return asked;
  double least = INFINITY, most = 0;
  for (const Panel* panel : list)
    for (const double m : kept_row_max(*panel)) {
      if (!(m > 0)) continue;
      least = std::min(least, m);
      most = std::max(most, m);
    }
  return most > row_scale_ratio * least ? WeightScale::row : WeightScale::absolute;
}

// The log scale's ends: the largest kept value, and the smallest positive one, at most
// log_scale_decades below it.
ColorRange log_range(const std::vector<double>& kept) {
  double least = INFINITY, most = 0;
  for (const double x : kept) {
    if (!(x > 0) || !std::isfinite(x)) continue;
    least = std::min(least, x);
    most = std::max(most, x);
  }
  if (!(most > 0)) return {ColorScale::sequential, 0, 1, WeightScale::absolute};
  least = std::max(least, most * std::pow(10.0, -log_scale_decades));
  if (!(most > least)) least = most / 10;
  return {ColorScale::sequential, least, most, WeightScale::log};
}

}  // namespace

Shading::Shading(const Panel& panel, const ColorRange& range) : panel_(panel), range_(range) {
  if (range.weights == WeightScale::row) row_max_ = kept_row_max(panel);
}

double Shading::of(double x, std::size_t r) const {
  if (range_.weights != WeightScale::row) return range_.position(x);
  const double m = row_max_[r];
  return m > 0 ? range_.position(x / m) : 0.0;
}

Shading::Block Shading::block(std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) const {
  double shade = 0, value = 0;
  std::size_t kept = 0;
  for (std::size_t r = r0; r < r1; ++r)
    for (std::size_t c = c0; c < c1; ++c) {
      if (panel_.is_removed(r, c)) continue;
      shade += at(r, c);
      value += panel_.values[r * panel_.cols + c];
      ++kept;
    }
  if (kept == 0) return {0, 0, true};
  return {shade / static_cast<double>(kept), value / static_cast<double>(kept), false};
}

ColorRange panel_range(const std::vector<const Panel*>& list, WeightScale weights) {
  std::vector<double> kept;
  // A sequential map when no panel's values can be negative (the step table's value class), else a
  // diverging one about 0.
  bool nonnegative = true, probability = !list.empty();
  for (const Panel* panel : list) {
    nonnegative = nonnegative && step_info(panel->step).values != ValueClass::signed_value;
    probability = probability && step_info(panel->step).values == ValueClass::probability;
    for (std::size_t r = 0; r < panel->rows; ++r)
      for (std::size_t c = 0; c < panel->cols; ++c)
        if (!panel->is_removed(r, c)) kept.push_back(panel->values[r * panel->cols + c]);
  }
  if (probability) {
    const WeightScale scale = resolve(weights, list);
    if (scale == WeightScale::row) return {ColorScale::sequential, 0, 1, WeightScale::row};
    if (scale == WeightScale::log) return log_range(kept);
  }
  return color_range(kept.data(), kept.size(), nonnegative);
}

}  // namespace attn
