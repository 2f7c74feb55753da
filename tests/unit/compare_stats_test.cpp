// error_stats on its own: the figures compare prints. Expected values are worked out by hand from
// the definitions in src/engine/compare.hpp (IEEE-754 spacing: 1 ULP of 1.0f is 2^-23).

#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/compare.hpp"

using attn::error_stats;
using attn::ErrorStats;

TEST_CASE("error_stats measures absolute, relative and ULP distance by hand", "[compare]") {
  const float one_up = std::nextafter(1.0f, 2.0f);  // 1 + 2^-23
  const std::vector<double> a = {1.0, static_cast<double>(one_up), 2.0};
  const std::vector<double> b = {1.0, 1.0, 2.5};
  const ErrorStats s = error_stats<float, double>(a, b);
  CHECK(s.max_abs == 0.5);
  CHECK(s.max_rel == 0.2);
  // 2.0f and 2.5f: the spacing above 2 is 2^-22, so 0.5 / 2^-22 = 2^21 ULPs apart.
  CHECK(s.max_ulp == (1u << 21));
}

TEST_CASE("ULP distance counts across zero without overflowing", "[compare]") {
  const float tiny = std::numeric_limits<float>::denorm_min();
  CHECK(error_stats<float, double>(std::vector<double>{tiny}, std::vector<double>{-tiny}).max_ulp == 2);
  CHECK(error_stats<float, double>(std::vector<double>{0.0}, std::vector<double>{-0.0}).max_ulp == 0);
  // The two ends of double's range are 2 · (2^63 - 2^52) - 2 indices apart: more than int64 holds.
  const double big = std::numeric_limits<double>::max();
  const ErrorStats s = error_stats<double, long double>(std::vector<double>{big}, std::vector<long double>{-big});
  CHECK(s.max_ulp == 2 * (std::uint64_t{0x7FEFFFFFFFFFFFFF}));
}

TEST_CASE("A NaN or a differing infinity makes the errors NaN, so the verdict cannot pass", "[compare]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const ErrorStats with_nan = error_stats<float, double>(std::vector<double>{0.5, nan}, std::vector<double>{0.5, 1.0});
  CHECK(std::isnan(with_nan.max_abs));
  CHECK_FALSE(with_nan.max_abs <= 1.0);
  const ErrorStats with_inf = error_stats<float, double>(std::vector<double>{inf}, std::vector<double>{1.0});
  CHECK(std::isnan(with_inf.max_abs));
  const ErrorStats same_inf = error_stats<float, double>(std::vector<double>{inf}, std::vector<double>{inf});
  CHECK(same_inf.max_abs == 0);
  CHECK(same_inf.max_ulp == 0);
}
