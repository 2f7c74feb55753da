#pragma once
// The one random generator of attn-trace (scaling's samples, new's and import's numbers, properties'
// permutation), and its uniform and normal numbers: written out, because std's engines are portable
// but its distributions differ between standard libraries, and every figure the tool prints from a
// seed must be the same on every machine.

#include <cmath>
#include <cstdint>
#include <numbers>

namespace attn {

// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014;
// Vigna's splitmix64.c): the state walks by the golden-ratio constant, each step mixed into an output.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);  // 2^64 / φ, odd: the walk visits every state once
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // A uniform number in (0, 1): the top 53 bits, plus half a step so that it is never 0 (log(0) below).
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1p-53; }

  // A standard normal number, by Box and Muller's transform ("A note on the generation of random normal
  // deviates", 1958): two uniforms give sqrt(-2·log u1)·cos(2π·u2). One number per two draws: simple,
  // and the same on every machine as far as libm's log, sqrt and cos agree (to an ulp).
  double standard_normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * 3.14159265358979323846 * u2);
  }

  // A whole number in [lo, hi], hi - lo < 2^32, from the top 32 bits (multiply and shift, as Lemire's
  // "Fast random integer generation in an interval"): the low bits of the first outputs for small
  // seeds alternate (seed 0: 1, 0, 1, 0, … for twelve outputs), so `% 2` would too.
  long long between(long long lo, long long hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<long long>(((next() >> 32) * span) >> 32);
  }

 private:
  std::uint64_t state_;
};

// A uniform number in (0, 1]: the top 53 bits, plus one, times 2^-53; never 0, so its log is finite.
inline double uniform_open0(SplitMix64& rng) {
  constexpr double two_to_minus_53 = 1.0 / 9007199254740992.0;
  return static_cast<double>((rng.next() >> 11) + 1) * two_to_minus_53;
}

// Standard normal numbers by the Box–Muller transform: two uniforms u1, u2 give two independent
// normals √(−2 ln u1)·cos(2π u2) and √(−2 ln u1)·sin(2π u2), handed out in that order.
// No rejection loop, so a reimplementation that rounds a last bit differently draws the same count.
class NormalSampler {
 public:
  explicit NormalSampler(std::uint64_t seed) : rng_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform_open0(rng_);
    const double u2 = uniform_open0(rng_);
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  SplitMix64 rng_;
  double spare_ = 0;  // the sine half of the last pair, while has_spare_
  bool has_spare_ = false;
};

}  // namespace attn
