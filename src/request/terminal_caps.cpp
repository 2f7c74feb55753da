#include "request/terminal_caps.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "attn/version.hpp"
#include "text/utf8.hpp"

namespace attn {

namespace {

bool use_color(ColorMode mode) {
  if (mode != ColorMode::automatic) return mode == ColorMode::always;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return isatty(STDOUT_FILENO) != 0;
}

// The columns of the terminal open on `fd`, or 0 when it is not a terminal or does not say.
std::size_t width_of(int fd) {
  winsize size{};
  if (isatty(fd) != 0 && ioctl(fd, TIOCGWINSZ, &size) == 0) return size.ws_col;
  return 0;
}

// The controlling terminal's columns, or 0 without one. O_NOCTTY: asking never makes /dev/tty the
// controlling terminal of a process that has none.
std::size_t controlling_terminal_width() {
  const int fd = ::open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return 0;
  const std::size_t width = width_of(fd);
  ::close(fd);
  return width;
}

bool truecolor_terminal() {
  const char* colorterm = std::getenv("COLORTERM");
  if (colorterm == nullptr) return false;
  const std::string_view c = colorterm;
  return c == "truecolor" || c == "24bit";
}

}  // namespace

std::size_t terminal_width() {
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && columns[0] != '\0') {
    char* end = nullptr;
    const unsigned long value = std::strtoul(columns, &end, 10);
    if (*end == '\0' && value > 0 && value < 100000) return value;
  }
  if (const std::size_t width = width_of(STDOUT_FILENO); width > 0) return width;
  if (const std::size_t width = controlling_terminal_width(); width > 0) return width;
  return 80;
}

std::size_t columns_that_fit(std::size_t width, int precision) {
  // Two spaces and "0.1234" (precision digits, a digit and the point) a column, after the two spaces
  // and a short label that open each row; the table's layout narrows it further when the real
  // numbers or labels are wider.
  const std::size_t column = 2 + 2 + static_cast<std::size_t>(std::max(precision, 0));
  constexpr std::size_t row_label = 2 + 4;
  return width > row_label + column ? (width - row_label) / column : 1;
}

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
  r.width = terminal_width();
  r.max_cols =
      options.max_cols == max_cols_from_width ? columns_that_fit(r.width, options.precision) : options.max_cols;
  r.view = options.view;
  r.weight_scale = options.weight_scale;
  r.unicode = utf8_terminal();
  r.truecolor = truecolor_terminal();
  r.version = attn::version;
  r.all_tiles = std::find(options.steps.begin(), options.steps.end(), "tiles") != options.steps.end();
  return r;
}

}  // namespace attn
