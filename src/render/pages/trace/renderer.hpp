#pragma once
// The terminal printer's insides, shared by its files: terminal.cpp (the header, the steps),
// table.cpp (lines, labels, the one table printer), heatmap.cpp, flash_section.cpp and
// compare_section.cpp. Only src/render
// includes this.

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lessons/mistakes.hpp"
#include "render/draw/axis.hpp"
#include "render/draw/colormap.hpp"
#include "text/number.hpp"
#include "render/draw/panel.hpp"
#include "render/draw/options.hpp"
#include "render/draw/text.hpp"
#include "trace/decode.hpp"
#include "trace/trace.hpp"

namespace attn::render_detail {

constexpr std::size_t label_width = 10;  // longer token labels are cut, with "…"

struct Style {
  bool on;
  bool truecolor;
  std::string wrap(std::string_view text, std::string_view code) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : std::string(text);
  }
  std::string title(std::string_view t) const { return wrap(t, "1;36"); }
  std::string formula(std::string_view t) const { return wrap(t, "1;33"); }
  std::string faint(std::string_view t) const { return wrap(t, "2"); }
  std::string label(std::string_view t) const { return wrap(t, "1"); }
  std::string warning(std::string_view t) const { return wrap(t, "1;31"); }
  // `t` on a background of colour `bg`, in a foreground that reads on it.
  std::string cell(std::string_view t, Rgb bg) const;
};

std::string pad_left(std::string_view s, std::size_t width);
std::string pad_right(std::string_view s, std::size_t width);

// How a table writes a number: with --precision digits after the point, or in 3 significant digits
// (errors, which span many orders of magnitude).
enum class CellFormat { fixed, scientific };

// A table's labels and values, as the one table printer takes them. Labels are ready to print (made
// visible, in ASCII when asked, cut to label_width).
struct TableData {
  std::span<const double> values;  // (rows, cols), row-major
  std::size_t rows = 0, cols = 0;
  std::vector<std::string> row_labels, col_labels;
  std::string caption;
  CellFormat format = CellFormat::fixed;
  std::size_t group = 1;  // columns that belong together (naive k, flash k): shown or hidden as one
  // (rows, cols) or empty: 1 where the mask removed the cell, which is then written as a dot, so that
  // a weight of 0 because of the mask does not look like a small weight.
  std::span<const unsigned char> removed;
};

// Where a table's rows and columns go: which are shown, and how wide each is.
struct TableLayout {
  std::vector<std::size_t> rows, cols;  // shown indices; a gap is the extent itself
  std::vector<std::size_t> width;       // of each shown column
  std::size_t label_col = 0;
  bool caption_above = false;  // the caption is wider than the labels: a line of its own
  bool whole = true;           // nothing hidden
};

// How a heatmap fits the width (heatmap.cpp): rows pooled a few to a line and columns a few to a cell
// when they must, one or two characters a cell, the row labels and, beside weights, each line's sum.
struct HeatLayout {
  bool weights = false;
  std::size_t row_pool = 1, lines = 0;
  std::vector<std::string> row_text;  // (lines) a token, or "r0–r1" when pooled
  std::size_t label_col = 0;
  std::vector<std::string> sum_text;  // (lines) beside weights: "Σ 1.0000" or "empty: masked"
  std::vector<bool> empty_line;       // (lines) every row of the line emptied by the mask
  std::size_t sum_col = 0;
  std::size_t cw = 2, col_pool = 1, cells = 0;  // characters a cell, columns a cell, cells a line
};

class Renderer {
 public:
  Renderer(const Trace& trace, const RenderOptions& options)
      : t_(trace), p_(*trace.problem), o_(options), style_{options.color, options.truecolor} {}

  std::string run();
  // run --mistake: the input's header, then the intended and the mistaken computation compared
  // (mistake_section.cpp). The renderer's trace is the intended one.
  std::string mistake_page(const MistakeResult& result);
  // A decode's part (decode_section.cpp): this trace's steps alone, under a heading when `heading_name` is
  // not empty; or one step under another name (k_cache, v_cache).
  std::string steps_only(std::string_view heading_name);
  std::string named_step(const StepRecord& rec, std::string_view name);

 private:
  // One line of output: in ASCII when the locale is not UTF-8, and cut to the width.
  template <class... Args>
  void line(fmt::format_string<Args...> f, Args&&... args) {
    emit(fmt::format(f, std::forward<Args>(args)...));
  }
  void emit(std::string text);
  // A paragraph: wrapped at spaces to the width, the lines after the first indented by `indent`.
  void para(std::string_view text, std::string_view indent = "  ", bool faint = false);

  // What the terminal can show: `s` itself, or in ASCII.
  std::string text(std::string_view s) const;
  std::string_view ellipsis() const { return o_.unicode ? "…" : "..."; }
  std::string_view vdots() const { return o_.unicode ? "⋮" : ":"; }
  // A token as a label: control characters made visible (text/visible.hpp), then cut to fit.
  std::string label(std::string_view token) const;
  std::vector<std::string> labels(const std::vector<std::string>& raw) const;

  std::string scale_text() const;

  std::string token_list(const std::vector<std::string>& tokens) const;

  void header();

  // A step's heading, formula, meaning and tables; under `name` when it is given, else its own.
  void step(const StepRecord& rec, std::string_view name = {});

  void heading(std::string_view name);

  std::vector<std::string> token_range(const std::vector<std::string>& tokens, std::size_t first,
                                       std::size_t last) const;

  std::vector<std::string> numbered(std::size_t count) const;

  // ---- the flash pass ----
  void flash_section();
  // Past `summary_past` tiles (and without --steps tiles), the terminal shows the walk's shape and the
  // first and last `summary_ends` tiles: a 512-token input has thousands, megabytes of tables.
  static constexpr std::size_t summary_past = 24;
  static constexpr std::size_t summary_ends = 3;
  void flash_walk(const FlashRecord& f);

  std::string tile_place(std::size_t b, std::size_t head) const;

  void flash_tile(const FlashTile& tile);
  // One field of a tile (trace/trace.hpp's tile_fields) as a table: its rows the tile's queries or keys,
  // its columns the keys or numbered features.
  void field_table(const Tensor<double>& t, TileAxis rows, TileAxis cols, std::string_view caption,
                   const std::vector<std::string>& queries, const std::vector<std::string>& keys);
  // ---- the flash backward pass ----
  void flash_backward_section();
  void softmax_backward_note();
  void flash_backward_tile(const FlashBackwardTile& tile);

  void flash_final(const FlashFinal& done);

  // When both engines ran: how far the flash output is from the naive one.
  void comparison();

  // ---- a mistake ----
  void mistake_steps(const MistakeResult& r);
  void mistake_first_difference(const MistakeResult& r);
  void mistake_shown(const MistakeResult& r, Step step);  // one step of --steps, intended beside mistaken
  void mistake_formulas(const MistakeResult& r, Step step);
  void mistake_largest(const StepDifference& d);
  void mistake_panels(const MistakeResult& r, Step step);
  void mistake_costs(const MistakeResult& r);
  std::string query_label(std::size_t batch, std::size_t head, std::size_t index, bool key) const;

  // ---- decode (decode_section.cpp) ----
  // Past 2·decode_ends decode steps, the terminal prints the first and last decode_ends.
  static constexpr std::size_t decode_ends = 3;
  void decode_section();
  void cache_cost_lines(const DecodeRecord& d);
  void decode_step(const DecodeStepRecord& s);
  void split_lines(const DecodeStepRecord& s);
  void page_lines(const DecodeStepRecord& s);
  void decode_check(const DecodeRecord& d);

  // ---- compare ----
  std::string sci(double x) const;

  void compare_section();
  void compare_outputs(const CompareRecord& c);
  void gradient_checks(const CompareRecord& c);

  std::string rule(std::size_t width) const;

  // ---- tables and heatmaps ----
  // A panel as --view says: its numbers, or a heatmap when asked or (auto) when its numbers do not fit.
  void matrix(const Panel& panel, CellFormat format = CellFormat::fixed);

  // The one table printer: values under column labels, beside row labels, as many rows and columns as
  // --max-rows, --max-cols and the width allow (the first and the last), each cell in `format`.
  void table(const TableData& data);
  TableLayout layout(const TableData& data) const;
  std::string cell(double x, CellFormat format) const;

  // A panel as coloured cells (a character ramp without colour), with labels, a legend and, for
  // weights, each row's sum; long axes pooled to fit, with a note saying so.
  void heatmap(const Panel& panel);
  HeatLayout heat_layout(const Panel& panel) const;
  void heat_column_labels(const Panel& panel, const HeatLayout& layout);
  void heat_rows(const Panel& panel, const HeatLayout& layout, const ColorRange& range);
  void heat_pool_note(const Panel& panel, const HeatLayout& layout);
  // A cell at shade t in [0, 1] of `scale` (Shading), or hatched where the mask removed it.
  std::string heat_cell(double t, bool removed, ColorScale scale, std::size_t width) const;
  std::string legend(const ColorRange& range, bool any_removed) const;

  // Under a weights table: the rows the mask emptied, which sum to 0, not 1.
  void empty_rows_note(const Panel& panel);

  void footer();

  const Trace& t_;
  const Problem& p_;
  const RenderOptions& o_;
  Style style_;
  std::string out_;
};

}  // namespace attn::render_detail
