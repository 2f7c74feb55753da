#pragma once
// The lesson pages (scaling, properties, mistakes, explain) are written line by line: each line cut to
// the width, each paragraph wrapped to it, in ASCII when the locale is not UTF-8. The trace's own
// printer (renderer.hpp) does the same with colours and tables.

#include <string>
#include <string_view>
#include <vector>

#include "render/draw/options.hpp"

namespace attn {

class Page {
 public:
  explicit Page(const RenderOptions& options) : o_(options) {}

  // One line, cut to the width (with "…", or "..." in ASCII).
  void line(std::string_view text = "");
  // A paragraph wrapped at spaces to the width, the lines after the first starting with `indent`.
  void paragraph(std::string_view text, std::string_view indent = "");
  // "━━ title ━━━━" across the width (in colour when the options ask).
  void heading(std::string_view title);
  // `parts` joined by spaces, each kept whole on a line where it fits (an equation and its terms); the
  // lines after the first start with `indent`.
  void pieces(const std::vector<std::string>& parts, std::string_view indent = "    ");

  // `text` as the terminal can show it: itself, or spelled out in ASCII.
  std::string plain(std::string_view text) const;
  const RenderOptions& options() const { return o_; }
  const std::string& text() const { return text_; }
  std::string take() { return std::move(text_); }

 private:
  const RenderOptions& o_;
  std::string text_;
};

}  // namespace attn
