#pragma once
// The sizes that rounding errors scale with: what compare's noise floor (engine/compare.hpp) and diff's
// tolerance (check/diff.cpp) sum, defined once for both.

#include <cmath>
#include <cstddef>

#include "model/positions.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// A rounding bound's factor times the magnitude it scales: 0 when the magnitude is 0, however large the
// factor. A value that sums nothing rounds by nothing; and with logits near the largest double the factor
// can overflow to infinity, where inf · 0 would make the bound NaN and fail an exact result.
inline double bound_times(double factor, double magnitude) { return magnitude == 0 ? 0 : factor * magnitude; }

// |A|, value by value.
inline Tensor<double> magnitude(Tensor<double> A) {
  for (double& x : A.values()) x = std::fabs(x);
  return A;
}

// f(b, hd, t, i, a, c) for every pair (a, c) that RoPE turns, at every position t of every head of
// every batch item: i indexes the angle, cos(t, i) and sin(t, i). X (B, H, T, d), P = dims/2 pairs.
template <class F>
void each_turned_pair(const Tensor<double>& X, std::size_t P, RopeStyle style, F&& f) {
  for (std::size_t b = 0; b < X.dim(0); ++b)
    for (std::size_t hd = 0; hd < X.dim(1); ++hd)
      for (std::size_t t = 0; t < X.dim(2); ++t)
        for (std::size_t i = 0; i < P; ++i) {
          const auto [a, c] = rope_pair(style, i, P);
          f(b, hd, t, i, a, c);
        }
}

// The size of what y = RoPE(x) sums, feature by feature: y_a = x_a·c - x_b·s is two products and one sum,
// so |x_a|·|c| + |x_b|·|s| for each turned pair (a, b), and likewise for b; features past the turned
// ones are |x| as they are. X (B, H, T, d) as magnitudes, cos and sin (T, dims/2) the table.
//                                                                                   -> (B, H, T, d)
inline Tensor<double> rotation_magnitude(const Tensor<double>& X, const Tensor<double>& cos, const Tensor<double>& sin,
                                         RopeStyle style) {
  Tensor<double> Y = X;
  each_turned_pair(X, cos.dim(1), style,
                   [&](std::size_t b, std::size_t hd, std::size_t t, std::size_t i, std::size_t a, std::size_t c) {
                     const double co = std::fabs(cos(t, i)), si = std::fabs(sin(t, i));
                     Y(b, hd, t, a) = X(b, hd, t, a) * co + X(b, hd, t, c) * si;
                     Y(b, hd, t, c) = X(b, hd, t, c) * co + X(b, hd, t, a) * si;
                   });
  return Y;
}

}  // namespace attn
