#include "render/pages/properties_page.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "render/draw/page.hpp"
#include "render/draw/text.hpp"
#include "text/visible.hpp"
#include "text/number.hpp"

namespace attn {

namespace {

std::string figure(double x) { return x == 0 ? "0" : significant_value(x, 3); }  // -0 too

// One property as the table's cells: property, result, figure, tolerance, expected.
std::array<std::string, 5> cells(const PropertyCheck& c) {
  return {c.name, c.holds ? "holds" : "does not hold", figure(c.figure), figure(c.tolerance),
          c.expected ? "yes" : "no"};
}

}  // namespace

std::string render_properties(std::span<const PropertyCheck> checks, std::string_view title,
                              const RenderOptions& options) {
  Page out(options);
  out.paragraph(visible(title), "  ");
  out.line("");

  const std::array<std::string, 5> head = {"property", "result", "figure", "tolerance", "expected"};
  std::array<std::size_t, 5> widths{};
  for (std::size_t k = 0; k < head.size(); ++k) widths[k] = display_width(head[k]);
  for (const PropertyCheck& c : checks) {
    const auto row = cells(c);
    for (std::size_t k = 0; k < row.size(); ++k) widths[k] = std::max(widths[k], display_width(row[k]));
  }
  std::size_t total = 2 * (widths.size() - 1);
  for (const std::size_t w : widths) total += w;

  if (total <= options.width) {
    // The table: left-aligned words, right-aligned numbers.
    const auto table_row = [&](const std::array<std::string, 5>& row) {
      out.line(fmt::format("{:<{}}  {:<{}}  {:>{}}  {:>{}}  {:<{}}", row[0], widths[0], row[1], widths[1], row[2],
                           widths[2], row[3], widths[3], row[4], widths[4]));
    };
    table_row(head);
    for (const PropertyCheck& c : checks) table_row(cells(c));
    out.line("");
    for (const PropertyCheck& c : checks) out.paragraph(fmt::format("{}: {}", c.name, c.reason), "  ");
  } else {
    // Too narrow for the table: one block per property.
    for (const PropertyCheck& c : checks) {
      out.paragraph(
          fmt::format("{}: {}{}", c.name, c.holds ? "holds" : "does not hold", c.expected ? "" : " (not expected to)"),
          "  ");
      out.paragraph(fmt::format("  figure {}, tolerance {}", figure(c.figure), figure(c.tolerance)), "    ");
      out.paragraph(fmt::format("  {}", c.reason), "    ");
    }
  }

  out.line("");
  std::vector<std::string> failed;
  for (const PropertyCheck& c : checks)
    if (c.expected && !c.holds) failed.push_back(c.name);
  if (failed.empty()) out.paragraph("verdict: every property expected to hold holds", "  ");
  else out.paragraph(fmt::format("verdict: expected but does not hold: {}", fmt::join(failed, ", ")), "  ");
  return out.take();
}

}  // namespace attn
