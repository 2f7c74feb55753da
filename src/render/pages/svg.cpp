#include "render/pages/svg.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "model/heads.hpp"
#include "render/draw/colormap.hpp"
#include "render/draw/escape.hpp"
#include "text/number.hpp"
#include "render/draw/text.hpp"
#include "render/draw/panel.hpp"
#include "text/visible.hpp"

namespace attn {

namespace {

// ---- text ------------------------------------------------------------------------------------

// Text from the input or a saved trace (a token, a formula), as the figure shows it: control
// characters written out, then cut to `width` characters with "…" (0: whole). Not yet escaped, so
// that its width can be measured.
std::string shown_text(std::string_view raw, std::size_t width) { return truncate_to(visible(raw), width); }

// A value short enough to sit in a cell: a weight (0 to 1) with three decimals, anything else with
// about three significant digits in at most six characters.
std::string cell_text(double x, bool weight) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "−∞" : "∞";
  if (weight) return fmt::format("{:.3f}", x);
  const double a = std::fabs(x);
  if (a < 9.995) return fmt::format("{:.2f}", x);
  if (a < 99.95) return fmt::format("{:.1f}", x);
  if (a < 99999.5) return fmt::format("{:.0f}", x);
  return fmt::format("{:.0e}", x);
}

// A coordinate or a length in user units.
std::string num(double x) { return fmt::format("{:.6g}", x); }

// Black or white, whichever contrasts more with `c` (WCAG relative luminance; 0.179 is where the two
// contrasts are equal).
std::string_view ink_on(Rgb c) {
  const auto linear = [](std::uint8_t v) {
    const double s = v / 255.0;
    return s <= 0.04045 ? s / 12.92 : std::pow((s + 0.055) / 1.055, 2.4);
  };
  const double luminance = 0.2126 * linear(c.r) + 0.7152 * linear(c.g) + 0.0722 * linear(c.b);
  return luminance > 0.179 ? "#000000" : "#ffffff";
}

// ---- pooling ---------------------------------------------------------------------------------

// A panel as the figure draws it: beyond max_cells, pooled `pool` rows and columns to a cell, with each
// cell's shade on the colour map and, beside the weights, each drawn row's sum.
struct Drawn {
  Panel panel;                // pooled: each value the mean of what the mask kept in its block, removed
                              // where the mask removed all of it, labels "0–3"
  std::vector<double> shade;  // (rows, cols) in [0, 1]: where each drawn cell falls on the colour map
  std::vector<double> sums;   // (rows) the weights' row sums; pooled: the mean over the block's rows
  std::size_t pool = 1;
};

// The first rows (or columns) of each block, as "0–3".
std::vector<std::string> block_labels(std::size_t count, std::size_t pool) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < count; k += pool) out.push_back(fmt::format("{}–{}", k, std::min(count, k + pool) - 1));
  return out;
}

// Every cell of `panel` as it is (pool 1), or the mean of each pool × pool block of what the mask kept.
Drawn drawn_panel(const Panel& panel, const ColorRange& range, std::size_t pool) {
  const Shading shading(panel, range);
  Drawn d;
  d.pool = pool;
  Panel& p = d.panel;
  p.step = panel.step;
  p.batch = panel.batch;
  p.head = panel.head;
  p.kv = panel.kv;
  p.caption = panel.caption;
  p.rows = (panel.rows + pool - 1) / pool;
  p.cols = (panel.cols + pool - 1) / pool;
  p.row_labels = pool == 1 ? panel.row_labels : block_labels(panel.rows, pool);
  p.col_labels = pool == 1 ? panel.col_labels : block_labels(panel.cols, pool);
  if (!panel.removed.empty()) p.removed.assign(p.rows * p.cols, 0);
  if (!panel.empty_row.empty()) p.empty_row.assign(p.rows, true);
  for (std::size_t r = 0; r < p.rows; ++r) {
    const std::size_t r0 = r * pool, r1 = std::min(panel.rows, r0 + pool);
    for (std::size_t c = 0; c < p.cols; ++c) {
      const std::size_t c0 = c * pool, c1 = std::min(panel.cols, c0 + pool);
      const Shading::Block block =
          pool == 1 ? Shading::Block{shading.at(r, c), panel.values[r * panel.cols + c], panel.is_removed(r, c)}
                    : shading.block(r0, r1, c0, c1);
      p.values.push_back(block.value);
      d.shade.push_back(block.shade);
      if (block.removed && !p.removed.empty()) p.removed[r * p.cols + c] = 1;
    }
    if (panel.step != Step::weights) continue;
    double sum = 0;
    for (std::size_t k = r0; k < r1; ++k) {
      sum += panel.row_sum(k);
      if (!p.empty_row.empty()) p.empty_row[r] = p.empty_row[r] && panel.is_empty_row(k);
    }
    d.sums.push_back(sum / static_cast<double>(r1 - r0));
  }
  return d;
}

// ---- sizes -----------------------------------------------------------------------------------

constexpr double margin = 16;
constexpr double max_figure = 1200;  // wide enough for a slide, still a page's width in a paper
constexpr double max_cell = 56, min_cell = 1;
constexpr double title_size = 16, text_size = 12, min_label_size = 7;
constexpr double char_width = 0.6;       // of the font size: a generous average for sans-serif and monospace
constexpr std::size_t label_chars = 12;  // longer tokens are cut, with "…"
constexpr std::size_t header_chars = 160;
constexpr std::size_t values_inside_limit = 12;  // rows and columns up to which each cell shows its value
constexpr double min_value_size = 8;             // smaller numbers in cells cannot be read
constexpr double gap = 28;                       // between panels, and before the colour bar
constexpr double bar_width = 14;

double text_width(std::string_view shown, double size) {
  return static_cast<double>(display_width(shown)) * size * char_width;
}

// Where everything of one panel goes; every panel of a figure has the same step, so the same layout.
struct PanelLayout {
  std::size_t rows = 0, cols = 0;
  double cell = 0;               // the side of one cell
  double label_size = 0;         // the font size of the row and column labels
  std::size_t label_every = 1;   // a label for every k-th row and column, when cells are smaller than text
  bool rotate = false;           // column labels run upwards, being wider than a cell
  double caption_h = 0;          // above everything: "head 1"
  double col_label_h = 0;        // then the column labels
  double row_label_w = 0;        // left of the grid
  double sums_w = 0;             // right of the grid: the weights' row sums
  double value_size = 0;         // the font size of the numbers in the cells; 0: none
  double width = 0, height = 0;  // the whole panel

  double grid_x() const { return row_label_w; }
  double grid_y() const { return caption_h + col_label_h; }
};

struct LabelLengths {
  std::size_t rows = 0, cols = 0, caption = 0;  // the longest, in characters as shown
};

LabelLengths label_lengths(const std::vector<Drawn>& shown) {
  LabelLengths out;
  for (const Drawn& d : shown) {
    const Panel& panel = d.panel;
    for (const std::string& l : panel.row_labels)
      out.rows = std::max(out.rows, display_width(shown_text(l, label_chars)));
    for (const std::string& l : panel.col_labels)
      out.cols = std::max(out.cols, display_width(shown_text(l, label_chars)));
    out.caption = std::max(out.caption, display_width(panel.caption));
  }
  return out;
}

// The largest cells (up to max_cell) with which `grid_cols` × `grid_rows` panels and the colour bar
// fit in max_figure, then the label sizes that go with them.
PanelLayout layout_panels(const std::vector<Drawn>& shown, std::size_t grid_cols, std::size_t grid_rows,
                          double header_h, double legend_w) {
  const Panel& first = shown.front().panel;
  const LabelLengths longest = label_lengths(shown);
  PanelLayout l;
  l.rows = first.rows;
  l.cols = first.cols;
  l.caption_h = longest.caption == 0 ? 0 : text_size + 10;
  l.sums_w = first.step == Step::weights ? 8 + text_width("empty", text_size) : 0;
  // First with labels at full size, which leaves room enough for the smaller labels of smaller cells.
  const double full_row_labels = text_width(std::string(longest.rows, 'x'), text_size) + 8;
  const double full_col_labels = text_width(std::string(longest.cols, 'x'), text_size) + 8;
  const auto across = [](double total, std::size_t count) {
    return (total - gap * static_cast<double>(count - 1)) / static_cast<double>(count);
  };
  const double room_w = across(max_figure - 2 * margin - legend_w, grid_cols) - full_row_labels - l.sums_w;
  const double room_h = across(max_figure - header_h - margin, grid_rows) - l.caption_h - full_col_labels;
  const double fit = std::min(room_w / static_cast<double>(l.cols), room_h / static_cast<double>(l.rows));
  // Whole units, so that neighbouring cells meet without a seam.
  l.cell = std::clamp(std::floor(fit), min_cell, max_cell);

  l.label_size = std::clamp(l.cell - 2, min_label_size, text_size);
  l.label_every = static_cast<std::size_t>(std::ceil((l.label_size + 1) / l.cell));
  const double widest_col = text_width(std::string(longest.cols, 'x'), l.label_size);
  l.rotate = widest_col > l.cell - 4;
  // Whole units here too, so that the cells' edges fall on whole units.
  l.col_label_h = std::ceil((l.rotate ? widest_col : l.label_size) + 8);
  l.row_label_w = std::ceil(text_width(std::string(longest.rows, 'x'), l.label_size) + 8);
  const double value_size = std::min(text_size, (l.cell - 6) / (6 * char_width));  // six characters fit
  if (l.rows <= values_inside_limit && l.cols <= values_inside_limit && value_size >= min_value_size)
    l.value_size = value_size;
  l.width = std::ceil(std::max(l.row_label_w + static_cast<double>(l.cols) * l.cell + l.sums_w,
                               text_width(std::string(longest.caption, 'x'), text_size)));
  l.height = l.grid_y() + static_cast<double>(l.rows) * l.cell;
  return l;
}

// ---- drawing ---------------------------------------------------------------------------------

constexpr std::string_view removed_fill = "url(#attn-removed)";

// A colour bar's tick: the value, or under the row scale the fraction of the row's largest.
std::string tick_text(const ColorRange& range, double t) {
  if (range.weights == WeightScale::row) return t > 0 ? "row max" : "0";
  return fmt::format("{:.3g}", t);
}

// The hatch of cells the mask removed (grey, so never the colour of a small value), and the colour
// bar's gradient: everything the figure refers to is defined in it.
std::string defs(const ColorRange& range) {
  std::string out = "<defs>\n";
  out += fmt::format(
      "<pattern id=\"attn-removed\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"{}\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#ffffff\" stroke-opacity=\"0.6\" stroke-width=\"1.5\"/>"
      "</pattern>\n",
      hex(removed_color));
  out += "<linearGradient id=\"attn-scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k) {
    const double t = k / 10.0;
    out += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", num(t), hex(color_at(range.scale, t)));
  }
  out += "</linearGradient>\n</defs>\n";
  return out;
}

// The column labels above the grid (upwards when wider than a cell) and the row labels to its left.
void draw_labels(std::string& out, const Panel& panel, const PanelLayout& l) {
  out += fmt::format("<g class=\"labels\" font-size=\"{}\" fill=\"#333333\">\n", num(l.label_size));
  const double top = l.grid_y() - 5;
  for (std::size_t c = 0; c < panel.cols; c += l.label_every) {
    const double x = l.grid_x() + (static_cast<double>(c) + 0.5) * l.cell;
    const std::string text = xml_escape(shown_text(panel.col_labels[c], label_chars));
    if (l.rotate)
      out += fmt::format("<text transform=\"translate({},{}) rotate(-90)\" dy=\"0.35em\">{}</text>\n", num(x), num(top),
                         text);
    else out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(x), num(top), text);
  }
  for (std::size_t r = 0; r < panel.rows; r += l.label_every) {
    const double y = l.grid_y() + (static_cast<double>(r) + 0.5) * l.cell;
    out += fmt::format("<text x=\"{}\" y=\"{}\" dy=\"0.35em\" text-anchor=\"end\">{}</text>\n", num(l.grid_x() - 5),
                       num(y), xml_escape(shown_text(panel.row_labels[r], label_chars)));
  }
  out += "</g>\n";
}

// One <rect> per entry, with its exact value, and its rounded value inside when there is room.
// Pooled, each <rect> carries its block's mean (data-value) and the group the pool (data-pool).
void draw_cells(std::string& out, const Drawn& d, const PanelLayout& l, const ColorRange& range, bool float32) {
  const Panel& panel = d.panel;
  std::string values;
  out += d.pool == 1 ? "<g class=\"cells\" shape-rendering=\"crispEdges\">\n"
                     : fmt::format("<g class=\"cells\" data-pool=\"{}\" shape-rendering=\"crispEdges\">\n", d.pool);
  for (std::size_t r = 0; r < panel.rows; ++r) {
    for (std::size_t c = 0; c < panel.cols; ++c) {
      const double v = panel.values[r * panel.cols + c];
      const bool removed = panel.is_removed(r, c);
      const Rgb color = removed ? removed_color : color_at(range.scale, d.shade[r * panel.cols + c]);
      const double x = l.grid_x() + static_cast<double>(c) * l.cell, y = l.grid_y() + static_cast<double>(r) * l.cell;
      out += fmt::format(
          "<rect class=\"cell\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" data-row=\"{}\" "
          "data-col=\"{}\" data-value=\"{}\"{}/>\n",
          num(x), num(y), num(l.cell), num(l.cell), removed ? std::string(removed_fill) : hex(color), r, c,
          exact_value(v, float32 && d.pool == 1), removed ? " data-removed=\"1\"" : "");
      // A removed cell's weight is 0 by construction, but the -inf of `masked` is the point of that step.
      if (l.value_size > 0 && (!removed || std::isinf(v)))
        values += fmt::format("<text x=\"{}\" y=\"{}\" dy=\"0.35em\" fill=\"{}\">{}</text>\n", num(x + l.cell / 2),
                              num(y + l.cell / 2), ink_on(color), cell_text(v, panel.step == Step::weights));
    }
  }
  out += "</g>\n";
  if (!values.empty())
    out +=
        fmt::format("<g class=\"values\" font-family=\"monospace\" font-size=\"{}\" text-anchor=\"middle\">\n{}</g>\n",
                    num(l.value_size), values);
}

// Right of the weights: each row's sum, 1 up to rounding, or "empty" where the mask left nothing.
void draw_row_sums(std::string& out, const Drawn& d, const PanelLayout& l) {
  const Panel& panel = d.panel;
  const double x = l.grid_x() + static_cast<double>(panel.cols) * l.cell + 6;
  out += fmt::format("<g class=\"row-sums\" font-family=\"monospace\" font-size=\"{}\" fill=\"#555555\">\n",
                     num(l.label_size));
  out += fmt::format("<text x=\"{}\" y=\"{}\">Σ</text>\n", num(x), num(l.grid_y() - 5));
  for (std::size_t r = 0; r < panel.rows; r += l.label_every) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" dy=\"0.35em\">{}</text>\n", num(x),
                       num(l.grid_y() + (static_cast<double>(r) + 0.5) * l.cell),
                       panel.is_empty_row(r) ? "empty" : fmt::format("{:.3f}", d.sums[r]));
  }
  out += "</g>\n";
}

void draw_panel(std::string& out, const Drawn& d, const PanelLayout& l, const ColorRange& range, double x, double y,
                bool float32) {
  const Panel& panel = d.panel;
  out += fmt::format("<g class=\"panel\" data-batch=\"{}\"{} transform=\"translate({},{})\">\n", panel.batch,
                     panel.head ? fmt::format(" data-head=\"{}\"", *panel.head) : "", num(x), num(y));
  if (!panel.caption.empty())
    out += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"{}\" font-weight=\"bold\">{}</text>\n", num(text_size),
                       num(text_size), xml_escape(panel.caption));
  draw_labels(out, panel, l);
  draw_cells(out, d, l, range, float32);
  if (panel.step == Step::weights) draw_row_sums(out, d, l);
  out += "</g>\n";
}

// The colour bar at (x, y): the range's colours bottom to top with its ends (and 0, on a diverging
// map) labelled, and below it the grey of removed cells when there are any.
void draw_colorbar(std::string& out, const ColorRange& range, bool any_removed, double x, double y, double height) {
  out += fmt::format("<g class=\"colorbar\" font-family=\"monospace\" font-size=\"{}\">\n", num(text_size - 1));
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#attn-scale)\" stroke=\"#888888\" "
      "stroke-width=\"0.5\"/>\n",
      num(x), num(y), num(bar_width), num(height));
  // Above the bar, which scale the weights use.
  if (range.scale == ColorScale::sequential)
    out += fmt::format("<text class=\"scale\" x=\"{}\" y=\"{}\" font-family=\"sans-serif\">{} scale</text>\n", num(x),
                       num(y - 14), weight_scale_name(range.weights));
  std::vector<double> ticks = {range.lo, range.hi};
  if (range.scale == ColorScale::diverging && range.hi > range.lo) ticks.push_back(0);
  if (!(range.hi > range.lo)) ticks = {range.lo};
  for (const double t : ticks) {
    const double at = y + height * (1 - range.position(t));
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333333\"/>\n", num(x + bar_width),
                       num(at), num(x + bar_width + 4), num(at));
    out += fmt::format("<text x=\"{}\" y=\"{}\" dy=\"0.35em\">{}</text>\n", num(x + bar_width + 6), num(at),
                       tick_text(range, t));
  }
  if (any_removed) {
    const double top = y + height + 12;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n", num(x), num(top),
                       num(bar_width), num(bar_width), removed_fill);
    out += fmt::format("<text x=\"{}\" y=\"{}\" dy=\"0.35em\" font-family=\"sans-serif\">masked</text>\n",
                       num(x + bar_width + 6), num(top + bar_width / 2));
  }
  out += "</g>\n";
}

// ---- the figure ------------------------------------------------------------------------------

const StepRecord& record_of(const Trace& trace, Step step) {
  for (const StepRecord& rec : trace.steps)
    if (rec.step == step) return rec;
  throw std::invalid_argument(fmt::format("render_svg: the trace has no step {}", step_info(step).name));
}

// The panels of `rec` the figure draws: batch item options.batch, and one head or every head.
std::vector<Panel> chosen_panels(const Trace& trace, const StepRecord& rec, const PlotOptions& options) {
  const Problem& p = *trace.problem;
  const std::size_t query_head = options.head.value_or(trace.head.value_or(0));
  std::vector<Panel> out;
  for (Panel& panel : panels(trace, rec)) {
    if (panel.batch != options.batch) continue;
    const std::size_t wanted = panel.kv ? kv_head_of(query_head, p.h, p.g) : query_head;
    if (panel.head && !options.all_heads && *panel.head != wanted) continue;
    out.push_back(std::move(panel));
  }
  if (out.empty())
    throw std::invalid_argument(fmt::format("render_svg: step {} has no panel for batch {} and head {}",
                                            step_info(rec.step).name, options.batch, query_head));
  return out;
}

// "rows: query · columns: key · float32"
std::string axes_line(const Trace& trace, Step step) {
  const std::vector<std::string> dims = dim_names(step, false);
  return fmt::format("rows: {} · columns: {} · {}", dims[dims.size() - 2], dims.back(), name_of(trace.dtype));
}

}  // namespace

bool has_head_axis(Step step) {
  const std::vector<Axis>& axes = step_info(step).axes;
  return std::find(axes.begin(), axes.end(), Axis::head) != axes.end() ||
         std::find(axes.begin(), axes.end(), Axis::kv_head) != axes.end();
}

namespace {

// The lines above the panels: the step's name and formula, its meaning, its axes and the weights'
// scale, and whether the cells were pooled.
struct Header {
  std::string name, formula, description, axes, pooled;
  double width() const {
    return std::max({text_width(name + "  " + formula, title_size) + 12, text_width(description, text_size),
                     text_width(axes, text_size), text_width(pooled, text_size)});
  }
  double height() const { return margin + title_size + (pooled.empty() ? 2 : 3) * (text_size + 6) + 16; }
  void write(std::string& out) const {
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"{}\"><tspan font-weight=\"bold\">{}</tspan><tspan "
        "dx=\"12\">{}</tspan></text>\n",
        num(margin), num(margin + title_size), num(title_size), xml_escape(name), xml_escape(formula));
    out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#555555\">{}</text>\n", num(margin),
                       num(margin + title_size + text_size + 6), xml_escape(description));
    out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#555555\">{}</text>\n", num(margin),
                       num(margin + title_size + 2 * (text_size + 6)), xml_escape(axes));
    if (!pooled.empty())
      out += fmt::format("<text class=\"pooled\" x=\"{}\" y=\"{}\" fill=\"#555555\">{}</text>\n", num(margin),
                         num(margin + title_size + 3 * (text_size + 6)), xml_escape(pooled));
  }
};

Header header_of(const Trace& trace, const StepRecord& rec, const ColorRange& range, const Panel& whole,
                 const Drawn& drawn) {
  Header h;
  h.name = step_info(rec.step).name;
  h.formula = shown_text(rec.formula, header_chars);
  h.description = shown_text(rec.description, header_chars);
  h.axes = axes_line(trace, rec.step);
  if (const std::string words = scale_words(range); !words.empty()) h.axes += " · " + words;
  if (drawn.pool > 1)
    h.pooled = fmt::format(
        "{} × {} cells drawn as {} × {}: each the mean of a {} × {} block (of what the mask kept); --max-cells 0 "
        "draws every cell",
        whole.rows, whole.cols, drawn.panel.rows, drawn.panel.cols, drawn.pool, drawn.pool);
  return h;
}

}  // namespace

std::size_t pool_factor(std::size_t rows, std::size_t cols, std::size_t max_cells) {
  const std::size_t side = std::max(rows, cols);
  return max_cells == 0 || side <= max_cells ? 1 : (side + max_cells - 1) / max_cells;
}

std::string render_svg(const Trace& trace, const PlotOptions& options) {
  const StepRecord& rec = record_of(trace, options.step);
  const std::vector<Panel> chosen = chosen_panels(trace, rec, options);
  const bool float32 = computes_in_float32(trace.dtype);

  // pass 1: one colour range for every panel, and each panel as drawn (pooled beyond max_cells)
  std::vector<const Panel*> all;
  all.reserve(chosen.size());
  for (const Panel& panel : chosen) all.push_back(&panel);
  const ColorRange range = panel_range(all, options.weight_scale);
  const std::size_t pool = pool_factor(chosen.front().rows, chosen.front().cols, options.max_cells);
  std::vector<Drawn> shown;
  shown.reserve(chosen.size());
  for (const Panel& panel : chosen) shown.push_back(drawn_panel(panel, range, pool));

  // pass 2: the header's text, which sets the least width
  const Header header = header_of(trace, rec, range, chosen.front(), shown.front());
  const double header_w = header.width(), header_h = header.height();

  // pass 3: the colour bar's width from its labels
  const bool any_removed = std::any_of(shown.begin(), shown.end(), [](const Drawn& d) {
    return std::find(d.panel.removed.begin(), d.panel.removed.end(), 1) != d.panel.removed.end();
  });
  const std::size_t tick_chars = std::max({tick_text(range, range.lo).size(), tick_text(range, range.hi).size(),
                                           any_removed ? std::size_t{6} : std::size_t{0}, std::size_t{9}});
  const double legend_w = gap + bar_width + 6 + text_width(std::string(tick_chars, 'x'), text_size - 1);

  // pass 4: the panels in a grid as square as may be, and their layout
  const std::size_t count = shown.size();
  const std::size_t grid_cols = static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(count))));
  const std::size_t grid_rows = (count + grid_cols - 1) / grid_cols;
  const PanelLayout l = layout_panels(shown, grid_cols, grid_rows, header_h, legend_w);
  const double panels_w = static_cast<double>(grid_cols) * l.width + static_cast<double>(grid_cols - 1) * gap;
  const double panels_h = static_cast<double>(grid_rows) * l.height + static_cast<double>(grid_rows - 1) * gap;
  const double bar_h = std::clamp(static_cast<double>(l.rows) * l.cell, 100.0, 360.0);
  const double legend_h = bar_h + (any_removed ? 12 + bar_width : 0);
  const double width = std::ceil(2 * margin + std::max(panels_w + legend_w, header_w));
  const double height = std::ceil(header_h + std::max(panels_h, l.grid_y() + legend_h) + margin);

  // pass 5: write it
  std::string caption = header.name;
  if (count == 1 && !shown.front().panel.caption.empty()) caption += ", " + shown.front().panel.caption;
  if (count > 1)
    caption += trace.problem->batched ? fmt::format(", batch {}, every head", options.batch) : ", every head";
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"{2}\">\n",
      num(width), num(height), num(text_size));
  out += fmt::format("<title>attn-trace: {}</title>\n", xml_escape(caption));
  if (!trace.problem->description.empty())
    out += fmt::format("<desc>{}</desc>\n", xml_escape(shown_text(trace.problem->description, 0)));
  out += defs(range);
  out += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", num(width), num(height));
  header.write(out);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t grid_row = k / grid_cols, grid_col = k % grid_cols;
    const double x = margin + static_cast<double>(grid_col) * (l.width + gap);
    const double y = header_h + static_cast<double>(grid_row) * (l.height + gap);
    draw_panel(out, shown[k], l, range, x, y, float32);
  }
  draw_colorbar(out, range, any_removed, margin + panels_w + gap, header_h + l.grid_y(), bar_h);
  out += "</svg>\n";
  return out;
}

}  // namespace attn
