#pragma once
// The terminal printer's insides, shared by its files: terminal.cpp (the header, the steps),
// table.cpp (the one table printer), flash_section.cpp and compare_section.cpp. Only src/render
// includes this.

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "render/number.hpp"
#include "render/terminal.hpp"
#include "trace/trace.hpp"

namespace attn::render_detail {

constexpr std::size_t label_width = 10;  // longer token labels are cut, with "…"

struct Style {
  bool on;
  std::string wrap(std::string_view text, std::string_view code) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : std::string(text);
  }
  std::string title(std::string_view t) const { return wrap(t, "1;36"); }
  std::string formula(std::string_view t) const { return wrap(t, "1;33"); }
  std::string faint(std::string_view t) const { return wrap(t, "2"); }
  std::string label(std::string_view t) const { return wrap(t, "1"); }
  std::string warning(std::string_view t) const { return wrap(t, "1;31"); }
};

// Which indices of an axis of `count` to show when at most `limit` fit: the first and the last ones.
// A gap is marked by the index `count` itself.
std::vector<std::size_t> shown(std::size_t count, std::size_t limit);

// A token as a table label: control characters made visible (render/visible.hpp), then cut to fit.
std::string label_text(std::string_view token);

std::string pad_left(std::string_view s, std::size_t width);
std::string pad_right(std::string_view s, std::size_t width);

// How a table writes a number: with --precision digits after the point, or in 3 significant digits
// (errors, which span many orders of magnitude).
enum class CellFormat { fixed, scientific };

class Renderer {
 public:
  Renderer(const Trace& trace, const RenderOptions& options)
      : t_(trace), p_(*trace.problem), o_(options), style_{options.color} {}

  std::string run();

 private:
  template <class... Args>
  void line(fmt::format_string<Args...> f, Args&&... args) {
    out_ += fmt::format(f, std::forward<Args>(args)...);
    out_ += '\n';
  }

  std::string scale_text() const;

  std::string token_list(const std::vector<std::string>& tokens) const;

  void header();

  // Labels along one axis of a table.
  std::vector<std::string> labels(Step step, Axis axis, std::size_t b, std::size_t count) const;

  void step(const StepRecord& rec);

  void heading(std::string_view name);

  std::vector<std::string> token_range(const std::vector<std::string>& tokens, std::size_t first,
                                       std::size_t last) const;

  std::vector<std::string> numbered(std::size_t count) const;

  // ---- the flash pass ----
  void flash_section();

  std::string tile_place(std::size_t b, std::size_t head) const;

  void flash_tile(const FlashTile& tile);

  void flash_final(const FlashFinal& done);

  // When both engines ran: how far the flash output is from the naive one.
  void comparison();

  // ---- compare ----
  static std::string sci(double x) { return std::isfinite(x) ? fmt::format("{:.3g}", x) : format_value(x, 0); }

  void compare_section();

  std::string rule(std::size_t width) const;

  std::string kv_caption(std::size_t kv) const;

  // The one table printer: values (rows × cols, row-major) under column labels, beside row labels,
  // at most --max-rows × --max-cols of them (the first and the last), each cell in `format`.
  void table(std::span<const double> v, std::size_t rows, std::size_t cols, const std::vector<std::string>& row_labels,
             const std::vector<std::string>& col_labels, const std::string& caption,
             CellFormat format = CellFormat::fixed);
  std::string cell(double x, CellFormat format) const;

  void footer();

  const Trace& t_;
  const Problem& p_;
  const RenderOptions& o_;
  Style style_;
  std::string out_;
};

}  // namespace attn::render_detail
