#include "render/pages/report/html.hpp"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "render/draw/axis.hpp"
#include "text/number.hpp"
#include "render/pages/report/writer.hpp"

namespace attn::report_detail {

std::string thousands(std::size_t count) {
  std::string digits = std::to_string(count), out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

std::string short_number(double x) { return significant_value(x, 3); }

std::string shape_text(const Shape& shape) { return fmt::format("{}", fmt::join(shape, " × ")); }

std::string note(std::string_view html) { return fmt::format("<p class=\"note\">{}</p>", html); }

std::string static_table(const Panel& p, std::size_t limit) {
  const std::vector<std::size_t> rows = render_detail::shown(p.rows, limit);
  const std::vector<std::size_t> cols = render_detail::shown(p.cols, limit);
  std::string out = "<table class=\"numbers\">";
  if (!p.caption.empty()) out += fmt::format("<caption>{}</caption>", page_text(p.caption));
  out += "<thead><tr><th></th>";
  for (const std::size_t c : cols)
    out += c == p.cols ? "<th>…</th>" : fmt::format("<th>{}</th>", page_text(p.col_labels[c]));
  out += "</tr></thead><tbody>";
  for (const std::size_t r : rows) {
    if (r == p.rows) {
      out += fmt::format("<tr><th>⋮</th><td colspan=\"{}\"></td></tr>", cols.size());
      continue;
    }
    out += fmt::format("<tr><th>{}</th>", page_text(p.row_labels[r]));
    for (const std::size_t c : cols) {
      if (c == p.cols) out += "<td>…</td>";
      else if (p.is_removed(r, c))
        out += fmt::format("<td class=\"removed\">{}</td>", format_value(p.values[r * p.cols + c], 4));
      else out += fmt::format("<td>{}</td>", format_value(p.values[r * p.cols + c], 4));
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  return out;
}

std::string static_matrix(std::string_view caption, std::span<const double> values, std::size_t rows, std::size_t cols,
                          const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                          std::size_t limit) {
  Panel p;
  p.caption = std::string(caption);
  p.rows = rows;
  p.cols = cols;
  p.values.assign(values.begin(), values.end());
  p.row_labels = row_labels;
  p.col_labels = col_labels;
  return static_table(p, limit);
}

std::string config_line(const Trace& t) {
  const Problem& p = *t.problem;
  std::string heads = p.g == p.h ? fmt::format("{} head{}", p.h, p.h == 1 ? "" : "s")
                                 : fmt::format("{} query heads, {} key/value heads", p.h, p.g);
  if (t.head) heads += fmt::format(" (this trace keeps head {})", *t.head);
  std::string engines = t.engine == Engine::both ? "naive and flash" : std::string(name_of(t.engine));
  if (t.flash) engines += fmt::format(" (tiles of {} × {})", t.flash->tile_size.Br, t.flash->tile_size.Bc);
  if (t.backward) engines += ", forward and backward";
  return fmt::format(
      "{}n = {} queries, m = {} keys, d_model = {}, d_k = {}, d_v = {}, d_out = {}, {}, scale = {}, mask {}, {}, "
      "engine {}",
      p.batched ? fmt::format("batch of {}, ", p.B) : "", p.n, p.m, p.d_model, p.d_k, p.d_v, p.d_out, heads,
      short_number(p.scale), page_text(p.mask.summary()), name_of(t.dtype), engines);
}

std::string token_line(const std::vector<std::string>& tokens) {
  constexpr std::size_t most = 40;
  std::string out;
  for (std::size_t k = 0; k < tokens.size() && k < most; ++k)
    out += fmt::format("<span class=\"token\">{}</span> ", page_text(tokens[k]));
  if (tokens.size() > most) out += fmt::format("… ({} in all)", tokens.size());
  return out;
}

}  // namespace attn::report_detail
