#include "check/judge.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/compare_backward.hpp"
#include "engine/rows.hpp"
#include "lessons/mistaken_backward.hpp"
#include "lessons/mistaken_forward.hpp"
#include "observe/observer.hpp"
#include "ops/attention.hpp"
#include "ops/bounds.hpp"
#include "tensor/half.hpp"
#include "text/number.hpp"
#include "trace/trace.hpp"

namespace attn::check {

namespace {

void gradient_terms_of(const Problem& p, Ours& r);

}  // namespace

Ours reference(const Problem& p, const Given& given, Mistake v, DType dtype, bool gradients) {
  ForwardRun<double> exact = forward<double>(p, v, DType::float64, given);
  Ours r;
  if (gradients) {
    BackwardRun<double> b = backward<double>(p, exact.carry, v, DType::float64, given);
    for (const Step s : gradient_steps()) {
      r.exact[slot(s)] = std::move(b.computed[slot(s)]);
      r.carry[slot(s)] = std::move(b.carry[slot(s)]);
    }
  }
  for (std::size_t s = 0; s < step_count; ++s) {
    r.exact[s] = std::move(exact.computed[s]);
    r.carry[s] = std::move(exact.carry[s]);
  }
  if (dtype == DType::float64) {
    r.in_dtype = r.exact;
  } else {
    const ForwardRun<float> f = forward<float>(p, v, dtype, given);
    for (std::size_t s = 0; s < step_count; ++s) r.in_dtype[s] = cast<double>(f.computed[s]);
    if (gradients) {
      const BackwardRun<float> b = backward<float>(p, f.carry, v, dtype, given);
      for (const Step s : gradient_steps()) r.in_dtype[slot(s)] = cast<double>(b.computed[slot(s)]);
    }
  }
  if (gradients) gradient_terms_of(p, r);
  return r;
}

namespace {

// The magnitudes M of every gradient, element by element: the backward's formulas on absolute values
// (engine/rows.hpp's gradient_magnitudes: the rows' d_terms), from the steps each started from. And the count that
// makes the diff rule's (L + 2)·u·M compare --backward's floor 2·(ε_P + u·(n + m + d_k + d_v + d_model +
// d_context + 8))·M, with ε_P = u·(4·Λ + 2·d_k + 8): a kernel that recomputes the weights from the
// log-sum-exp, as FlashAttention's backward does, is within it.
void gradient_terms_of(const Problem& p, Ours& r) {
  Gradients<double> M = gradient_magnitudes(p, [&r](Step s) -> const Tensor<double>& { return r.carry[slot(s)]; });
  const Tensor<double> Q = magnitude(r.carry[slot(p.rope ? Step::q_rot : Step::q_heads)]);
  const Tensor<double> K = magnitude(r.carry[slot(p.rope ? Step::k_rot : Step::k_heads)]);
  const double lambda = largest_logit(p, Q, K);
  const double sums = static_cast<double>(p.n + p.m + p.d_k + p.d_v + p.d_model + p.d_context + 8);
  r.gradient_count = 2 * (sums + 4 * lambda + 2 * static_cast<double>(p.d_k) + 8) - 2;
  for (const Step s : gradient_steps()) r.gradient_terms[slot(s)] = std::move(M[slot(s)]);
}

// What step `s` sums, from the exact values x of the steps before it and its own (`own`): its row's
// error term (engine/rows.hpp).
Terms terms_of(const Problem& p, const Values<double>& x, const Tensor<double>& own, Step s) {
  if (is_gradient_step(s)) return {magnitude(own), 0};  // judge_against takes a gradient's from Ours
  return row_of<double>(s).terms(ExactValues(x.data(), step_count), own, p);
}

// max |in_dtype - exact| over the elements where both are finite: how far our own run in the dtype is.
double own_error(const Tensor<double>& in_dtype, const Tensor<double>& exact) {
  double e = 0;
  for (std::size_t k = 0; k < exact.size(); ++k) {
    const double a = in_dtype.values()[k], b = exact.values()[k];
    if (std::isfinite(a) && std::isfinite(b)) e = std::max(e, std::fabs(a - b));
  }
  return e;
}

// The rule: a dumped value x agrees with the exact value r when
//   |x - r| <= 2·e + (L + 2)·u·|terms|
// e: the largest error of our own run in the dtype against the exact one (the same inputs), u: the
// dtype's unit roundoff, L: the number of terms of the step's sum and |terms| their magnitudes
// (Σ|a_i·b_i|). The first part is FlashAttention's own test rule (twice a same-precision run's error),
// the second what any order of the sums, and one rounding to store, can move a value. Infinities must
// match; at `masked`, a finite value <= -1e4 where r is -inf counts as masked.
Judged judge(std::span<const double> dumped, const Tensor<double>& exact, const Tensor<double>& in_dtype,
             const Terms& mag, DType dtype, bool masked_step) {
  const double e = own_error(in_dtype, exact), u = unit_roundoff(dtype);
  Judged j;
  double worst_excess = -inf, worst_diff = -1;
  for (std::size_t k = 0; k < dumped.size(); ++k) {
    const double x = dumped[k], r = exact.values()[k];
    double diff = 0;
    if (masked_step && r == -inf && std::isfinite(x) && x <= masked_threshold) {
      ++j.large_negatives;
    } else if (x != r && !(std::isnan(x) && std::isnan(r))) {
      diff = std::isfinite(x) && std::isfinite(r) ? std::fabs(x - r) : inf;
    }
    const double m = mag.of.values()[k];
    const double tol = 2 * e + bound_times((mag.count + 2) * u, std::isfinite(m) ? m : 0.0);
    const bool out = !(diff <= tol);
    if (out) ++j.out;
    j.max_abs = std::max(j.max_abs, diff);
    if (std::isfinite(r) && r != 0) j.max_rel = std::max(j.max_rel, diff / std::fabs(r));
    // The worst element: out of tolerance by the most, else the largest difference.
    const double excess = out ? (std::isfinite(diff) ? diff - tol : inf) : -inf;
    if (excess > worst_excess || (worst_excess == -inf && excess == -inf && diff > worst_diff)) {
      worst_excess = excess;
      worst_diff = diff;
      j.worst = k;
      j.worst_tolerance = tol;
    }
  }
  return j;
}

}  // namespace

// max |dumped - ours| and max |dumped - ours| / |ours|, the masked step's large negatives counting as -inf.
std::pair<double, double> largest_difference(std::span<const double> dumped, const Tensor<double>& ours,
                                             bool masked_step) {
  double max_abs = 0, max_rel = 0;
  for (std::size_t k = 0; k < dumped.size(); ++k) {
    const double x = dumped[k], o = ours.values()[k];
    if (x == o || (std::isnan(x) && std::isnan(o))) continue;
    if (masked_step && o == -inf && std::isfinite(x) && x <= masked_threshold) continue;
    const double diff = std::isfinite(x) && std::isfinite(o) ? std::fabs(x - o) : inf;
    max_abs = std::max(max_abs, diff);
    if (std::isfinite(o) && o != 0) max_rel = std::max(max_rel, diff / std::fabs(o));
  }
  return {max_abs, max_rel};
}

Judged judge_against(const Problem& p, const Ours& r, Step s, std::span<const double> dumped, DType dtype) {
  if (is_gradient_step(s))
    return judge(dumped, r.exact[slot(s)], r.in_dtype[slot(s)], {r.gradient_terms[slot(s)], r.gradient_count}, dtype,
                 false);
  return judge(dumped, r.exact[slot(s)], r.in_dtype[slot(s)], terms_of(p, r.carry, r.exact[slot(s)], s), dtype,
               s == Step::masked);
}

// The dtypes less precise than `dtype`, most precise first.
std::vector<DType> less_precise(DType dtype) {
  switch (dtype) {
    case DType::float64: return {DType::float32, DType::float16, DType::bfloat16};
    case DType::float32: return {DType::float16, DType::bfloat16};
    case DType::float16: return {DType::bfloat16};
    case DType::bfloat16: return {};
  }
  return {};
}

}  // namespace attn::check
