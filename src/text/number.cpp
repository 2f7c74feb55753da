#include "text/number.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace attn {

namespace {

// "-inf", "inf", "nan" (never "-nan": the sign of a NaN means nothing), or "" for a finite x.
const char* not_finite(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  return "";
}

}  // namespace

char* exact_value_to(char* out, double x, bool float32) {
  // fmt's "{}" is the shortest text that reads back to the same value of its type; compiled, since a
  // trace can hold tens of millions of numbers.
  return float32 ? fmt::format_to(out, FMT_COMPILE("{}"), static_cast<float>(x))
                 : fmt::format_to(out, FMT_COMPILE("{}"), x);
}

std::string exact_value(double x, bool float32) {
  if (!std::isfinite(x)) return not_finite(x);
  char text[exact_value_chars];
  return std::string(text, exact_value_to(text, x, float32));
}

std::string format_value(double x, int precision) {
  if (!std::isfinite(x)) return not_finite(x);
  if (std::fabs(x) >= 1e6) return fmt::format("{:.{}e}", x, precision);
  return fmt::format("{:.{}f}", x, precision);
}

std::string significant_value(double x, int digits) {
  if (!std::isfinite(x)) return not_finite(x);
  return fmt::format("{:.{}g}", x, std::max(digits, 1));
}

std::string describe_bytes(std::uint64_t bytes) {
  // A count that saturated (engine/estimate.hpp's too_large) is no size: the sizes overflowed it.
  if (bytes == std::numeric_limits<std::uint64_t>::max()) return "more than 16 EiB (the sizes overflow a 64-bit count)";
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} bytes", bytes);
}

}  // namespace attn
