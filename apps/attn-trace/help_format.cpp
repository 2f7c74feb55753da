#include "help_format.hpp"

#include <string_view>
#include <vector>

#include "render/draw/text.hpp"

namespace attn::cli {

namespace {

std::size_t leading_spaces(std::string_view line) {
  const std::size_t k = line.find_first_not_of(' ');
  return k == std::string_view::npos ? line.size() : k;
}

// Where the second column of `line` starts (after a gap of two spaces or more past its first
// word), or 0 when it has none.
std::size_t second_column(std::string_view line) {
  const std::size_t gap = line.find("  ", leading_spaces(line));
  if (gap == std::string_view::npos) return 0;
  const std::size_t text = line.find_first_not_of(' ', gap);
  return text == std::string_view::npos ? 0 : text;
}

std::vector<std::string> wrap_line(std::string_view line, std::size_t width, std::size_t column) {
  const std::size_t indent = leading_spaces(line);
  const bool described = line.size() > column && indent > 0 && line[column - 1] == ' ' && line[column] != ' ';
  if (described || indent >= column) return wrap(line, width, std::string(column, ' '));
  if (const std::size_t second = second_column(line); second > 0 && second + 20 <= width)
    return wrap(line, width, std::string(second, ' '));
  if (line.substr(indent).starts_with("attn-trace ")) {
    // A command to paste: each line but the last ends in " \", as a shell continues a line.
    std::vector<std::string> lines = wrap(line, width > 2 ? width - 2 : width, std::string(indent + 4, ' '));
    for (std::size_t k = 0; k + 1 < lines.size(); ++k) lines[k] += " \\";
    return lines;
  }
  return wrap(line, width, std::string(indent + 2, ' '));
}

}  // namespace

std::string fit_help(const std::string& text, std::size_t width, std::size_t column) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    const bool last = end == std::string::npos;
    if (last) end = text.size();
    const std::string_view line = std::string_view(text).substr(start, end - start);
    if (display_width(line) <= width) {
      out += line;
    } else {
      const std::vector<std::string> lines = wrap_line(line, width, column);
      for (std::size_t k = 0; k < lines.size(); ++k) out += (k > 0 ? "\n" : "") + lines[k];
    }
    if (!last) out += '\n';
    start = end + 1;
  }
  return out;
}

std::string HelpFormatter::make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const {
  return fit_help(CLI::Formatter::make_help(app, std::move(name), mode), width_, get_column_width());
}

}  // namespace attn::cli
