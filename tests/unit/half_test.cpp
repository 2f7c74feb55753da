// float16 and bfloat16 bits to float and back (src/tensor/half.hpp). The bit patterns are worked out
// by hand beside each check; the round trips cover every one of the 65,536 patterns of both formats.
// Doubles are narrowed in one rounding, checked by hand on ties and against their neighbours over a sweep.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <catch2/catch.hpp>

#include "tensor/half.hpp"

using namespace attn;

TEST_CASE("float16 bits widen to the values IEEE binary16 gives them", "[half]") {
  CHECK(float16_to_float(0x3C00) == 1.0f);             // exponent 15 - 15 = 0, mantissa 0
  CHECK(float16_to_float(0xC000) == -2.0f);            // sign, exponent 16 - 15 = 1
  CHECK(float16_to_float(0x3555) == 0x1.554p-2f);      // 0x3555: exponent 13 - 15 = -2, mantissa 0x155
  CHECK(float16_to_float(0x7BFF) == 65504.0f);         // (2 - 2^-10) · 2^15, the largest finite
  CHECK(float16_to_float(0x0400) == 0x1p-14f);         // the smallest normal
  CHECK(float16_to_float(0x0001) == 0x1p-24f);         // the smallest subnormal
  CHECK(float16_to_float(0x03FF) == 1023 * 0x1p-24f);  // the largest subnormal
  CHECK(float16_to_float(0x0000) == 0.0f);
  CHECK(std::signbit(float16_to_float(0x8000)));  // -0
  CHECK(float16_to_float(0x8000) == 0.0f);
  CHECK(float16_to_float(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(float16_to_float(0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(float16_to_float(0x7E00)));
  CHECK(std::isnan(float16_to_float(0x7C01)));  // a signalling NaN is still a NaN
}

TEST_CASE("bfloat16 bits widen to the upper half of a float", "[half]") {
  CHECK(bfloat16_to_float(0x3F80) == 1.0f);
  CHECK(bfloat16_to_float(0xC040) == -3.0f);        // sign, exponent 128 - 127 = 1, mantissa 0x40 (0.5)
  CHECK(bfloat16_to_float(0x7F7F) == 0x1.FEp127f);  // (2 - 2^-7) · 2^127, the largest finite
  CHECK(bfloat16_to_float(0x0001) == 0x1p-133f);    // the smallest subnormal: 2^-126 · 2^-7
  CHECK(bfloat16_to_float(0x7F80) == std::numeric_limits<float>::infinity());
  CHECK(std::signbit(bfloat16_to_float(0x8000)));
  CHECK(std::isnan(bfloat16_to_float(0x7FC0)));
}

TEST_CASE("Floats round to the nearest float16, ties to even, to inf past 65504 and to subnormals below 2^-14",
          "[half]") {
  CHECK(float_to_float16(1.0f) == 0x3C00);
  CHECK(float_to_float16(-2.0f) == 0xC000);
  CHECK(float_to_float16(65504.0f) == 0x7BFF);
  // The float16 step at 1 is 2^-10. 1 + 2^-11 is half way between 1 (0x3C00, even) and 1 + 2^-10
  // (0x3C01): to 0x3C00. 1 + 3·2^-11 is half way between 0x3C01 and 1 + 2^-9 (0x3C02, even): to 0x3C02.
  CHECK(float_to_float16(1.0f + 0x1p-11f) == 0x3C00);
  CHECK(float_to_float16(1.0f + 3 * 0x1p-11f) == 0x3C02);
  // Just above the tie goes up; just below goes down.
  CHECK(float_to_float16(1.0f + 0x1p-11f + 0x1p-23f) == 0x3C01);
  CHECK(float_to_float16(1.0f + 0x1p-11f - 0x1p-23f) == 0x3C00);
  // The step at 2^15 is 2^5 = 32: 65504 + 16 = 65520 is half way to 65536, which is not finite, and the
  // tie goes to the even side (0x7C00), that is inf. 65519 stays at 65504.
  CHECK(float_to_float16(65520.0f) == 0x7C00);
  CHECK(float_to_float16(65519.0f) == 0x7BFF);
  CHECK(float_to_float16(-1e6f) == 0xFC00);
  CHECK(float_to_float16(std::numeric_limits<float>::infinity()) == 0x7C00);
  // Subnormals, in units of 2^-24: 2^-25 is half a unit, a tie between 0 and 0x0001 (odd): to 0.
  // 3·2^-25 is 1.5 units, a tie between 0x0001 and 0x0002: to 0x0002. A hair above 2^-25 goes to 0x0001.
  CHECK(float_to_float16(0x1p-24f) == 0x0001);
  CHECK(float_to_float16(0x1p-25f) == 0x0000);
  CHECK(float_to_float16(3 * 0x1p-25f) == 0x0002);
  CHECK(float_to_float16(0x1p-25f + 0x1p-40f) == 0x0001);
  CHECK(float_to_float16(0x1p-26f) == 0x0000);
  CHECK(float_to_float16(-0x1p-30f) == 0x8000);  // -0 keeps its sign
  CHECK(float_to_float16(0x1p-140f) == 0x0000);  // a float subnormal
  // 2^-14 - 2^-25 is 1023.5 units: a tie between 0x03FF (odd) and 0x0400, the smallest normal.
  CHECK(float_to_float16(0x1p-14f - 0x1p-25f) == 0x0400);
  CHECK(float_to_float16(-0.0f) == 0x8000);
  const std::uint16_t nan = float_to_float16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);
}

TEST_CASE("Floats round to the nearest bfloat16, ties to even, to inf past the largest", "[half]") {
  CHECK(float_to_bfloat16(1.0f) == 0x3F80);
  // The bfloat16 step at 1 is 2^-7. 1 + 2^-8 is a tie between 0x3F80 (even) and 0x3F81: to 0x3F80;
  // 1 + 3·2^-8 is a tie between 0x3F81 and 0x3F82 (even): to 0x3F82.
  CHECK(float_to_bfloat16(1.0f + 0x1p-8f) == 0x3F80);
  CHECK(float_to_bfloat16(1.0f + 3 * 0x1p-8f) == 0x3F82);
  CHECK(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-23f) == 0x3F81);
  CHECK(float_to_bfloat16(0x1.FEp127f) == 0x7F7F);
  // The largest float, (2 - 2^-23) · 2^127, is past the tie between 0x7F7F and 2^128: to inf.
  CHECK(float_to_bfloat16(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(float_to_bfloat16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(float_to_bfloat16(-0.0f) == 0x8000);
  const std::uint16_t nan = float_to_bfloat16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7F80) == 0x7F80);
  CHECK((nan & 0x007F) != 0);
}

TEST_CASE("Every float16 and bfloat16 pattern widens and rounds back to itself, NaNs staying NaNs", "[half]") {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const float h = float16_to_float(b);
    const float bf = bfloat16_to_float(b);
    INFO("pattern 0x" << std::hex << bits);
    if (std::isnan(h)) CHECK(std::isnan(float16_to_float(float_to_float16(h))));
    else if (float_to_float16(h) != b) FAIL_CHECK("float16 round trip gives 0x" << std::hex << float_to_float16(h));
    if (std::isnan(bf)) CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(bf))));
    else if (float_to_bfloat16(bf) != b)
      FAIL_CHECK("bfloat16 round trip gives 0x" << std::hex << float_to_bfloat16(bf));
  }
}

TEST_CASE("A double rounds to float16 and bfloat16 once, not twice through the nearest float", "[half]") {
  // 1 + 2^-11 + 2^-40 lies just above the float16 tie 1 + 2^-11, so its nearest float16 is 1 + 2^-10
  // (0x3C01). Its nearest float is the tie itself (2^-40 is below float's half step 2^-24), which would
  // then round to even, 1 (0x3C00).
  const double above_tie = 1.0 + 0x1p-11 + 0x1p-40;
  CHECK(float_to_float16(static_cast<float>(above_tie)) == 0x3C00);
  CHECK(double_to_float16(above_tie) == 0x3C01);
  CHECK(double_to_float16(1.0 + 0x1p-11 - 0x1p-40) == 0x3C00);
  CHECK(double_to_float16(1.0 + 0x1p-11) == 0x3C00);  // a true tie: to even
  // The same for bfloat16 around its tie 1 + 2^-8 between 0x3F80 and 0x3F81.
  CHECK(float_to_bfloat16(static_cast<float>(1.0 + 0x1p-8 + 0x1p-40)) == 0x3F80);
  CHECK(double_to_bfloat16(1.0 + 0x1p-8 + 0x1p-40) == 0x3F81);
  CHECK(double_to_bfloat16(1.0 + 0x1p-8) == 0x3F80);
  // 0.1: the float16 step in [2^-4, 2^-3) is 2^-14, and 0.1 / 2^-14 = 1638.4, so 1638 · 2^-14 =
  // 0.0999755859375 (0x2E66: exponent 11, mantissa 1638 - 1024 = 614 = 0x266).
  CHECK(double_to_float16(0.1) == 0x2E66);
  CHECK(float16_to_float(0x2E66) == 0.0999755859375f);
  // Beyond the ranges: 1e300 is inf in both (past float too), 65520 is float16's tie to inf.
  CHECK(double_to_float16(1e300) == 0x7C00);
  CHECK(double_to_bfloat16(-1e300) == 0xFF80);
  CHECK(double_to_float16(65519.99) == 0x7BFF);
  CHECK(double_to_float16(65520.0) == 0x7C00);
  CHECK(std::isnan(float16_to_float(double_to_float16(std::numeric_limits<double>::quiet_NaN()))));
}

TEST_CASE(
    "Over a seeded sweep of doubles, double_to_float16 and double_to_bfloat16 give the nearest value, ties "
    "to even",
    "[half]") {
  // Independent of the rounding code: the neighbours of the result, one pattern below and above (for
  // positive finite values), must be no nearer, and an equal distance must leave the even pattern.
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-30, 17);
  const auto check = [](double x, std::uint16_t h, float (*widen)(std::uint16_t), std::uint16_t inf) {
    INFO("x = " << x << ", pattern " << h);
    if (h == inf) {
      CHECK(x >= static_cast<double>(widen(static_cast<std::uint16_t>(inf - 1))));
      return;
    }
    const double at = widen(h), d = std::fabs(x - at);
    if (h > 0) {
      const double below = std::fabs(x - static_cast<double>(widen(static_cast<std::uint16_t>(h - 1))));
      CHECK((d < below || (d == below && h % 2 == 0)));
    }
    const double above = std::fabs(x - static_cast<double>(widen(static_cast<std::uint16_t>(h + 1))));
    CHECK((d < above || (d == above && h % 2 == 0)));
  };
  for (int k = 0; k < 200000; ++k) {
    const double x = std::ldexp(mantissa(gen), exponent(gen));
    check(x, double_to_float16(x), float16_to_float, 0x7C00);
    const double wide = std::ldexp(x, exponent(gen) * 7);  // bfloat16 reaches far further
    check(wide, double_to_bfloat16(wide), bfloat16_to_float, 0x7F80);
  }
}
