// The HTML report (docs/report.md): the page around a trace's numbers. The plan (what the page holds
// within its budget) is made here; sections.cpp writes the parts that must read without scripts
// (formulas, meanings, shapes, small tables, the verdict), pipeline_svg.cpp the pipeline diagram,
// page_data.cpp the page's data as JSON, from which report.js draws the heatmaps and the tile walk.

#include "render/pages/report/report.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "render/draw/panel.hpp"
#include "render/pages/report/budget.hpp"
#include "render/pages/report/html.hpp"
#include "render/pages/report/page_data.hpp"
#include "render/pages/report/pipeline_svg.hpp"
#include "render/pages/report/plan.hpp"
#include "render/pages/report/report_assets.hpp"
#include "render/pages/report/sections.hpp"
#include "render/pages/report/writer.hpp"
#include "render/pages/trace/mistake_section.hpp"

namespace attn {

// The page's own pieces are report_detail's, as are those of the files beside it (a using-directive here
// would reach the files a unity build compiles after this one).
namespace report_detail {

namespace {

// The page's style: report.css, and with the backward pass report_backward.css after it.
std::string page_style(bool backward) {
  std::string css(report_css);
  if (backward) css += report_backward_css;
  return css;
}

// The page's script: report.js and report_walk.js, one closure over the two files, and with the
// backward pass report_backward.js inside it, before the line that ends it ("})();"), so that the
// backward walk draws with the same helpers and the forward page stays byte for byte what it was.
std::string page_script(bool backward) {
  std::string js = std::string(report_js) + std::string(report_walk_js);
  if (!backward) return js;
  const std::size_t end = js.rfind("})();");
  js.insert(end == std::string::npos ? js.size() : end, report_backward_js);
  return js;
}

// The report of one trace: first what the page will hold (the plan), then its JSON and its HTML.
class Report {
 public:
  Report(const Trace& trace, const ReportOptions& options) : t_(trace), p_(*trace.problem), o_(options) {
    // pass 1: flash's output minus naive's, when both ran (with flash alone, the output step is flash's own);
    // and with --mistake, the first step where the mistaken computation differs
    plan_difference();
    plan_mistake();
    // pass 2: which of the steps' heatmaps fit the page's budget
    plan_steps();
    // pass 3: which query tiles the tile walk holds, and which key tiles the backward walk holds
    plan_walk();
    plan_backward_walk();
  }

  std::string html() const {
    const ReportSections s(t_, o_, plan_);
    return fill_template(report_template, {{"nav", s.nav()},
                                           {"title", page_text(p_.description.empty() ? "attention" : p_.description)},
                                           {"description", page_text(p_.description)},
                                           {"config", config_line(t_)},
                                           {"tokens", s.tokens_html()},
                                           {"notes", s.notes_html()},
                                           {"pipeline", pipeline_svg(t_)},
                                           {"steps", s.step_sections()},
                                           {"flash", s.flash_section()},
                                           {"diff", s.diff_section() + s.decode_section()},
                                           {"backward", t_.backward ? s.backward_section() : std::string()},
                                           {"mistake", s.mistake_section()},
                                           {"generator", page_text(fmt::format("attn-trace {}", o_.version))},
                                           {"css", page_style(t_.backward)},
                                           {"js", page_script(t_.backward)},
                                           {"data", page_data(t_, o_, plan_)}});
  }

 private:
  void plan_difference() {
    const StepRecord* naive_output = nullptr;
    for (const StepRecord& rec : t_.steps)
      if (rec.step == Step::output && t_.engine == Engine::both) naive_output = &rec;
    if (!t_.flash || naive_output == nullptr || naive_output->value.shape() != t_.flash->output.shape()) return;
    // D = O_flash − O_naive
    const auto a = naive_output->value.values(), b = t_.flash->output.values();
    std::vector<double> d(a.size());
    for (std::size_t k = 0; k < a.size(); ++k) d[k] = b[k] - a[k];
    plan_.difference =
        StepRecord{Step::output, "D = O_flash − O_naive", "", Tensor<double>(naive_output->value.shape(), d)};
    plan_.diff_panels = panels(t_, *plan_.difference);
    for (const Panel& panel : plan_.diff_panels) plan_.diff_numbers += cells(panel);
    plan_.diff_embedded = plan_.diff_numbers <= o_.max_step_numbers / 4;
    for (const double x : d) plan_.max_diff = std::max(plan_.max_diff, std::fabs(x));
    plan_difference_map(a, d);
  }

  // The map of D in units that say whether it matters: compare's tolerance when the trace holds its
  // verdict (white within it, so that only a real disagreement has a colour), else the ULPs of the
  // working dtype at naive's value.
  void plan_difference_map(std::span<const double> naive, const std::vector<double>& d) {
    std::vector<double> units(d.size());
    if (t_.compare && t_.compare->bound > 0) {
      // Units of the verdict's tolerance: flash passes while max |flash − ref| <= bound.
      const double bound = t_.compare->bound;
      for (std::size_t k = 0; k < d.size(); ++k) units[k] = d[k] / bound;
      plan_.diff_neutral = 1;
      plan_.diff_unit = fmt::format(
          "flash − naive in units of compare's tolerance 2 · max |naive − ref| + noise = {}; white: within it "
          "(from −1 to 1)",
          short_number(bound));
    } else {
      // One ULP: the gap from naive's value to the next number of the working dtype.
      const bool single = t_.dtype != DType::float64;
      for (std::size_t k = 0; k < d.size(); ++k) {
        const double x = std::fabs(naive[k]);
        const double ulp =
            single ? static_cast<double>(std::nextafter(static_cast<float>(x), INFINITY) - static_cast<float>(x))
                   : std::nextafter(x, INFINITY) - x;
        units[k] = ulp > 0 && std::isfinite(ulp) ? d[k] / ulp : d[k];
      }
      plan_.diff_unit = fmt::format(
          "flash − naive in ULPs of {} at naive's value (compare's tolerance is not in "
          "this trace)",
          name_of(t_.dtype));
    }
    plan_.diff_map_panels = plan_.diff_panels;
    std::size_t at = 0;
    for (Panel& panel : plan_.diff_map_panels)
      for (double& v : panel.values) v = units[at++];
    // A difference is signed: blue-white-red about 0; at least the neutral band, so that a difference
    // within it is never a full colour.
    double reach = plan_.diff_neutral;
    for (const double u : units) reach = std::max(reach, std::fabs(u));
    plan_.diff_range = {ColorScale::diverging, -reach, reach};
  }

  // The panel (batch item and head) of the first differing step that holds the largest difference, as
  // intended and as mistaken, on one colour scale.
  void plan_mistake() {
    if (o_.mistake == nullptr) return;
    std::optional<DifferencePanels> shown = first_difference_panels(*o_.mistake);
    if (!shown) return;
    plan_.mistake_panels = {std::move(shown->intended), std::move(shown->mistaken)};
    const Panel& wrong = plan_.mistake_panels[1];
    for (Panel& p : plan_.mistake_panels) {
      p.caption =
          fmt::format("{}{}{}", p.caption, p.caption.empty() ? "" : ", ", &p == &wrong ? "mistaken" : "intended");
      p.head.reset();  // shown whichever head the page's selector shows
    }
    plan_.mistake_range = panel_range({&plan_.mistake_panels[0], &plan_.mistake_panels[1]});
    plan_.mistake_numbers = 2 * cells(plan_.mistake_panels[0]);
    plan_.mistake_embedded = plan_.mistake_numbers <= o_.max_step_numbers / 4;
  }

  void plan_steps() {
    for (const StepRecord& rec : t_.steps) {
      StepView view;
      view.rec = &rec;
      const std::vector<Panel> all = panels(t_, rec);
      std::vector<const Panel*> list;
      for (const Panel& panel : all) {
        view.panels.push_back({panel.head, cells(panel)});
        list.push_back(&panel);
        view.removed = view.removed ||
                       std::any_of(panel.removed.begin(), panel.removed.end(), [](unsigned char r) { return r != 0; });
      }
      view.embedded.assign(all.size(), false);
      view.range = panel_range(list, o_.weight_scale);
      constexpr std::size_t tables_shown = 4;
      for (std::size_t k = 0; k < all.size() && k < tables_shown; ++k)
        view.tables += static_table(all[k], o_.table_size);
      if (all.size() > tables_shown)
        view.tables += note(fmt::format("The tables show the first {} of {} heatmaps.", tables_shown, all.size()));
      plan_.views.push_back(std::move(view));
    }
    plan_heatmaps(plan_.views, o_.max_step_numbers - (plan_.diff_embedded ? plan_.diff_numbers : 0) -
                                   (plan_.mistake_embedded ? plan_.mistake_numbers : 0));
    std::size_t left_out = 0;
    for (const StepView& view : plan_.views) left_out += view.left_out();
    if (left_out > 0)
      plan_.notes.push_back(fmt::format(
          "This trace is large: {} of its heatmaps are not in this page, which holds at most {} of the steps' "
          "numbers (each step says which). <code>--head H</code> or <code>--steps</code> make a smaller trace that "
          "fits whole.",
          left_out, thousands(o_.max_step_numbers)));
  }

  // Whole query tiles, in the engine's order, while they fit.
  void plan_walk() {
    if (!t_.flash) return;
    std::vector<QueryTile> all = query_tiles(*t_.flash);
    plan_.query_tiles_total = all.size();
    std::size_t numbers = 0, tiles = 0;
    for (QueryTile& q : all) {
      if (numbers + q.numbers() > o_.max_tile_numbers || tiles + q.tiles.size() > o_.max_tiles) break;
      numbers += q.numbers();
      tiles += q.tiles.size();
      plan_.walk.push_back(std::move(q));
    }
    if (plan_.walk.size() < plan_.query_tiles_total)
      plan_.notes.push_back(fmt::format(
          "The tile walk holds the first {} of the {} query tiles (at most {} tiles and {} numbers); "
          "<code>--head H</code>, or larger <code>--block-q</code>/<code>--block-k</code>, walk others.",
          plan_.walk.size(), plan_.query_tiles_total, thousands(o_.max_tiles), thousands(o_.max_tile_numbers)));
  }

  // Whole key tiles of the backward pass, in the engine's order, while they fit: the walk's own budget,
  // as large as the forward's.
  void plan_backward_walk() {
    if (!t_.flash_backward) return;
    std::vector<KeyTile> all = key_tiles(*t_.flash_backward);
    plan_.key_tiles_total = all.size();
    std::size_t numbers = 0, tiles = 0;
    for (KeyTile& k : all) {
      if (numbers + k.numbers() > o_.max_tile_numbers || tiles + k.tiles.size() > o_.max_tiles) break;
      numbers += k.numbers();
      tiles += k.tiles.size();
      plan_.backward_walk.push_back(std::move(k));
    }
    if (plan_.backward_walk.size() < plan_.key_tiles_total)
      plan_.notes.push_back(fmt::format(
          "The backward tile walk holds the first {} of the {} key tiles (at most {} tiles and {} numbers); "
          "<code>--head H</code>, or larger <code>--block-q</code>/<code>--block-k</code>, walk others.",
          plan_.backward_walk.size(), plan_.key_tiles_total, thousands(o_.max_tiles), thousands(o_.max_tile_numbers)));
  }

  const Trace& t_;
  const Problem& p_;
  const ReportOptions& o_;
  ReportPlan plan_;
};

}  // namespace

}  // namespace report_detail

std::string report_html(const Trace& trace, const ReportOptions& options) {
  return report_detail::Report(trace, options).html();
}

}  // namespace attn
