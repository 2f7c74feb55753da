// compare in the terminal: both outputs, their differences, the errors, the memory and the verdict.

#include "render/pages/trace/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "text/number.hpp"
#include "text/visible.hpp"

namespace attn::render_detail {

std::string Renderer::sci(double x) const { return significant_value(x, 3); }

// The outputs column by column, naive beside flash, then their differences, per batch item.
void Renderer::compare_outputs(const CompareRecord& c) {
  const std::size_t n = p_.n, d = p_.d_out;
  for (std::size_t b = 0; b < p_.B; ++b) {
    std::vector<double> both, diff;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) {
        const double naive = c.naive.values()[(b * n + i) * d + k], flash = c.flash.values()[(b * n + i) * d + k];
        both.push_back(naive);
        both.push_back(flash);
        diff.push_back(flash - naive);
      }
    std::vector<std::string> cols, diff_cols;
    for (std::size_t k = 0; k < d; ++k) {
      cols.push_back(fmt::format("naive {}", k));
      cols.push_back(fmt::format("flash {}", k));
      diff_cols.push_back(text(fmt::format("Δ {}", k)));
    }
    const std::string item = p_.batched ? fmt::format("batch {}", b) : "output";
    const auto rows = token_range(p_.tokens[b], 0, n);
    TableData outputs{both, n, 2 * d, rows, cols, item};
    outputs.group = 2;
    table(outputs);

    Panel difference;
    difference.step = Step::output;
    difference.batch = b;
    difference.caption = text("flash − naive");
    difference.rows = n;
    difference.cols = d;
    difference.values = diff;
    difference.row_labels = std::vector<std::string>(p_.tokens[b].begin(), p_.tokens[b].end());
    for (std::size_t k = 0; k < d; ++k) difference.col_labels.push_back(fmt::format("{}", k));
    const TableData diff_table{diff, n, d, rows, diff_cols, difference.caption, CellFormat::scientific};
    const bool heat = o_.view == View::heatmap || (o_.view == View::automatic && !layout(diff_table).whole);
    if (heat && n >= 2) heatmap(difference);
    else table(diff_table);
  }
}

void Renderer::compare_section() {
  if (!t_.compare) return;
  const CompareRecord& c = *t_.compare;
  line("");
  heading("compare");
  // A half type stores what float32 computes (docs/precision.md): say so, since the sums are not in it.
  const std::string engines_dtype = is_half(c.dtype) ? fmt::format("{} (each step stored in {}, summed in float32)",
                                                                   name_of(c.dtype), name_of(c.dtype))
                                                     : std::string(name_of(c.dtype));
  para(fmt::format("naive and flash in {} (tiles {} × {}) against a reference: naive attention in {} on the same "
                   "inputs, rounded to {}",
                   engines_dtype, c.tile_size.Br, c.tile_size.Bc, reference_name(c.dtype), name_of(c.dtype)),
       "");

  compare_outputs(c);

  line("");
  const auto stats_row = [&](std::string_view name, const ErrorStats& s) {
    line("  {}  {:>11}  {:>11}  {:>8}", pad_right(name, 14), sci(s.max_abs), sci(s.max_rel), s.max_ulp);
  };
  line("  {}  {:>11}  {:>11}  {:>8}", style_.faint(pad_right("", 14)), "max |error|", "max rel", "max ULP");
  stats_row("naive vs ref", c.naive_vs_ref);
  stats_row("flash vs ref", c.flash_vs_ref);
  stats_row("flash vs naive", c.flash_vs_naive);
  para(fmt::format("  A ULP (unit in the last place) is the gap between two neighbouring {} numbers of that size: "
                   "max ULP is how many such steps apart the two results are, at most.",
                   name_of(c.dtype)),
       "  ", /*faint=*/true);

  line("");
  line("  peak memory for scores and weights, as the engines counted it:");
  para(fmt::format("    naive  {:>12} bytes   (all n × m scores of every head, two buffers at a time)",
                   c.naive_peak_bytes),
       "                         ");
  para(fmt::format("    flash  {:>12} bytes   (one S tile and one P tile of at most {} × {})", c.flash_peak_bytes,
                   c.tile_size.Br, c.tile_size.Bc),
       "                         ");

  line("");
  const std::string rule_text =
      fmt::format("max|flash − ref| = {} {} 2·max|naive − ref| + noise = 2·{} + {} = {}", sci(c.flash_vs_ref.max_abs),
                  c.pass ? "<=" : ">", sci(c.naive_vs_ref.max_abs), sci(c.noise), sci(c.bound));
  if (!c.backward) {
    para(fmt::format("  {}  {}", c.pass ? style_.title("verdict: PASS") : style_.warning("verdict: FAIL"), rule_text),
         "    ");
    return;
  }
  para(fmt::format("  output: {}  {}", c.pass ? "pass" : "FAIL", rule_text), "    ");
  gradient_checks(c);
}

// compare --backward: one row per gradient that both engines form, each judged by its own rule.
void Renderer::gradient_checks(const CompareRecord& c) {
  line("");
  heading("compare --backward");
  para(fmt::format("each gradient judged as the output is: max|flash − ref| <= 2·max|naive − ref| + noise, the "
                   "noise floor scaling with the largest logit the softmax sees ({}): flash recomputes the weights "
                   "as exp(S − lse)",
                   sci(c.largest_logit)),
       "");
  line("");
  line("  {}  {:>11}  {:>11}  {:>11}  {:>11}  {}", pad_right("gradient", 14), "max |ref|", "naive err", "flash err",
       "bound", "");
  for (const GradientCheck& g : c.gradients)
    line("  {}  {:>11}  {:>11}  {:>11}  {:>11}  {}", pad_right(step_info(g.step).name, 14), sci(g.max_ref),
         sci(g.naive_vs_ref.max_abs), sci(g.flash_vs_ref.max_abs), sci(g.bound), g.pass ? "pass" : "FAIL");
  line("");
  const bool all = passes(c);
  const std::size_t failed = static_cast<std::size_t>(
      std::count_if(c.gradients.begin(), c.gradients.end(), [](const GradientCheck& g) { return !g.pass; }));
  const std::string summary =
      all ? fmt::format("the output and all {} gradients within their bounds", c.gradients.size())
          : fmt::format("{}{} of {} gradients over their bounds", c.pass ? "" : "the output and ", failed,
                        c.gradients.size());
  para(fmt::format("  {}  {}", all ? style_.title("verdict: PASS") : style_.warning("verdict: FAIL"), summary), "    ");
}

}  // namespace attn::render_detail
