// run --mistake in the terminal (render/mistakes.hpp): the steps compared, the first difference side by
// side, the costs.

#include "render/pages/trace/mistake_section.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "text/number.hpp"
#include "render/draw/page.hpp"
#include "render/pages/trace/renderer.hpp"
#include "text/visible.hpp"

namespace attn::render_detail {

std::string Renderer::mistake_page(const MistakeResult& r) {
  const MistakeInfo& info = mistake_info(r.mistake);
  header();
  line("");
  heading(fmt::format("mistake: {}", info.name));
  para(info.summary, "");
  line("");
  para(fmt::format("  {} {}", style_.faint("intended"), style_.formula(text(info.intended))), "           ");
  para(fmt::format("  {} {}", style_.faint("mistaken"), style_.formula(text(info.mistaken))), "           ");
  line("");
  para(info.why, "");
  mistake_steps(r);
  if (r.shown.empty()) mistake_first_difference(r);
  for (const Step step : r.shown) mistake_shown(r, step);
  mistake_costs(r);
  return std::move(out_);
}

std::string Renderer::query_label(std::size_t batch, std::size_t head, std::size_t index, bool key) const {
  const auto& tokens = key && p_.cross ? p_.context_tokens : p_.tokens;
  std::string s;
  if (p_.batched) s += fmt::format("b{} ", batch);
  if (p_.h > 1) s += fmt::format("h{} ", head);
  return s + label(tokens[batch][index]);
}

void Renderer::mistake_steps(const MistakeResult& r) {
  line("");
  heading("step by step");
  para(fmt::format("the largest |intended − mistaken| of {}, in the order they are computed{}:",
                   r.shown.empty() ? "each step" : "each step asked for",
                   r.head ? fmt::format(", in head {}", *r.head) : std::string()),
       "");
  line("");
  std::size_t name_width = 0;
  const auto listed = [&](Step step) {
    return r.shown.empty() || std::find(r.shown.begin(), r.shown.end(), step) != r.shown.end();
  };
  for (const StepDifference& d : r.steps)
    if (listed(d.step)) name_width = std::max(name_width, step_info(d.step).name.size());
  for (const StepDifference& d : r.steps) {
    if (!listed(d.step)) continue;
    const std::string name = pad_right(step_info(d.step).name, name_width);
    std::string what;
    if (!d.same_shape) what = fmt::format("shapes differ: {} and {}", d.intended_shape, d.mistaken_shape);
    else what = d.differs() ? sci(d.max_abs) : "0 (identical)";
    const bool first = r.first_difference && *r.first_difference == d.step;
    const std::string note = first ? style_.warning("  <- first difference") : "";
    line("  {}  {}{}", name, d.differs() ? what : style_.faint(what), note);
  }
}

void Renderer::mistake_first_difference(const MistakeResult& r) {
  line("");
  if (!r.first_difference) {
    heading("first difference: none");
    para("every step of the mistaken computation is exactly the intended one on this input (see why below)", "");
    return;
  }
  const Step step = *r.first_difference;
  const StepDifference& d = *first_difference_of(r);
  heading(fmt::format("first difference: {}", step_info(step).name));
  mistake_formulas(r, step);
  if (!d.same_shape) {
    para(fmt::format("the mistaken {} has shape {} where the intended one has {}", step_info(step).name,
                     d.mistaken_shape, d.intended_shape),
         "");
    return;
  }
  mistake_largest(d);
  mistake_panels(r, step);
}

void Renderer::mistake_shown(const MistakeResult& r, Step step) {
  const auto d = std::find_if(r.steps.begin(), r.steps.end(), [&](const StepDifference& x) { return x.step == step; });
  line("");
  heading(fmt::format("{}: intended beside mistaken", step_info(step).name));
  if (d == r.steps.end()) {
    para(fmt::format("the mistaken computation has no step {}", step_info(step).name), "");
    return;
  }
  mistake_formulas(r, step);
  if (!d->same_shape) {
    para(fmt::format("the mistaken {} has shape {} where the intended one has {}", step_info(step).name,
                     d->mistaken_shape, d->intended_shape),
         "");
    return;
  }
  if (d->differs()) mistake_largest(*d);
  else para("identical: the mistake does not change this step on this input", "");
  mistake_panels(r, step);
}

void Renderer::mistake_formulas(const MistakeResult& r, Step step) {
  const StepRecord& a = *find_step(r.intended, step);
  const StepRecord& b = *find_step(r.mistaken, step);
  para(fmt::format("  {} {}", style_.faint("intended"), style_.formula(text(visible(a.formula)))), "           ");
  para(fmt::format("  {} {}", style_.faint("mistaken"), style_.formula(text(visible(b.formula)))), "           ");
}

void Renderer::mistake_largest(const StepDifference& d) {
  const std::vector<std::string> dims = dim_names(d.step, p_.batched);
  std::vector<std::string> where;
  for (std::size_t k = 0; k < d.at.size() && k < dims.size(); ++k) {
    // A trace cut to one head holds it at position 0 of its head axis.
    const bool head_axis = dims[k] == "head" || dims[k] == "kv_head";
    where.push_back(fmt::format("{} {}", dims[k], head_axis ? head_at(t_, dims[k] == "kv_head", d.at[k]) : d.at[k]));
  }
  para(fmt::format("the largest difference is at [{}]: {} intended, {} mistaken", fmt::join(where, ", "),
                   format_value(d.intended, o_.precision), format_value(d.mistaken, o_.precision)),
       "");
}

// The panel (batch item and head) that holds the step's largest difference, intended column beside
// mistaken column.
void Renderer::mistake_panels(const MistakeResult& r, Step step) {
  std::optional<DifferencePanels> shown = difference_panels(r, step);
  if (!shown) return;
  const Panel& pa = shown->intended;
  Panel& pb = shown->mistaken;
  pb.caption = text(fmt::format("{} (mistaken)", pb.caption.empty() ? std::string("values") : pb.caption));

  std::vector<double> both;
  std::vector<unsigned char> removed;
  for (std::size_t i = 0; i < pa.rows; ++i)
    for (std::size_t c = 0; c < pa.cols; ++c) {
      both.push_back(pa.values[i * pa.cols + c]);
      both.push_back(pb.values[i * pb.cols + c]);
      removed.push_back(step == Step::weights && pa.is_removed(i, c) ? 1 : 0);
      removed.push_back(0);
    }
  std::vector<std::string> cols;
  for (const std::string& c : labels(pa.col_labels)) {
    cols.push_back(fmt::format("{} ok", c));
    cols.push_back(fmt::format("{} bad", c));
  }
  TableData data{both, pa.rows, 2 * pa.cols, labels(pa.row_labels), cols, text(pa.caption)};
  data.group = 2;
  if (step == Step::weights) data.removed = removed;
  bool heat = o_.view == View::heatmap;
  if (o_.view == View::automatic) heat = pa.rows >= 2 && pa.cols >= 2 && !layout(data).whole;
  if (heat) {
    Panel shown_a = pa;
    shown_a.caption = text(fmt::format("{} (intended)", pa.caption.empty() ? std::string("values") : pa.caption));
    heatmap(shown_a);
    heatmap(pb);
    return;
  }
  para("each column twice: \"ok\" as intended, \"bad\" with the mistake", "", /*faint=*/true);
  table(data);
}

void Renderer::mistake_costs(const MistakeResult& r) {
  line("");
  heading("what it costs, measured");
  for (const std::string& f : r.findings) para(fmt::format("{} {}", o_.unicode ? "•" : "-", visible(f)), "  ");
  for (const CostTable& t : r.costs) {
    if (t.rows.empty()) continue;
    line("");
    para(t.title, "");
    std::vector<double> values;
    std::vector<std::string> rows, cols;
    for (const std::string& m : t.measures) {
      cols.push_back(text(fmt::format("{} ok", m)));
      cols.push_back(text(fmt::format("{} bad", m)));
    }
    for (const CostRow& row : t.rows) {
      rows.push_back(query_label(row.batch, row.head, row.index, t.by_key));
      for (std::size_t k = 0; k < t.measures.size(); ++k) {
        values.push_back(row.intended[k]);
        values.push_back(row.mistaken[k]);
      }
    }
    TableData data{values, t.rows.size(), cols.size(), rows, cols, t.by_key ? "key" : "query"};
    data.group = 2;
    table(data);
  }
}

}  // namespace attn::render_detail

namespace attn {

std::optional<DifferencePanels> first_difference_panels(const MistakeResult& r) {
  return r.first_difference ? difference_panels(r, *r.first_difference) : std::nullopt;
}

std::optional<DifferencePanels> difference_panels(const MistakeResult& r, Step step) {
  const auto d = std::find_if(r.steps.begin(), r.steps.end(), [&](const StepDifference& x) { return x.step == step; });
  if (d == r.steps.end() || !d->same_shape) return std::nullopt;
  std::vector<Panel> a = panels(r.intended, *find_step(r.intended, d->step));
  std::vector<Panel> b = panels(r.mistaken, *find_step(r.mistaken, d->step));
  const std::size_t k = std::min(d->flat / std::max<std::size_t>(a.front().rows * a.front().cols, 1), a.size() - 1);
  DifferencePanels out{std::move(a[k]), std::move(b[k])};
  out.mistaken.removed.clear();  // the mistaken numbers as they are, whatever the mask meant them to be
  out.mistaken.empty_row.clear();
  return out;
}

std::string render_mistake(const MistakeResult& result, const RenderOptions& options) {
  return render_detail::Renderer(result.intended, options).mistake_page(result);
}

std::string render_mistake_list(const RenderOptions& options) {
  Page page(options);
  std::size_t width = 0;
  for (const MistakeInfo& m : all_mistakes()) width = std::max(width, m.name.size());
  const std::string indent(width + 4, ' ');
  for (const MistakeInfo& m : all_mistakes())
    page.paragraph(fmt::format("  {:<{}}  {}", m.name, width, m.summary), indent);
  return page.take();
}

}  // namespace attn
