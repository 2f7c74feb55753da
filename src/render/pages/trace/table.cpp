// Lines that fit the terminal, labels, and the one table printer of the terminal trace.

#include "render/pages/trace/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "text/number.hpp"
#include "text/visible.hpp"

namespace attn::render_detail {

std::string pad_left(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  return std::string(width > w ? width - w : 0, ' ') + std::string(s);
}
std::string pad_right(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  return std::string(s) + std::string(width > w ? width - w : 0, ' ');
}

std::string Renderer::text(std::string_view s) const { return o_.unicode ? std::string(s) : to_ascii(s); }

std::string Renderer::label(std::string_view token) const {
  return truncate_to(text(visible(token)), label_width, ellipsis());
}

std::vector<std::string> Renderer::labels(const std::vector<std::string>& raw) const {
  std::vector<std::string> out;
  out.reserve(raw.size());
  for (const std::string& r : raw) out.push_back(label(r));
  return out;
}

void Renderer::emit(std::string s) {
  s = text(s);
  // Whatever was laid out to fit does; anything else is cut rather than wrapped by the terminal.
  if (display_width(s) > o_.width) s = truncate_to(s, o_.width, ellipsis());
  while (!s.empty() && s.back() == ' ') s.pop_back();  // padding that ends a line shows nothing
  out_ += s;
  out_ += '\n';
}

void Renderer::para(std::string_view s, std::string_view indent, bool faint) {
  for (std::string& l : wrap(text(s), o_.width, indent)) emit(faint ? style_.faint(l) : std::move(l));
}

std::string Renderer::cell(double x, CellFormat format) const {
  return format == CellFormat::fixed ? format_value(x, o_.precision) : sci(x);
}

TableLayout Renderer::layout(const TableData& d) const {
  TableLayout l;
  l.rows = shown(d.rows, o_.max_rows);
  std::size_t row_label_col = 0;
  for (const std::size_t r : l.rows)
    if (r < d.rows) row_label_col = std::max(row_label_col, display_width(d.row_labels[r]));
  row_label_col = std::max(row_label_col, display_width(vdots()));
  // A caption wider than the row labels sits above the table when the table would not fit beside it.
  const std::size_t caption = display_width(d.caption);

  // The width of each column: the widest of its label and its shown values.
  const auto column_width = [&](std::size_t c) {
    std::size_t w = display_width(d.col_labels[c]);
    for (const std::size_t r : l.rows)
      if (r < d.rows) w = std::max(w, display_width(cell(d.values[r * d.cols + c], d.format)));
    return w;
  };
  std::vector<std::size_t> all_width(d.cols, 0);
  const std::size_t groups = d.cols / d.group;
  std::size_t limit = o_.max_cols == 0 ? groups : std::min(groups, std::max<std::size_t>(1, o_.max_cols / d.group));
  for (;; --limit) {
    std::vector<std::size_t> cols;
    for (const std::size_t g : shown(groups, limit))
      for (std::size_t k = 0; k < d.group; ++k) {
        cols.push_back(g == groups ? d.cols : g * d.group + k);
        if (g == groups) break;
      }
    const auto total = [&](std::size_t label_col) {
      std::size_t sum = 2 + label_col;
      for (const std::size_t c : cols) {
        if (c == d.cols) {
          sum += 2 + display_width(ellipsis());
          continue;
        }
        if (all_width[c] == 0) all_width[c] = column_width(c);
        sum += 2 + all_width[c];
      }
      return sum;
    };
    l.label_col = std::max(row_label_col, caption);
    l.caption_above = false;
    if (total(l.label_col) > o_.width && caption > row_label_col) {
      l.label_col = row_label_col;
      l.caption_above = true;
    }
    l.cols = cols;
    if (total(l.label_col) <= o_.width || limit <= 1) break;
  }
  for (const std::size_t c : l.cols) l.width.push_back(c == d.cols ? display_width(ellipsis()) : all_width[c]);
  l.whole = std::find(l.rows.begin(), l.rows.end(), d.rows) == l.rows.end() &&
            std::find(l.cols.begin(), l.cols.end(), d.cols) == l.cols.end();
  return l;
}

void Renderer::table(const TableData& d) {
  const TableLayout l = layout(d);
  line("");
  if (l.caption_above) line("  {}", style_.faint(d.caption));
  std::string head = "  " + style_.faint(pad_right(l.caption_above ? "" : d.caption, l.label_col));
  for (std::size_t k = 0; k < l.cols.size(); ++k)
    head += "  " + (l.cols[k] == d.cols ? std::string(ellipsis())
                                        : style_.label(pad_left(d.col_labels[l.cols[k]], l.width[k])));
  line("{}", head);
  for (const std::size_t r : l.rows) {
    std::string row =
        "  " + (r == d.rows ? pad_right(vdots(), l.label_col) : style_.label(pad_right(d.row_labels[r], l.label_col)));
    for (std::size_t k = 0; k < l.cols.size(); ++k) {
      const std::size_t c = l.cols[k];
      if (c == d.cols || r == d.rows) {
        row += "  " + pad_left(c == d.cols ? ellipsis() : vdots(), l.width[k]);
        continue;
      }
      const double x = d.values[r * d.cols + c];
      const bool removed = !d.removed.empty() && d.removed[r * d.cols + c] != 0;
      const std::string padded =
          pad_left(removed ? std::string(o_.unicode ? "·" : ".") : cell(x, d.format), l.width[k]);
      row += "  " + (std::isfinite(x) && !removed ? padded : style_.faint(padded));
    }
    line("{}", row);
  }
  if (!d.removed.empty() && std::find(d.removed.begin(), d.removed.end(), 1) != d.removed.end())
    para(fmt::format("  ({} the mask removed this query-key pair: its weight is exactly 0)", o_.unicode ? "·" : "."),
         "   ", /*faint=*/true);
  if (!l.whole) {
    std::vector<std::string> hidden;
    if (std::find(l.rows.begin(), l.rows.end(), d.rows) != l.rows.end())
      hidden.push_back(fmt::format("{} of {} rows", d.rows - (l.rows.size() - 1), d.rows));
    if (std::find(l.cols.begin(), l.cols.end(), d.cols) != l.cols.end())
      hidden.push_back(fmt::format("{} of {} columns", d.cols - (l.cols.size() - 1), d.cols));
    para(fmt::format("  ({} not shown; --max-rows 0 --max-cols 0 and a wider terminal show more, --view heatmap "
                     "shows every value as a colour)",
                     fmt::join(hidden, " and ")),
         "   ", /*faint=*/true);
  }
}

}  // namespace attn::render_detail
