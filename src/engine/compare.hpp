#pragma once
// Naive vs flash vs a float64 reference: the errors, the memory, and the tolerance rule of cli.md.

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/common.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"

namespace attn {

struct ErrorStats {
  double max_abs = 0;          // max |a - b|
  double max_rel = 0;          // max |a - b| / |b| over the entries where b != 0
  std::uint64_t max_ulp = 0;   // max distance in units in the last place of the working dtype
};

struct CompareRecord {
  std::string dtype;                  // the working dtype of naive and flash
  std::size_t block_q = 0, block_k = 0;
  ErrorStats naive_vs_ref, flash_vs_ref, flash_vs_naive;
  std::size_t naive_peak_bytes = 0;   // scores and weights, as the engines counted them
  std::size_t flash_peak_bytes = 0;
  double noise = 0;                   // 2 · max|(ref + 0.3 - 0.3) - ref| in the working dtype
  double bound = 0;                   // 2 · max|naive - ref| + noise
  bool pass = false;                  // flash_vs_ref.max_abs <= bound
  Tensor<double> naive, flash, reference;  // the three outputs (B, n, d_out)
};

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

// Errors of `a` against `b` (same size), the ULPs measured in T after rounding both to T.
template <class T>
ErrorStats error_stats(std::span<const double> a, std::span<const double> b) {
  ErrorStats s;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double diff = std::fabs(a[k] - b[k]);
    s.max_abs = std::max(s.max_abs, diff);
    if (b[k] != 0) s.max_rel = std::max(s.max_rel, diff / std::fabs(b[k]));
    const std::int64_t ua = ulp_index(static_cast<T>(a[k])), ub = ulp_index(static_cast<T>(b[k]));
    s.max_ulp = std::max<std::uint64_t>(s.max_ulp, static_cast<std::uint64_t>(ua > ub ? ua - ub : ub - ua));
  }
  return s;
}

// Runs naive and flash in T and naive in double on the T-rounded inputs, and judges flash by the
// rule that FlashAttention's own tests use: max|flash - ref| <= 2 · max|naive - ref| + noise.
template <class T>
CompareRecord compare_engines(const Problem& p, FlashConfig blocks, Observer& naive_observer, Observer& flash_observer) {
  const AttentionResult<T> naive = run_naive<T>(p, naive_observer);
  const AttentionResult<T> flash = run_flash<T>(p, flash_observer, blocks);
  NullObserver none;
  const AttentionResult<double> ref = run_naive<double>(rounded_inputs<T>(p), none);

  CompareRecord c;
  c.dtype = sizeof(T) == 4 ? "float32" : "float64";
  c.block_q = blocks.Br;
  c.block_k = blocks.Bc;
  c.naive = cast<double>(naive.output);
  c.flash = cast<double>(flash.output);
  c.reference = ref.output;
  c.naive_vs_ref = error_stats<T>(c.naive.values(), c.reference.values());
  c.flash_vs_ref = error_stats<T>(c.flash.values(), c.reference.values());
  c.flash_vs_naive = error_stats<T>(c.flash.values(), c.naive.values());
  c.naive_peak_bytes = naive.peak_score_bytes;
  c.flash_peak_bytes = flash.peak_score_bytes;
  // The rounding noise of the reference's own magnitude: what adding and removing 0.3 loses in T.
  double noise = 0;
  for (const double r : c.reference.values()) {
    const T x = static_cast<T>(r);
    const T shifted = static_cast<T>(static_cast<T>(x + static_cast<T>(0.3)) - static_cast<T>(0.3));
    noise = std::max(noise, std::fabs(static_cast<double>(shifted) - static_cast<double>(x)));
  }
  c.noise = 2 * noise;
  c.bound = 2 * c.naive_vs_ref.max_abs + c.noise;
  c.pass = c.flash_vs_ref.max_abs <= c.bound;
  return c;
}

}  // namespace attn
