#include "render/pages/report/budget.hpp"

namespace attn::report_detail {

void plan_heatmaps(std::vector<StepView>& views, std::size_t budget) {
  std::size_t used = 0;
  const auto take = [&](StepView& view, std::size_t k) {
    if (view.embedded[k] || used + view.panels[k].cells > budget) return;
    view.embedded[k] = true;
    used += view.panels[k].cells;
  };
  const auto first_head = [&](StepView& view) {
    std::optional<std::size_t> first;
    for (const PanelSize& p : view.panels)
      if (p.head) first = std::min(first.value_or(*p.head), *p.head);
    for (std::size_t k = 0; k < view.panels.size(); ++k)
      if (!view.panels[k].head || view.panels[k].head == first) take(view, k);
  };
  for (StepView& view : views)
    if (view.rec->step == Step::weights) first_head(view);
  for (StepView& view : views) first_head(view);
  for (StepView& view : views)
    if (view.rec->step == Step::weights)
      for (std::size_t k = 0; k < view.panels.size(); ++k) take(view, k);
  for (StepView& view : views)
    for (std::size_t k = 0; k < view.panels.size(); ++k) take(view, k);
}

std::vector<QueryTile> query_tiles(const FlashRecord& f) {
  std::vector<QueryTile> out;
  for (const FlashTile& t : f.tiles) {
    if (out.empty() || out.back().batch != t.batch || out.back().head != t.head || out.back().i != t.i)
      out.push_back({t.batch, t.head, t.i, t.row_begin, t.row_end, {}, nullptr});
    out.back().tiles.push_back(&t);
  }
  for (const FlashFinal& done : f.finals)
    for (QueryTile& q : out)
      if (q.batch == done.batch && q.head == done.head && q.i == done.i) q.final = &done;
  return out;
}

std::vector<KeyTile> key_tiles(const FlashBackwardRecord& f) {
  std::vector<KeyTile> out;
  for (const FlashBackwardTile& t : f.tiles) {
    if (out.empty() || out.back().batch != t.batch || out.back().head != t.head || out.back().j != t.j)
      out.push_back({t.batch, t.head, t.j, t.col_begin, t.col_end, {}});
    out.back().tiles.push_back(&t);
  }
  return out;
}

}  // namespace attn::report_detail
