#include "model/positions.hpp"

#include <cmath>

namespace attn {

std::string_view to_string(RopeStyle style) { return style == RopeStyle::half ? "half" : "interleaved"; }

std::vector<double> rope_frequencies(double theta, std::size_t dims) {
  std::vector<double> f(dims / 2);
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dims));
  return f;
}

std::pair<Tensor<double>, Tensor<double>> rope_table(std::span<const double> positions,
                                                     std::span<const double> frequencies) {
  Tensor<double> c({positions.size(), frequencies.size()});
  Tensor<double> s({positions.size(), frequencies.size()});
  for (std::size_t t = 0; t < positions.size(); ++t)
    for (std::size_t i = 0; i < frequencies.size(); ++i) {
      const double angle = positions[t] * frequencies[i];
      c(t, i) = std::cos(angle);
      s(t, i) = std::sin(angle);
    }
  return {std::move(c), std::move(s)};
}

namespace {

// 2^(-8(k+1)/h) for k = 0 … h-1, h a power of two: a geometric sequence from 2^(-8/h) down to 2^-8.
std::vector<double> power_of_two_slopes(std::size_t h) {
  std::vector<double> s(h);
  for (std::size_t k = 0; k < h; ++k) s[k] = std::exp2(-8.0 * static_cast<double>(k + 1) / static_cast<double>(h));
  return s;
}

}  // namespace

std::vector<double> alibi_slopes(std::size_t h) {
  if (h == 0) return {};
  std::size_t lower = 1;
  while (lower * 2 <= h) lower *= 2;
  std::vector<double> s = power_of_two_slopes(lower);
  if (lower == h) return s;
  // The slopes of 2h' fall between those of h': every other one (0-based even positions) fills the gap.
  const std::vector<double> finer = power_of_two_slopes(2 * lower);
  for (std::size_t k = 0; s.size() < h; k += 2) s.push_back(finer[k]);
  return s;
}

}  // namespace attn
