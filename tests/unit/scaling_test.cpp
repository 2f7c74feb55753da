// The experiment of `attn-trace scaling` (src/lessons/scaling.hpp): its random numbers against values
// worked out independently, its statistics on cases small enough to check by hand, and its determinism.

#include <cmath>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "lessons/scaling.hpp"

using namespace attn;

TEST_CASE("SplitMix64 seeded with 0 gives the reference outputs of Vigna's splitmix64.c", "[scaling][random]") {
  // state += 0x9e3779b97f4a7c15, then the two xor-shift-multiply rounds and a last xor-shift, worked
  // out with Python's arbitrary-precision integers (masking to 64 bits after each step).
  SplitMix64 rng(0);
  CHECK(rng.next() == 0xe220a8397b1dcdafULL);
  CHECK(rng.next() == 0x6e789e6aa1b965f4ULL);
  CHECK(rng.next() == 0x06c45d188009454fULL);
  CHECK(rng.next() == 0xf88bb8a8724c81ecULL);
}

TEST_CASE("uniform_open0 takes the top 53 bits plus one, so it is above 0 and at most 1", "[scaling][random]") {
  SplitMix64 rng(0);
  // ((0xe220a8397b1dcdaf >> 11) + 1) / 2^53
  CHECK(uniform_open0(rng) == 0.8833108082136427);
}

TEST_CASE("Box-Muller's first pair from seed 0 is the cosine then the sine of the same radius", "[scaling][random]") {
  // u1 = 0.8833108082136427, u2 = 0.4315279970485101 (the first two uniforms);
  // √(−2 ln u1)·cos(2π u2) = −0.45275774021745807, ·sin(2π u2) = 0.20776603893419174 (Python's math).
  NormalSampler normal(0);
  CHECK(normal.next() == Approx(-0.45275774021745807).epsilon(1e-14));
  CHECK(normal.next() == Approx(0.20776603893419174).epsilon(1e-14));
}

TEST_CASE("100,000 normal draws have mean about 0 and variance about 1", "[scaling][random]") {
  // The standard error of the mean is 1/√100000 ≈ 0.0032 and of the variance √(2/100000) ≈ 0.0045:
  // the bounds are five of them, which a correct sampler misses with probability about 1e-6.
  NormalSampler normal(42);
  std::vector<double> x(100'000);
  for (double& v : x) v = normal.next();
  CHECK(std::abs(mean(x)) < 0.016);
  CHECK(std::abs(variance(x) - 1) < 0.023);
}

TEST_CASE("variance subtracts the mean and divides by N", "[scaling][stats]") {
  // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32, / 8 = 4.
  const std::vector<double> x = {2, 4, 4, 4, 5, 5, 7, 9};
  CHECK(mean(x) == 5);
  CHECK(variance(x) == 4);
  // Shifted by 1e9 the deviations are the same; one pass of Σx² − (Σx)²/N would lose them.
  std::vector<double> shifted = x;
  for (double& v : shifted) v += 1e9;
  CHECK(variance(shifted) == 4);
}

TEST_CASE("two equal logits give s = 1/2 each, and s(1-s) = 0.25 exactly, the ceiling", "[scaling][stats]") {
  const std::vector<double> x = {3, 3};
  const std::vector<double> s = softmax(x);
  CHECK(s == std::vector<double>{0.5, 0.5});
  CHECK(mean_softmax_gradient(x) == 0.25);
}

TEST_CASE("N equal logits give s = 1/N each, and a mean s(1-s) of (1 - 1/N)/N, just under 1/N", "[scaling][stats]") {
  const std::vector<double> x(4, -7.0);
  CHECK(softmax(x) == std::vector<double>(4, 0.25));
  CHECK(mean_softmax_gradient(x) == Approx(0.25 * 0.75).epsilon(1e-15));  // 3/16
}

TEST_CASE("a softmax of huge scores does not overflow, and saturates to one weight", "[scaling][stats]") {
  // 1000 and 0: s = (1/(1+e^-1000), e^-1000/(1+e^-1000)) = (1, 0) in doubles; exp(1000) alone is inf.
  const std::vector<double> x = {1000, 0};
  const std::vector<double> s = softmax(x);
  CHECK(s[0] == 1.0);
  CHECK(s[1] == 0.0);
  CHECK(mean_softmax_gradient(x) == 0.0);
}

TEST_CASE("the largest weight's 1 - s is the others' share, not 1 minus a rounded s", "[scaling][stats]") {
  // 40 and 0: e = (1, e^-40), s_top = 1/(1 + e^-40) rounds to 1, yet 1 − s_top = e^-40/(1 + e^-40) ≈ e^-40.
  // Both terms are e^-40 (to 1e-17), so the mean over 2 is e^-40 ≈ 4.248e-18; 1.0 − s_top would give 0.
  const std::vector<double> x = {40, 0};
  CHECK(mean_softmax_gradient(x) == Approx(std::exp(-40.0)).epsilon(1e-12));
}

TEST_CASE("row_dots takes one dot product per row", "[scaling][stats]") {
  // q = [[1, 2], [3, 4]], k = [[5, 6], [7, 8]]: 1·5 + 2·6 = 17, 3·7 + 4·8 = 53.
  const std::vector<double> q = {1, 2, 3, 4}, k = {5, 6, 7, 8};
  CHECK(row_dots(q, k, 2) == std::vector<double>{17, 53});
  CHECK_THROWS_AS(row_dots(q, std::vector<double>{1, 2}, 2), std::invalid_argument);
}

TEST_CASE("the memory estimate counts q, k at the largest d_k and five score vectors, and saturates",
          "[scaling][memory]") {
  const std::vector<std::size_t> d_ks = {1, 1024, 16};
  CHECK(scaling_memory(1000, d_ks) == 1000 * (2 * 1024 + 5) * 8);
  CHECK(scaling_memory(std::size_t{1} << 62, d_ks) == SIZE_MAX);
  CHECK(scaling_memory(2, std::vector<std::size_t>{SIZE_MAX / 2}) == SIZE_MAX);
}

TEST_CASE("the experiment is deterministic: the same seed the same figures, another seed others",
          "[scaling][experiment]") {
  const std::vector<std::size_t> d_ks = {1, 64};
  const ScalingResult a = scaling_experiment(d_ks, 200, 5), b = scaling_experiment(d_ks, 200, 5);
  const ScalingResult c = scaling_experiment(d_ks, 200, 6);
  REQUIRE(a.rows.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(a.rows[i].d_k == d_ks[i]);
    CHECK(a.rows[i].raw_var == b.rows[i].raw_var);
    CHECK(a.rows[i].raw_mean_grad == b.rows[i].raw_mean_grad);
    CHECK(a.rows[i].scaled_max_weight == b.rows[i].scaled_max_weight);
    CHECK(a.rows[i].raw_var != c.rows[i].raw_var);
  }
  // d_k = 1: dividing by √1 changes nothing.
  CHECK(a.rows[0].raw_var == a.rows[0].scaled_var);
  CHECK(a.rows[0].raw_mean_grad == a.rows[0].scaled_mean_grad);
}

TEST_CASE("the experiment shows what the explainer meant: variance d_k raw, 1 scaled, raw saturates",
          "[scaling][experiment]") {
  const std::vector<std::size_t> d_ks = {1024};
  const ScalingRow row = scaling_experiment(d_ks, 1000, 0).rows.at(0);
  // var of N = 1000 scores has a relative standard error of about √(2/1000) ≈ 4.5%: 20% is four of them.
  CHECK(row.raw_var == Approx(1024).epsilon(0.2));
  CHECK(row.scaled_var == Approx(1).epsilon(0.2));
  CHECK(row.scaled_mean_grad < 1.0 / 1000);
  CHECK(row.scaled_mean_grad > 0.5 / 1000);
  CHECK(row.raw_max_weight > 0.5);
  CHECK(row.raw_mean_grad < row.scaled_mean_grad / 2);
  CHECK_THROWS_AS(scaling_experiment(d_ks, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(scaling_experiment(std::vector<std::size_t>{0}, 10, 0), std::invalid_argument);
}
