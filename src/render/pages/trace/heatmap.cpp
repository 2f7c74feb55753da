// Matrices as heatmaps in the terminal: coloured cells (a character ramp without colour), token labels on
// both axes, a legend with the range, and for weights each row's sum; long axes pooled to fit the width.

#include "render/pages/trace/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "text/visible.hpp"

namespace attn::render_detail {

namespace {

// Rows of a heatmap beyond this are pooled, a few to a line, so that a long sequence stays a picture
// of one screenful or so rather than hundreds of lines.
constexpr std::size_t max_heat_lines = 64;

// Character ramps for output without colour, from the smallest value to the largest. The diverging
// ramp runs from the most negative through blank (0) to the most positive.
constexpr std::string_view sequential_ramp = " .:-=+*#%@";
constexpr std::string_view diverging_ramp = "=~-, .+*#";
constexpr char removed_char = '/';

// The ramp's character at shade t in [0, 1].
char ramp_char(ColorScale scale, double t) {
  const std::string_view ramp = scale == ColorScale::sequential ? sequential_ramp : diverging_ramp;
  return ramp[std::min(ramp.size() - 1, static_cast<std::size_t>(t * static_cast<double>(ramp.size())))];
}

// The nearest colour of xterm's 256-colour palette: its 6 × 6 × 6 cube or its 24 greys.
int xterm_index(Rgb c) {
  const auto level = [](int v) { return v < 48 ? 0 : v < 115 ? 1 : (v - 35) / 40; };
  const int r = level(c.r), g = level(c.g), b = level(c.b);
  const auto value = [](int l) { return l == 0 ? 0 : 55 + 40 * l; };
  const auto distance = [&](int x, int y, int z) {
    return (x - c.r) * (x - c.r) + (y - c.g) * (y - c.g) + (z - c.b) * (z - c.b);
  };
  const int cube = distance(value(r), value(g), value(b));
  const int mean = (c.r + c.g + c.b) / 3;
  const int grey = std::clamp((mean - 3) / 10, 0, 23);
  const int grey_value = 8 + 10 * grey;
  return distance(grey_value, grey_value, grey_value) < cube ? 232 + grey : 16 + 36 * r + 6 * g + b;
}

// One code point of a label at a time, for labels written downwards.
std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < s.size();) {
    char32_t code = 0;
    const std::size_t n = std::max<std::size_t>(1, utf8_sequence(s, k, code));
    out.emplace_back(s.substr(k, n));
    k += n;
  }
  return out;
}

}  // namespace

std::string Style::cell(std::string_view t, Rgb bg) const {
  const bool light = 0.299 * bg.r + 0.587 * bg.g + 0.114 * bg.b > 140;
  const std::string background =
      truecolor ? fmt::format("48;2;{};{};{}", bg.r, bg.g, bg.b) : fmt::format("48;5;{}", xterm_index(bg));
  return fmt::format("\x1b[{};{}m{}\x1b[0m", background, light ? "30" : "97", t);
}

std::string Renderer::heat_cell(double t, bool removed, ColorScale scale, std::size_t width) const {
  if (!o_.color) return std::string(width, removed ? removed_char : ramp_char(scale, t));
  if (removed) {
    std::string hatch;
    for (std::size_t k = 0; k < width; ++k) hatch += o_.unicode ? "╱" : "/";
    return style_.cell(hatch, removed_color);
  }
  return style_.cell(std::string(width, ' '), color_at(scale, t));
}

std::string Renderer::legend(const ColorRange& range, bool any_removed) const {
  // In colour a gradient; without, the ramp itself, one character a level.
  const std::size_t steps =
      o_.color ? 20 : (range.scale == ColorScale::sequential ? sequential_ramp : diverging_ramp).size();
  std::string bar;
  for (std::size_t k = 0; k < steps; ++k)
    bar += heat_cell((static_cast<double>(k) + 0.5) / static_cast<double>(steps), false, range.scale, 1);
  const bool row = range.weights == WeightScale::row;
  const auto end = [&](double x) {
    return range.weights == WeightScale::log ? fmt::format("{:.3g}", x) : format_value(x, o_.precision);
  };
  std::string text = fmt::format("  {} {}{}{} {}", row ? "0" : end(range.lo), o_.color ? "" : "[", bar,
                                 o_.color ? "" : "]", row ? "row's largest" : end(range.hi));
  text += range.scale == ColorScale::sequential ? "  (low to high)" : "  (negative, 0, positive)";
  if (any_removed) text += fmt::format("   {} removed by the mask", heat_cell(0, true, range.scale, 2));
  return text;
}

HeatLayout Renderer::heat_layout(const Panel& panel) const {
  HeatLayout l;
  l.weights = panel.step == Step::weights;

  // Rows: one a line, or pooled a few to a line.
  l.row_pool = panel.rows <= max_heat_lines ? 1 : (panel.rows + max_heat_lines - 1) / max_heat_lines;
  l.lines = (panel.rows + l.row_pool - 1) / l.row_pool;
  l.row_text.resize(l.lines);
  for (std::size_t k = 0; k < l.lines; ++k) {
    const std::size_t r0 = k * l.row_pool, r1 = std::min(panel.rows, r0 + l.row_pool);
    l.row_text[k] = l.row_pool == 1 ? label(panel.row_labels[r0]) : fmt::format("{}–{}", r0, r1 - 1);
    l.row_text[k] = text(l.row_text[k]);
  }
  for (const std::string& t : l.row_text) l.label_col = std::max(l.label_col, display_width(t));

  // The sum column, then the columns of cells: two characters a cell when they fit, else one, else
  // pooled.
  // Beside the weights, each line's row sum (the mean of its rows when pooled): 1 for every row but
  // those the mask emptied.
  l.sum_text.resize(l.lines);
  l.empty_line.assign(l.lines, false);
  if (l.weights) {
    for (std::size_t k = 0; k < l.lines; ++k) {
      const std::size_t r0 = k * l.row_pool, r1 = std::min(panel.rows, r0 + l.row_pool);
      bool all_empty = true;
      double mean = 0;
      for (std::size_t r = r0; r < r1; ++r) {
        all_empty = all_empty && panel.is_empty_row(r);
        mean += panel.row_sum(r) / static_cast<double>(r1 - r0);
      }
      l.empty_line[k] = all_empty;
      l.sum_text[k] = all_empty ? "empty: masked" : text(fmt::format("Σ {}", format_value(mean, o_.precision)));
      l.sum_col = std::max(l.sum_col, display_width(l.sum_text[k]));
    }
  }
  const std::size_t fixed = 2 + l.label_col + 2 + (l.weights ? 2 + l.sum_col : 0);
  const std::size_t avail = o_.width > fixed ? o_.width - fixed : 1;
  if (panel.cols * 2 > avail) {
    l.cw = 1;
    if (panel.cols > avail) l.col_pool = (panel.cols + avail - 1) / avail;
  }
  l.cells = (panel.cols + l.col_pool - 1) / l.col_pool;
  return l;
}

// Column labels, written downwards (a few characters of each), or key indices when pooled.
void Renderer::heat_column_labels(const Panel& panel, const HeatLayout& l) {
  const std::string margin(2 + l.label_col + 2, ' ');
  if (l.col_pool == 1) {
    std::vector<std::vector<std::string>> down;
    std::size_t depth = 0;
    for (const std::string& raw : panel.col_labels) {
      down.push_back(code_points(label(raw)));
      depth = std::max(depth, down.back().size());
    }
    depth = std::min<std::size_t>(depth, 6);
    for (std::size_t k = 0; k < depth; ++k) {
      std::string row = margin;
      for (const auto& cps : down) {
        std::string glyph = k < cps.size() ? cps[k] : " ";
        if (display_width(glyph) > l.cw) glyph = o_.unicode ? "·" : ".";
        row += pad_right(glyph, l.cw);
      }
      line("{}", style_.label(row));
    }
  } else {
    std::string ticks = margin;
    for (std::size_t k = 0; k < l.cells;) {
      const std::string tick = fmt::format("{}", k * l.col_pool);
      if (k % 10 == 0 && k + tick.size() <= l.cells) {
        ticks += tick;
        k += tick.size();
      } else {
        ticks += ' ';
        ++k;
      }
    }
    line("{}", style_.faint(ticks));
  }
}

// One line per row (or pool of rows): its label, its cells, and beside weights its sum.
void Renderer::heat_rows(const Panel& panel, const HeatLayout& l, const ColorRange& range) {
  const Shading shading(panel, range);
  for (std::size_t k = 0; k < l.lines; ++k) {
    const std::size_t r0 = k * l.row_pool, r1 = std::min(panel.rows, r0 + l.row_pool);
    std::string row = "  " + style_.label(pad_right(l.row_text[k], l.label_col)) + "  ";
    for (std::size_t c = 0; c < l.cells; ++c) {
      const std::size_t c0 = c * l.col_pool, c1 = std::min(panel.cols, c0 + l.col_pool);
      const Shading::Block cell = l.row_pool == 1 && l.col_pool == 1
                                      ? Shading::Block{shading.at(r0, c0), 0, panel.is_removed(r0, c0)}
                                      : shading.block(r0, r1, c0, c1);
      row += heat_cell(cell.shade, cell.removed, range.scale, l.cw);
    }
    if (l.weights) row += "  " + (l.empty_line[k] ? style_.warning(l.sum_text[k]) : l.sum_text[k]);
    line("{}", row);
  }
}

// When rows or columns were pooled, a note that says how.
void Renderer::heat_pool_note(const Panel& panel, const HeatLayout& l) {
  if (l.row_pool == 1 && l.col_pool == 1) return;
  std::vector<std::string> pooled;
  if (l.row_pool > 1) pooled.push_back(fmt::format("rows {} to a line", l.row_pool));
  if (l.col_pool > 1) pooled.push_back(fmt::format("columns {} to a cell", l.col_pool));
  para(fmt::format("  ({} × {} pooled to fit, {}: each cell is the mean colour of what the mask kept in its block)",
                   panel.rows, panel.cols, fmt::join(pooled, " and ")),
       "   ", /*faint=*/true);
}

void Renderer::heatmap(const Panel& panel) {
  const ColorRange range = panel_range({&panel}, o_.weight_scale);
  // pass 1: how many rows a line pools and columns a cell, the labels and the sums
  const HeatLayout l = heat_layout(panel);
  // pass 2: the caption, the column labels, the rows, the legend and what was pooled
  line("");
  if (!panel.caption.empty()) line("  {}", style_.faint(panel.caption));
  heat_column_labels(panel, l);
  heat_rows(panel, l, range);
  line("{}", legend(range, !panel.removed.empty() &&
                               std::any_of(panel.removed.begin(), panel.removed.end(), [](auto x) { return x != 0; })));
  // Which scale the weights' colours use, on a line of its own so that the legend stays whole.
  if (const std::string words = scale_words(range); !words.empty()) para("  " + words, "   ", /*faint=*/true);
  heat_pool_note(panel, l);
}

void Renderer::empty_rows_note(const Panel& panel) {
  std::vector<std::string> names;
  for (std::size_t r = 0; r < panel.rows; ++r)
    if (panel.is_empty_row(r)) names.push_back(label(panel.row_labels[r]));
  if (names.empty()) return;
  para(fmt::format("  the mask left {} with no key to attend: {} weights are all 0 and sum to 0, not 1",
                   fmt::join(names, ", "), names.size() == 1 ? "its" : "their"),
       "   ", /*faint=*/true);
}

void Renderer::matrix(const Panel& panel, CellFormat format) {
  TableData data{panel.values,        panel.rows, panel.cols, labels(panel.row_labels), labels(panel.col_labels),
                 text(panel.caption), format};
  if (panel.step == Step::weights || panel.step == Step::dropped) data.removed = panel.removed;
  bool heat = o_.view == View::heatmap;
  if (o_.view == View::automatic) heat = panel.rows >= 2 && panel.cols >= 2 && !layout(data).whole;
  if (heat) {
    heatmap(panel);
    return;
  }
  table(data);
  if (panel.step == Step::weights) empty_rows_note(panel);
}

}  // namespace attn::render_detail
