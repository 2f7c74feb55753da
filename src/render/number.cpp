#include "render/number.hpp"

#include <cmath>

#include <fmt/format.h>

namespace attn {

std::string format_value(double x, int precision) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (std::fabs(x) >= 1e6) return fmt::format("{:.{}e}", x, precision);
  return fmt::format("{:.{}f}", x, precision);
}

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;  // count lead bytes only
  return width;
}

std::string truncate_to(std::string_view text, std::size_t width) {
  if (display_width(text) <= width || width == 0) return std::string(text);
  std::string out;
  std::size_t columns = 0;
  for (const char c : text) {
    const bool lead = (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (lead && ++columns == width) break;  // keep one column for the ellipsis
    out += c;
  }
  return out + "…";
}

}  // namespace attn
