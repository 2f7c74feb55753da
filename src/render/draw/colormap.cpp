#include "render/draw/colormap.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace attn {

namespace {

// viridis at ten evenly spaced points (the map of matplotlib and R's viridisLite, public domain);
// colours between are interpolated linearly in sRGB, which is within a few units of the full table.
constexpr std::array<Rgb, 10> viridis = {{{0x44, 0x01, 0x54},
                                          {0x48, 0x28, 0x78},
                                          {0x3e, 0x4a, 0x89},
                                          {0x31, 0x68, 0x8e},
                                          {0x26, 0x82, 0x8e},
                                          {0x1f, 0x9e, 0x89},
                                          {0x35, 0xb7, 0x79},
                                          {0x6d, 0xcd, 0x59},
                                          {0xb4, 0xde, 0x2c},
                                          {0xfd, 0xe7, 0x25}}};

// ColorBrewer's RdBu with 9 classes, from blue (negative) through near-white to red (positive).
constexpr std::array<Rgb, 9> blue_white_red = {{{0x21, 0x66, 0xac},
                                                {0x43, 0x93, 0xc3},
                                                {0x92, 0xc5, 0xde},
                                                {0xd1, 0xe5, 0xf0},
                                                {0xf7, 0xf7, 0xf7},
                                                {0xfd, 0xdb, 0xc7},
                                                {0xf4, 0xa5, 0x82},
                                                {0xd6, 0x60, 0x4d},
                                                {0xb2, 0x18, 0x2b}}};

template <std::size_t N>
Rgb interpolate(const std::array<Rgb, N>& stops, double t) {
  t = std::clamp(std::isnan(t) ? 0.0 : t, 0.0, 1.0);
  const double x = t * static_cast<double>(N - 1);
  const std::size_t k = std::min(static_cast<std::size_t>(x), N - 2);
  const double f = x - static_cast<double>(k);
  const auto mix = [f](std::uint8_t a, std::uint8_t b) {
    return static_cast<std::uint8_t>(std::lround(a + (b - a) * f));
  };
  return {mix(stops[k].r, stops[k + 1].r), mix(stops[k].g, stops[k + 1].g), mix(stops[k].b, stops[k + 1].b)};
}

}  // namespace

Rgb color_at(ColorScale scale, double t) {
  return scale == ColorScale::sequential ? interpolate(viridis, t) : interpolate(blue_white_red, t);
}

std::string hex(Rgb c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }

std::string_view weight_scale_name(WeightScale s) {
  switch (s) {
    case WeightScale::absolute: return "absolute";
    case WeightScale::row: return "row";
    case WeightScale::log: return "log";
    default: return "auto";
  }
}

std::string scale_words(const ColorRange& range) {
  switch (range.weights) {
    case WeightScale::row: return "row scale: each row from 0 to its own largest weight";
    case WeightScale::log: return "log scale: log10 of the weight";
    default: return range.scale == ColorScale::sequential ? "absolute scale: one scale for every row" : "";
  }
}

double ColorRange::position(double x) const {
  if (std::isnan(x)) return 0.5;
  if (std::isinf(x)) return x < 0 ? 0.0 : 1.0;
  if (weights == WeightScale::log) {
    // Zero and anything below lo take the colour of lo, the smallest the scale shows.
    if (!(hi > lo) || !(lo > 0)) return x > 0 ? 1.0 : 0.0;
    if (!(x > lo)) return 0.0;
    return std::clamp(std::log10(x / lo) / std::log10(hi / lo), 0.0, 1.0);
  }
  if (!(hi > lo)) return scale == ColorScale::diverging ? 0.5 : 0.0;
  // Halved before the subtractions, which is exact (but for subnormals) and changes no quotient: a span
  // past the largest double (scores of ±1e308 in float64) would be infinite, and the shade NaN.
  return std::clamp((x / 2 - lo / 2) / (hi / 2 - lo / 2), 0.0, 1.0);
}

ColorRange color_range(const double* values, std::size_t count, bool nonnegative) {
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t k = 0; k < count; ++k) {
    if (!std::isfinite(values[k])) continue;
    lo = std::min(lo, values[k]);
    hi = std::max(hi, values[k]);
  }
  if (lo > hi) return {nonnegative ? ColorScale::sequential : ColorScale::diverging, 0, nonnegative ? 1.0 : 0.0};
  if (nonnegative) return {ColorScale::sequential, std::min(lo, 0.0), hi};
  const double reach = std::max(std::fabs(lo), std::fabs(hi));
  return {ColorScale::diverging, -reach, reach};
}

}  // namespace attn
