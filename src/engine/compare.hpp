#pragma once
// Naive vs flash vs a float64 reference: the errors, the memory, and the tolerance rule of cli.md.

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <string>

#include "engine/common.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "observe/records.hpp"

namespace attn {

// The problem with every value rounded to T and back: the reference sees exactly what T engines see.
template <class T>
Problem rounded_inputs(const Problem& p) {
  Problem q = p;
  const auto round = [](Tensor<double>& t) {
    for (double& x : t.values()) x = static_cast<double>(static_cast<T>(x));
  };
  for (Tensor<double>* t : {&q.X, &q.C, &q.W_q, &q.W_k, &q.W_v, &q.W_o}) round(*t);
  for (std::vector<double>* b : {&q.b_q, &q.b_k, &q.b_v, &q.b_o})
    for (double& x : *b) x = static_cast<double>(static_cast<T>(x));
  q.scale = static_cast<double>(static_cast<T>(q.scale));
  return q;
}

// Position of x on the line of all values of T, so that neighbouring values are 1 apart.
template <class T>
std::int64_t ulp_index(T x) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  const Bits bits = std::bit_cast<Bits>(x);
  // Negative values count down from -0 (which lands on 0, like +0).
  return bits < 0 ? -static_cast<std::int64_t>(bits & std::numeric_limits<Bits>::max()) : static_cast<std::int64_t>(bits);
}

// Errors of `a` against `b` (same size), computed in B's precision; the ULPs measured in T after
// rounding both to T. A NaN on either side, or infinities that differ, make every figure NaN (and the
// ULPs the most there are): an error that max() would otherwise skip over.
template <class T, class B>
ErrorStats error_stats(std::span<const double> a, std::span<const B> b) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  ErrorStats s;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const B x = static_cast<B>(a[k]);
    const B diff = x == b[k] ? B{0} : std::fabs(x - b[k]);  // equal infinities differ by nothing
    if (!std::isfinite(diff)) {
      s.max_abs = s.max_rel = nan;
      s.max_ulp = std::numeric_limits<std::uint64_t>::max();
      continue;
    }
    if (!std::isnan(s.max_abs)) s.max_abs = std::max(s.max_abs, static_cast<double>(diff));
    if (b[k] != 0 && !std::isnan(s.max_rel)) s.max_rel = std::max(s.max_rel, static_cast<double>(diff / std::fabs(b[k])));
    // Unsigned arithmetic: the distance between two indices of T always fits in 64 bits.
    const auto ua = static_cast<std::uint64_t>(ulp_index(static_cast<T>(a[k])));
    const auto ub = static_cast<std::uint64_t>(ulp_index(static_cast<T>(b[k])));
    const bool a_above = ulp_index(static_cast<T>(a[k])) > ulp_index(static_cast<T>(b[k]));
    s.max_ulp = std::max(s.max_ulp, a_above ? ua - ub : ub - ua);
  }
  return s;
}

// The arithmetic of the reference: wider than the engines', or the reference would be naive itself.
// For float64 that is x86's 80-bit long double (64-bit significand).
template <class T>
using Reference = std::conditional_t<std::is_same_v<T, float>, double, long double>;

// Judges a flash result (made with `tiles`) against naive's and naive's in a wider type on the
// T-rounded inputs, by the rule that FlashAttention's own tests use:
// max|flash - ref| <= 2 · max|naive - ref| + noise.
template <class T>
CompareRecord judge_flash(const Problem& p, TileSize tiles, const AttentionResult<T>& naive,
                          const AttentionResult<T>& flash) {
  using R = Reference<T>;
  NullObserver none;
  const AttentionResult<R> ref = run_naive<R>(rounded_inputs<T>(p), none);

  CompareRecord c;
  c.dtype = sizeof(T) == 4 ? DType::float32 : DType::float64;
  c.tile_size = tiles;
  c.naive = cast<double>(naive.output);
  c.flash = cast<double>(flash.output);
  c.reference = cast<double>(ref.output);
  c.naive_vs_ref = error_stats<T, R>(c.naive.values(), ref.output.values());
  c.flash_vs_ref = error_stats<T, R>(c.flash.values(), ref.output.values());
  c.flash_vs_naive = error_stats<T, double>(c.flash.values(), c.naive.values());
  c.naive_peak_bytes = naive.peak_score_bytes;
  c.flash_peak_bytes = flash.peak_score_bytes;
  // Rounding noise at the outputs' magnitude. cli.md (after FlashAttention's tests) measures it as
  // max|(ref + 0.3 - 0.3) - ref|, which over a large output reaches one unit in the last place of
  // |ref| + 0.3 but on a handful of values can be 0 by luck, failing a correct flash by one ULP.
  // So the noise here is that measure at its worst: the spacing of T at |ref| + 0.3.
  double noise = 0;
  for (const R r : ref.output.values()) {
    const T y = static_cast<T>(std::fabs(r) + static_cast<R>(0.3));
    noise = std::max(noise, static_cast<double>(std::nextafter(y, std::numeric_limits<T>::infinity()) - y));
  }
  c.noise = 2 * noise;
  c.bound = 2 * c.naive_vs_ref.max_abs + c.noise;
  c.pass = c.flash_vs_ref.max_abs <= c.bound;  // false when either is NaN
  return c;
}

// Runs naive and flash in T and judges flash (judge_flash).
template <class T>
CompareRecord compare_engines(const Problem& p, TileSize tiles, Observer& naive_observer, Observer& flash_observer) {
  const AttentionResult<T> naive = run_naive<T>(p, naive_observer);
  const AttentionResult<T> flash = run_flash<T>(p, flash_observer, tiles);
  return judge_flash<T>(p, tiles, naive, flash);
}

}  // namespace attn
