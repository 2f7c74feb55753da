#include "bench/flops.hpp"

namespace attn {

std::size_t allowed_pairs(const Problem& p) {
  std::size_t pairs = 0;
  const bool banded =
      p.mask.kind == MaskKind::none || p.mask.kind == MaskKind::causal || p.mask.kind == MaskKind::sliding_window;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      const auto [first, last] = p.mask.band(i);
      if (banded) {
        pairs += last - first;  // every key in the band is allowed
        continue;
      }
      for (std::size_t j = first; j < last; ++j) pairs += p.mask.allows(b, i, j) ? 1 : 0;
    }
  return pairs;
}

double attention_flops(const Problem& p) {
  // per head and allowed pair: q·k is d_k multiply-adds, p·v is d_v
  return static_cast<double>(p.h) * static_cast<double>(allowed_pairs(p)) * 2.0 * static_cast<double>(p.d_k + p.d_v);
}

double projection_flops(const Problem& p) {
  const auto d = [](std::size_t x) { return static_cast<double>(x); };
  double products = d(p.n) * d(p.d_model) * d(p.h * p.d_k) + d(p.m) * d(p.d_context) * d(p.g * (p.d_k + p.d_v));
  if (p.has_output_projection()) products += d(p.n) * d(p.h * p.d_v) * d(p.d_out);
  return 2.0 * d(p.B) * products;
}

}  // namespace attn
