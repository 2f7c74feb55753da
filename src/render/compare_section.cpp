// compare in the terminal: both outputs, their differences, the errors, the memory and the verdict.

#include "render/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "render/number.hpp"
#include "render/visible.hpp"

namespace attn::render_detail {

void Renderer::compare_section() {
  if (!t_.compare) return;
  const CompareRecord& c = *t_.compare;
  line("");
  heading("compare");
  line(
      "naive and flash in {} (tiles {} × {}) against a reference: naive attention in {} on the same inputs, "
      "rounded to {}",
      name_of(c.dtype), c.tile_size.Br, c.tile_size.Bc, reference_name(c.dtype), name_of(c.dtype));

  // The outputs side by side, then their differences, per batch item.
  const std::size_t B = p_.B, n = p_.n, d = p_.d_out;
  for (std::size_t b = 0; b < B; ++b) {
    std::vector<double> both;
    std::vector<double> diff;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < d; ++k) both.push_back(c.naive.values()[(b * n + i) * d + k]);
      for (std::size_t k = 0; k < d; ++k) both.push_back(c.flash.values()[(b * n + i) * d + k]);
      for (std::size_t k = 0; k < d; ++k)
        diff.push_back(c.flash.values()[(b * n + i) * d + k] - c.naive.values()[(b * n + i) * d + k]);
    }
    std::vector<std::string> cols;
    for (std::size_t k = 0; k < d; ++k) cols.push_back(fmt::format("naive {}", k));
    for (std::size_t k = 0; k < d; ++k) cols.push_back(fmt::format("flash {}", k));
    const std::string item = p_.batched ? fmt::format("batch {}", b) : "output";
    const auto rows = token_range(p_.tokens[b], 0, n);
    table(both, n, 2 * d, rows, cols, item);
    std::vector<std::string> diff_cols;
    for (std::size_t k = 0; k < d; ++k) diff_cols.push_back(fmt::format("Δ {}", k));
    table(diff, n, d, rows, diff_cols, "flash − naive", CellFormat::scientific);
  }

  line("");
  const auto stats_row = [&](std::string_view name, const ErrorStats& s) {
    line("  {}  {:>12}  {:>12}  {:>8}", pad_right(name, 16), sci(s.max_abs), sci(s.max_rel), s.max_ulp);
  };
  line("  {}  {:>12}  {:>12}  {:>8}", style_.faint(pad_right("", 16)), "max |error|", "max rel", "max ULP");
  stats_row("naive vs ref", c.naive_vs_ref);
  stats_row("flash vs ref", c.flash_vs_ref);
  stats_row("flash vs naive", c.flash_vs_naive);

  line("");
  line("  peak memory for scores and weights, as the engines counted it:");
  line("    naive  {:>12} bytes   (all n × m scores of every head, two buffers at a time)", c.naive_peak_bytes);
  line("    flash  {:>12} bytes   (one S tile and one P tile of at most {} × {})", c.flash_peak_bytes, c.tile_size.Br,
       c.tile_size.Bc);

  line("");
  const std::string rule_text =
      fmt::format("max|flash − ref| = {} {} 2·max|naive − ref| + noise = 2·{} + {} = {}", sci(c.flash_vs_ref.max_abs),
                  c.pass ? "<=" : ">", sci(c.naive_vs_ref.max_abs), sci(c.noise), sci(c.bound));
  line("  {}  {}", c.pass ? style_.title("verdict: PASS") : style_.warning("verdict: FAIL"), rule_text);
}

}  // namespace attn::render_detail
