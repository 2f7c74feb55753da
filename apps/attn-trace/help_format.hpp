#pragma once
// --help fitted to the width (request/terminal_caps.hpp, terminal_width): CLI11's layout, with every line
// that runs past the width wrapped under its own column.

#include <algorithm>
#include <cstddef>
#include <string>

#include <CLI/CLI.hpp>

namespace attn::cli {

class HelpFormatter : public CLI::Formatter {
 public:
  // The names' column is CLI11's 30 wide at 80 columns and more, narrower below, so that a description
  // keeps at least half the line.
  explicit HelpFormatter(std::size_t width) : width_(width) {
    column_width(width >= 80 ? 30 : std::max<std::size_t>(12, width * 3 / 8));
  }
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override;

 private:
  std::size_t width_;
};

// `text` with each line wider than `width` columns wrapped: an option's or a command's description
// under the description's column (`column`), a two-column line under its second column, a command
// line continued with " \" so that it still runs when pasted, any other line under its own indent.
std::string fit_help(const std::string& text, std::size_t width, std::size_t column);

}  // namespace attn::cli
