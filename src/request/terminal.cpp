#include "request/terminal.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <sys/ioctl.h>
#include <unistd.h>

#include "attn/version.hpp"
#include "render/draw/text.hpp"

namespace attn {

namespace {

bool use_color(ColorMode mode) {
  if (mode != ColorMode::automatic) return mode == ColorMode::always;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return isatty(STDOUT_FILENO) != 0;
}

// COLUMNS when it is a positive number, else the terminal's width, else 100.
std::size_t terminal_width() {
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && columns[0] != '\0') {
    char* end = nullptr;
    const unsigned long value = std::strtoul(columns, &end, 10);
    if (*end == '\0' && value > 0 && value < 100000) return value;
  }
  winsize size{};
  if (isatty(STDOUT_FILENO) != 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 100;
}

bool truecolor_terminal() {
  const char* colorterm = std::getenv("COLORTERM");
  if (colorterm == nullptr) return false;
  const std::string_view c = colorterm;
  return c == "truecolor" || c == "24bit";
}

}  // namespace

bool utf8_terminal() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"})
    if (const char* value = std::getenv(name); value != nullptr && value[0] != '\0') return utf8_locale(value);
  return false;
}

RenderOptions render_options(const TraceOptions& options) {
  RenderOptions r;
  r.precision = options.precision;
  r.color = use_color(options.color);
  r.max_rows = options.max_rows;
  r.max_cols = options.max_cols;
  r.view = options.view;
  r.width = terminal_width();
  r.unicode = utf8_terminal();
  r.truecolor = truecolor_terminal();
  r.version = attn::version;
  r.all_tiles = std::find(options.steps.begin(), options.steps.end(), "tiles") != options.steps.end();
  return r;
}

}  // namespace attn
