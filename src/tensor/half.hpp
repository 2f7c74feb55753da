#pragma once
// The two 16-bit floating-point formats that model dumps use, as bits:
//   IEEE binary16 (float16): sign 1, exponent 5 (bias 15), mantissa 10
//   bfloat16:                sign 1, exponent 8 (bias 127), mantissa 7 (float32's upper half)
// Widening to float is exact (every value of both is a float); narrowing a float rounds to nearest,
// ties to even, as numpy and PyTorch do: past the largest finite value it goes to ±inf, a NaN stays a
// NaN (made quiet), and values below the smallest normal become subnormals or ±0. A double is narrowed
// in one rounding too (double_to_float16, double_to_bfloat16), not twice through the nearest float.

#include <cmath>
#include <cstdint>
#include <limits>

#include "tensor/bits.hpp"

namespace attn {

inline float float16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa · 2^-24, exact in float (at most 10 significant bits, a normal float).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) return attn::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  return attn::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

inline float bfloat16_to_float(std::uint16_t b) { return attn::bit_cast<float>(std::uint32_t{b} << 16); }

inline std::uint16_t float_to_float16(float f) {
  const std::uint32_t x = attn::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t magnitude = x & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: quiet, with the top of its payload
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  const int exponent = static_cast<int>(magnitude >> 23) - 127;  // of the float; -127 for zero and subnormals
  if (exponent > 15) return sign | 0x7C00u;                      // beyond 2^16 (and inf): inf
  if (exponent >= -14) {
    // Normal in float16: keep 10 of the 23 mantissa bits and round on the 13 dropped. A carry out of the
    // mantissa moves into the exponent, which is the right next value (up to inf at 65520).
    std::uint32_t h = (static_cast<std::uint32_t>(exponent + 15) << 10) | ((magnitude >> 13) & 0x3FFu);
    const std::uint32_t dropped = magnitude & 0x1FFFu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u) != 0)) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  // Below 2^-25 (float subnormals included) everything rounds to 0; 2^-25 itself is a tie, to even 0.
  if (exponent < -25) return sign;
  // Subnormal in float16, in units of 2^-24: the 24-bit significand m is worth m · 2^(exponent - 23),
  // that is m >> shift units with shift = -(exponent + 1), from 14 to 24.
  const std::uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const auto shift = static_cast<std::uint32_t>(-(exponent + 1));
  std::uint32_t h = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (dropped > half || (dropped == half && (h & 1u) != 0)) ++h;  // 0x3FF + 1 is the smallest normal, 0x400
  return static_cast<std::uint16_t>(sign | h);
}

inline std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t x = attn::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // NaN, quiet
  // Round on the 16 dropped bits: adding 0x7FFF, plus 1 when the kept part is odd, carries into it exactly
  // when the dropped part is above one half, or is one half and the kept part odd. The carry runs into the
  // exponent where it should, and past the largest finite value to inf.
  const std::uint32_t rounded = x + 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// A double rounded to float toward zero, with the last bit set when that dropped anything: "round to
// odd". Rounding the result to 16 bits then gives the double's own nearest 16-bit value, ties to even,
// because float keeps at least two bits more than either half type (24 against 11 and 8), so the set
// last bit only ever breaks a false tie.
inline float double_to_float_odd(double d) {
  const float f = static_cast<float>(d);  // to nearest
  if (static_cast<double>(f) == d || std::isnan(d)) return f;
  if (std::isinf(f)) return std::copysign(std::numeric_limits<float>::max(), f);  // beyond float: still beyond 16 bits
  const float toward_zero = std::fabs(static_cast<double>(f)) > std::fabs(d) ? std::nextafter(f, 0.0f) : f;
  return attn::bit_cast<float>(attn::bit_cast<std::uint32_t>(toward_zero) | 1u);
}

inline std::uint16_t double_to_float16(double d) { return float_to_float16(double_to_float_odd(d)); }
inline std::uint16_t double_to_bfloat16(double d) { return float_to_bfloat16(double_to_float_odd(d)); }

}  // namespace attn
