#pragma once
// The colours of every picture (terminal heatmaps, SVG, the HTML report), in one place so they agree:
// viridis for values that cannot be negative (weights), blue-white-red centred on 0 for signed values
// (scores, Q, K, V, differences), and one neutral grey for cells the mask removed, never the colour of
// a small value. Both maps are colour-blind safe and read in greyscale.

#include <cstdint>
#include <string>

namespace attn {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

enum class ColorScale { sequential, diverging };

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
  double lo = 0, hi = 1;            // diverging: lo = -hi, so that 0 is white
  double position(double x) const;  // in [0, 1]
};

// The range for finite `values` (those a mask removed are left out by the caller). `nonnegative`: the
// values are weights, drawn sequential from 0 to the largest; any other step (Q, K, V, scores, outputs,
// differences) is signed by nature, so it is diverging and symmetric about 0 even when this input's
// values happen to be all positive: white always means 0.
ColorRange color_range(const double* values, std::size_t count, bool nonnegative);

}  // namespace attn
