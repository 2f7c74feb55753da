#include "render/draw/number.hpp"

#include <cmath>

#include <fmt/format.h>

namespace attn {

std::string format_value(double x, int precision) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (std::fabs(x) >= 1e6) return fmt::format("{:.{}e}", x, precision);
  return fmt::format("{:.{}f}", x, precision);
}

std::string exact_value(double x, bool float32) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  return float32 ? fmt::format("{}", static_cast<float>(x)) : fmt::format("{}", x);
}

}  // namespace attn
