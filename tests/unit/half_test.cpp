// float16 and bfloat16 bits to float and back (src/tensor/half.hpp). The bit patterns are worked out
// by hand beside each check; the round trips cover every one of the 65,536 patterns of both formats.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

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
