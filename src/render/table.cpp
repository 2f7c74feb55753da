// The one table printer of the terminal trace, and the helpers that lay out its cells.

#include "render/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "render/number.hpp"
#include "render/visible.hpp"

namespace attn::render_detail {

std::vector<std::size_t> shown(std::size_t count, std::size_t limit) {
  std::vector<std::size_t> out;
  if (limit == 0 || count <= limit) {
    for (std::size_t i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  const std::size_t head = (limit + 1) / 2, tail = limit / 2;
  for (std::size_t i = 0; i < head; ++i) out.push_back(i);
  out.push_back(count);  // the gap
  for (std::size_t i = count - tail; i < count; ++i) out.push_back(i);
  return out;
}

std::string label_text(std::string_view token) { return truncate_to(visible(token), label_width); }

std::string pad_left(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  return std::string(width > w ? width - w : 0, ' ') + std::string(s);
}
std::string pad_right(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  return std::string(s) + std::string(width > w ? width - w : 0, ' ');
}

std::string Renderer::cell(double x, CellFormat format) const {
  return format == CellFormat::fixed ? format_value(x, o_.precision) : sci(x);
}

void Renderer::table(std::span<const double> v, std::size_t rows, std::size_t cols,
                     const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                     const std::string& caption, CellFormat format) {
  const std::vector<std::size_t> rs = shown(rows, o_.max_rows), cs = shown(cols, o_.max_cols);

  // Column widths: the widest of the label and every shown value.
  std::vector<std::size_t> width(cs.size(), 1);
  std::size_t label_col = display_width(caption);
  for (const std::size_t r : rs)
    if (r < rows) label_col = std::max(label_col, display_width(row_labels[r]));
  for (std::size_t c = 0; c < cs.size(); ++c) {
    if (cs[c] == cols) continue;
    width[c] = display_width(col_labels[cs[c]]);
    for (const std::size_t r : rs)
      if (r < rows) width[c] = std::max(width[c], cell(v[r * cols + cs[c]], format).size());
  }

  line("");
  std::string head = "  " + style_.faint(pad_right(caption, label_col));
  for (std::size_t c = 0; c < cs.size(); ++c)
    head += "  " + (cs[c] == cols ? std::string("…") : style_.label(pad_left(col_labels[cs[c]], width[c])));
  line("{}", head);
  for (const std::size_t r : rs) {
    std::string text =
        "  " + (r == rows ? pad_right("⋮", label_col) : style_.label(pad_right(row_labels[r], label_col)));
    for (std::size_t c = 0; c < cs.size(); ++c) {
      if (cs[c] == cols || r == rows) {
        text += "  " + pad_left(cs[c] == cols ? "…" : "⋮", cs[c] == cols ? 1 : width[c]);
        continue;
      }
      const double x = v[r * cols + cs[c]];
      const std::string padded = pad_left(cell(x, format), width[c]);
      text += "  " + (std::isfinite(x) ? padded : style_.faint(padded));
    }
    line("{}", text);
  }
  if (rs.size() != rows || cs.size() != cols) {
    std::vector<std::string> hidden;
    if (rs.size() != rows) hidden.push_back(fmt::format("{} of {} rows", rows - (rs.size() - 1), rows));
    if (cs.size() != cols) hidden.push_back(fmt::format("{} of {} columns", cols - (cs.size() - 1), cols));
    line("  {}", style_.faint(fmt::format("({} not shown; --max-rows 0 --max-cols 0 shows everything)",
                                          fmt::join(hidden, " and "))));
  }
}

}  // namespace attn::render_detail
