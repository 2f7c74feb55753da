#include "render/pages/diff_page.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "text/number.hpp"
#include "render/draw/page.hpp"
#include "render/draw/text.hpp"
#include "text/visible.hpp"

namespace attn {

namespace {

constexpr std::size_t label_columns = 12;  // token labels in the window are cut to this

std::string error_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return "inf";
  if (x == 0) return "0";
  return fmt::format("{:.2e}", x);
}

// `text` padded with spaces to `width` display columns (cut to it when longer).
std::string pad(std::string_view text, std::size_t width) {
  std::string t = display_width(text) > width ? truncate_to(text, width) : std::string(text);
  return t + std::string(width - std::min(width, display_width(t)), ' ');
}

std::string verdict_text(const StepJudgement& j) {
  switch (j.verdict) {
    case Verdict::agrees: return "agrees";
    case Verdict::differs: return fmt::format("DIFFERS ({} values)", j.out_of_tolerance);
    case Verdict::follows: return fmt::format("follows {}", step_info(*j.follows).name);
  }
  return "";
}

void steps_table(Page& page, const DiffResult& r) {
  std::size_t source_width = 9;
  for (const StepJudgement& j : r.steps) source_width = std::max(source_width, display_width(visible(j.source)));
  source_width = std::min<std::size_t>(source_width, 28);
  std::size_t verdict_width = 7;
  for (const StepJudgement& j : r.steps) verdict_width = std::max(verdict_width, display_width(verdict_text(j)));
  if (std::size_t{12 + 1 + 3 * 10} + source_width + verdict_width > page.options().width) {
    // Too narrow for the table: each step on a line of its own, its figures under it.
    for (const StepJudgement& j : r.steps) {
      page.line(fmt::format("{}: {}", step_info(j.step).name, verdict_text(j)));
      page.paragraph(
          fmt::format("  {}, max |Δ| {}, max rel {}, tolerance {}", visible(j.source), error_text(j.judged_max_abs),
                      error_text(j.judged_max_rel), error_text(j.judged_tolerance)),
          "  ");
    }
    return;
  }
  page.line(fmt::format("{} {} {} {} {} {}", pad("step", 12), pad("dumped as", source_width), pad("max |Δ|", 9),
                        pad("max rel", 9), pad("tolerance", 9), "verdict"));
  for (const StepJudgement& j : r.steps)
    page.line(fmt::format("{} {} {} {} {} {}", pad(step_info(j.step).name, 12), pad(visible(j.source), source_width),
                          pad(error_text(j.judged_max_abs), 9), pad(error_text(j.judged_max_rel), 9),
                          pad(error_text(j.judged_tolerance), 9), verdict_text(j)));
}

void window(Page& page, const Divergence& d, int precision) {
  const DivergenceWindow& w = d.window;
  const std::size_t cell = static_cast<std::size_t>(std::clamp(precision, 0, 12)) + 7;
  const std::size_t prefix = 2 + label_columns + 6;
  // As many columns as the width holds, keeping the one of the divergence.
  const std::size_t fit =
      std::max<std::size_t>(1, (page.options().width - std::min(page.options().width, prefix)) / (cell + 1));
  const std::size_t at =
      static_cast<std::size_t>(std::find(w.cols.begin(), w.cols.end(), d.index.back()) - w.cols.begin());
  std::size_t first = 0, last = w.cols.size();
  while (last - first > fit) {
    if (at - first > last - 1 - at) ++first;
    else --last;
  }
  std::string head =
      pad(w.row_axis.empty() ? w.col_axis : fmt::format("{} \\ {}", w.row_axis, w.col_axis), label_columns + 6);
  for (std::size_t c = first; c < last; ++c) head += fmt::format(" {}", pad(visible(w.col_labels[c]), cell));
  page.line(fmt::format("  {}", head));
  for (std::size_t r = 0; r < w.rows.size(); ++r) {
    const bool at_row = d.index.size() < 2 || w.rows[r] == d.index[d.index.size() - 2];  // a bias's: one row
    for (const bool ours : {true, false}) {
      std::string line =
          fmt::format("{}{}", pad(ours ? visible(w.row_labels[r]) : "", label_columns), ours ? " ours " : " dump ");
      for (std::size_t c = first; c < last; ++c) {
        const double x = ours ? w.ours[r][c] : w.dumped[r][c];
        const bool here = at_row && c == at;
        line +=
            fmt::format(" {}", pad(fmt::format("{}{}", format_value(x, precision), here && !ours ? " ←" : ""), cell));
      }
      page.line(fmt::format("  {}", line));
    }
  }
}

}  // namespace

std::string render_diff(const DiffResult& r, std::string_view title, const RenderOptions& options) {
  Page page(options);
  page.heading(fmt::format("attn-trace diff: {}", visible(title)));
  page.paragraph(fmt::format(
      "Ours is computed in {}{}. Each dumped step is judged against ours computed from the dump's own earlier "
      "steps; a step right given them but not given the input follows the earlier step that is wrong. A row's "
      "max |Δ|, max rel and tolerance are what its verdict was judged by, against the exact value: a value over "
      "the tolerance is a step that does not agree.",
      name_of(r.dtype),
      is_half(r.dtype)
          ? fmt::format(": the inputs and every stored step rounded to {}, sums in float32", name_of(r.dtype))
          : ""));
  page.line();
  steps_table(page, r);
  for (const std::string& note : r.notes) page.paragraph(fmt::format("note: {}", visible(note)), "  ");
  page.line();
  if (!r.first) {
    page.line(fmt::format("Every dumped step agrees with ours within tolerance ({} step{}).", r.steps.size(),
                          r.steps.size() == 1 ? "" : "s"));
    return page.take();
  }
  const Divergence& d = *r.first;
  page.heading(fmt::format("first divergence: {}", step_info(d.step).name));
  std::vector<std::string> where;
  for (std::size_t a = 0; a < d.index.size(); ++a) {
    const std::string number = std::to_string(d.index[a]);
    where.push_back(d.labels[a] == number ? fmt::format("{} {}", d.axes[a], number)
                                          : fmt::format("{} {} ({})", d.axes[a], visible(d.labels[a]), number));
  }
  page.paragraph(
      fmt::format("At {}: ours {}, the dump {} (tolerance {}). {} of {} values are out of tolerance.",
                  fmt::join(where, ", "), format_value(d.ours, options.precision),
                  format_value(d.dumped, options.precision), error_text(d.tolerance), d.out_of_tolerance, d.elements),
      "  ");
  page.line();
  window(page, d, options.precision);
  page.line();
  page.heading("diagnosis");
  if (d.diagnosis.empty() && is_gradient_step(d.step))
    page.paragraph(
        "No known mistake reproduces the dump here (the GQA sum, the scale, the softmax's backward and its axis, "
        "transposes, precision). Compare the window above with the formula of this step.",
        "  ");
  else if (d.diagnosis.empty())
    page.paragraph(
        "No known mistake reproduces the dump here (scale, transposes, softmax axis, mask, alignment, head split, "
        "large negatives, precision). Compare the window above with the formula of this step.",
        "  ");
  for (const Diagnosis& g : d.diagnosis) {
    std::string finding = g.finding;
    if (!finding.empty() && finding[0] >= 'a' && finding[0] <= 'z')
      finding[0] = static_cast<char>(finding[0] - 'a' + 'A');
    page.paragraph(fmt::format("{} ({}): {}.", to_string(g.code), g.mistake, finding), "  ");
  }
  return page.take();
}

}  // namespace attn
