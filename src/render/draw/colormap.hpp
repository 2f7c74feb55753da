#pragma once
// The colours of every picture (terminal heatmaps, SVG, the HTML report), in one place so they agree:
// viridis for values that cannot be negative (weights), blue-white-red centred on 0 for signed values
// (scores, Q, K, V, differences), and one neutral grey for cells the mask removed, never the colour of
// a small value. Both maps are colour-blind safe and read in greyscale.

#include <cstdint>
#include <string>
#include <string_view>

namespace attn {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

enum class ColorScale { sequential, diverging };

// How the colours of a probability step (the weights: steps.hpp's ValueClass::probability) span its
// values. absolute: one scale from 0 to the largest weight of the picture; row: each row from 0 to its
// own largest weight, so that a row of many small weights shows its structure as well as a row with one
// weight near 1; log: log10 of the weights, from the smallest (at most 6 decades below the largest) to
// the largest. automatic: row when the rows' largest weights differ by more than `row_scale_ratio`
// times (a long causal input: 1 in the first row, about 1/i in row i), else absolute.
enum class WeightScale { automatic, absolute, row, log };
inline constexpr double row_scale_ratio = 4;
inline constexpr double log_scale_decades = 6;

// "auto", "absolute", "row", "log": the spelling of --color-scale.
std::string_view weight_scale_name(WeightScale s);

// The colour of `t` in [0, 1] (clamped): for the diverging map, 0 is the most negative value, 1/2 is
// zero and 1 the most positive.
Rgb color_at(ColorScale scale, double t);

// The colour of a cell the mask removed.
inline constexpr Rgb removed_color{150, 150, 150};

// "#rrggbb".
std::string hex(Rgb c);

// The value range a picture's colours span, and where a value falls in it.
struct ColorRange {
  ColorScale scale = ColorScale::sequential;
  double lo = 0, hi = 1;  // diverging: lo = -hi, so that 0 is white; row: 0 and 1, a fraction of the row's largest
  // A probability step's scale (never automatic here); absolute for every other step.
  WeightScale weights = WeightScale::absolute;
  double position(double x) const;  // in [0, 1]; under the row scale x is already the fraction of its row's largest
};

// The words a legend adds for a probability step's scale, as "row scale: each row from 0 to its own
// largest weight"; empty for any other step.
std::string scale_words(const ColorRange& range);

// The range for finite `values` (those a mask removed are left out by the caller). `nonnegative`: the
// values are weights, drawn sequential from 0 to the largest; any other step (Q, K, V, scores, outputs,
// differences) is signed by nature, so it is diverging and symmetric about 0 even when this input's
// values happen to be all positive: white always means 0.
ColorRange color_range(const double* values, std::size_t count, bool nonnegative);

}  // namespace attn
