#include "model/mask.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace attn {

std::string_view to_string(MaskKind kind) {
  switch (kind) {
    case MaskKind::none: return "none";
    case MaskKind::causal: return "causal";
    case MaskKind::sliding_window: return "sliding_window";
    case MaskKind::padding: return "padding";
    case MaskKind::custom: return "custom";
  }
  return "?";
}

std::string_view to_string(Align align) { return align == Align::top_left ? "top_left" : "bottom_right"; }

long long Mask::offset() const {
  return align == Align::bottom_right ? static_cast<long long>(m) - static_cast<long long>(n) : 0;
}

bool Mask::allows(std::size_t b, std::size_t i, std::size_t j) const {
  const auto [first, last] = band(i);
  if (j < first || j >= last) return false;
  switch (kind) {
    case MaskKind::padding: return keep(keep.dim(0) == 1 ? 0 : b, j) != 0;
    case MaskKind::custom: return allow(allow.dim(0) == 1 ? 0 : b, i, j) != 0;
    default: return true;
  }
}

std::pair<std::size_t, std::size_t> Mask::band(std::size_t i) const {
  if (kind != MaskKind::causal && kind != MaskKind::sliding_window) return {0, m};
  // causal: j <= i + o;  sliding window: i + o - w < j <= i + o
  const long long diag = static_cast<long long>(i) + offset();
  const long long last = std::clamp(diag + 1, 0LL, static_cast<long long>(m));
  long long first = 0;
  if (kind == MaskKind::sliding_window) {
    first = std::clamp(diag - static_cast<long long>(window) + 1, 0LL, last);
  }
  return {static_cast<std::size_t>(first), static_cast<std::size_t>(last)};
}

std::string Mask::summary() const {
  switch (kind) {
    case MaskKind::none: return "none";
    case MaskKind::causal: return fmt::format("causal ({}, offset {})", to_string(align), offset());
    case MaskKind::sliding_window:
      return fmt::format("sliding_window of {} ({}, offset {})", window, to_string(align), offset());
    case MaskKind::padding: return "padding";
    case MaskKind::custom: return "custom";
  }
  return "?";
}

}  // namespace attn
