#include "check/diff.hpp"

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

namespace attn {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
// A finite masked score at or below this, where the mask forbids the key, is read as -inf: what
// code that writes -1e9 or the dtype's lowest value for -inf dumps.
constexpr double masked_threshold = -1e4;

// The dump's values of each step (canonical shapes), or nothing.
using Given = GivenSteps;
template <class T>
using Values = TableValues<T>;

// One computation of every step in a dtype, beside the same in float64: what a dumped value is
// judged against. The gradient steps only when the dump holds some (`gradients`).
struct Ours {
  Values<double> exact;             // in float64
  Values<double> carry;             // what the steps after each started from, in float64
  Values<double> in_dtype;          // in the dtype, widened
  Values<double> gradient_terms{};  // the gradients' magnitudes (gradient_terms_of), with `gradients`
  double gradient_count = 0;        // the number of terms that stands for their longest sums
};

void gradient_terms_of(const Problem& p, Ours& r);

Ours reference(const Problem& p, const Given& given, Mistake v, DType dtype, bool gradients = false) {
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
  const Inputs<double> in(p, DType::float64);
  return row_of<double>(s).terms(ExactValues(x.data(), step_count), own, RowContext<double>{p, in});
}

// How the dump's values of one step stand against a reference's.
struct Judged {
  double max_abs = 0;     // against the exact value
  double max_rel = 0;     // max_abs relative to the exact value, where that is finite and not 0
  std::size_t out = 0;    // elements out of tolerance
  std::size_t worst = 0;  // the element furthest out of tolerance (or the largest difference)
  double worst_tolerance = 0;
  std::size_t large_negatives = 0;
  bool ok() const { return out == 0; }
};

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
    const double tol = 2 * e + (mag.count + 2) * u * (std::isfinite(m) ? m : 0.0);
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

std::string label(const Problem& p, const std::string& axis, std::size_t b, std::size_t i) {
  if (axis == "query" && b < p.tokens.size() && i < p.tokens[b].size()) return p.tokens[b][i];
  if (axis == "key" && b < p.context_tokens.size() && i < p.context_tokens[b].size()) return p.context_tokens[b][i];
  return std::to_string(i);
}

// Counts, in the weights of `w` (canonical), the positions the mask forbids that hold weight, and
// the positions it allows that hold none while ours do.
std::pair<std::size_t, std::size_t> mask_counts(const Problem& p, const Tensor<double>& dumped,
                                                const Tensor<double>& ours, bool scores_step) {
  std::size_t forbidden = 0, missing = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < dumped.dim(1); ++hd)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) {
          const double x = dumped(b, hd, i, j), o = ours(b, hd, i, j);
          const bool x_masked = scores_step ? (x == -inf || x <= masked_threshold) : x == 0;
          const bool o_masked = scores_step ? o == -inf : o == 0;
          if (!p.mask.allows(b, i, j) && !x_masked) ++forbidden;
          if (p.mask.allows(b, i, j) && x_masked && !o_masked) ++missing;
        }
  return {forbidden, missing};
}

// A measured sentence on what reproducing the dump with `c` shows at step `s`.
std::string finding(const Problem& p, Mistake c, Step s, const Tensor<double>& dumped, const Tensor<double>& ours,
                    const Judged& with_mistake, std::size_t at) {
  std::string reproduces =
      fmt::format("made on the same inputs, this mistake reproduces the dump's {} (largest difference {})",
                  step_info(s).name, significant_value(with_mistake.max_abs, 6));
  switch (*mistake_info(c).code) {
    case DiagnosisCode::scale:
      if ((s == Step::scaled || s == Step::masked) && ours.values()[at] != 0 && std::isfinite(ours.values()[at])) {
        const double ratio = dumped.values()[at] / ours.values()[at];
        return fmt::format("the dump's value is {} times ours ({} = {}); {}", significant_value(ratio, 6),
                           c == Mistake::no_scale ? "√d_k" : "1/√d_k",
                           significant_value(c == Mistake::no_scale ? 1 / p.scale : p.scale, 6), reproduces);
      }
      return reproduces;
    case DiagnosisCode::softmax_axis:
      if (s == Step::weights) {
        double lo = inf, hi = -inf;
        for (std::size_t b = 0; b < dumped.dim(0); ++b)
          for (std::size_t hd = 0; hd < dumped.dim(1); ++hd)
            for (std::size_t j = 0; j < p.m; ++j) {
              double sum = 0;
              for (std::size_t i = 0; i < p.n; ++i) sum += dumped(b, hd, i, j);
              lo = std::min(lo, sum);
              hi = std::max(hi, sum);
            }
        return fmt::format(
            "the dump's weights sum to 1 down each column (column sums {} to {}), not along each row; {}",
            significant_value(lo, 6), significant_value(hi, 6), reproduces);
      }
      return reproduces;
    case DiagnosisCode::mask:
    case DiagnosisCode::alignment:
      if (s == Step::masked || s == Step::weights) {
        const auto [forbidden, missing] = mask_counts(p, dumped, ours, s == Step::masked);
        if (s == Step::masked)
          return fmt::format("the dump leaves {} forbidden score{} unmasked and masks {} allowed one{}; {}", forbidden,
                             forbidden == 1 ? "" : "s", missing, missing == 1 ? "" : "s", reproduces);
        return fmt::format("the dump puts weight on {} forbidden key{} and none on {} allowed one{}; {}", forbidden,
                           forbidden == 1 ? "" : "s", missing, missing == 1 ? "" : "s", reproduces);
      }
      return reproduces;
    case DiagnosisCode::large_negative:
      if (s == Step::weights && p.m > 0)
        return fmt::format("the rows the mask empties hold weights of about 1/m = {} in the dump, where they are 0; {}",
                           significant_value(1.0 / static_cast<double>(p.m), 6), reproduces);
      return reproduces;
    case DiagnosisCode::head_split: return fmt::format("the dump holds our values in another order; {}", reproduces);
    // a transposed matrix needs no sentence beyond the rule; the backward's codes have their findings in
    // gradient_finding; precision is no mistake of ours
    case DiagnosisCode::transpose:
    case DiagnosisCode::gqa_sum:
    case DiagnosisCode::softmax_backward:
    case DiagnosisCode::precision: break;
  }
  return reproduces;
}

// The largest |sum| of the dump's (n, m) matrices of a score-shaped gradient along each row
// (`columns` false) or down each column: the softmax's backward makes each row of dS'' sum to 0.
double largest_sum(const Tensor<double>& dS, bool columns) {
  const std::size_t B = dS.dim(0), h = dS.dim(1), n = dS.dim(2), m = dS.dim(3);
  double largest = 0;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t a = 0; a < (columns ? m : n); ++a) {
        double sum = 0;
        for (std::size_t c = 0; c < (columns ? n : m); ++c) sum += columns ? dS(b, hd, c, a) : dS(b, hd, a, c);
        largest = std::max(largest, std::fabs(sum));
      }
  return largest;
}

// A measured sentence on what reproducing the dump with the backward mistake `c` shows at gradient `s`.
std::string gradient_finding(const Problem& p, Mistake c, Step s, const Tensor<double>& dumped,
                             const Tensor<double>& ours, const Judged& with_mistake, std::size_t at) {
  const std::string_view name = step_info(s).name;
  std::string reproduces =
      fmt::format("made on the same inputs, this mistake reproduces the dump's {} (largest difference {})", name,
                  significant_value(with_mistake.max_abs, 6));
  const double o = ours.values()[at], x = dumped.values()[at];
  switch (c) {
    case Mistake::backward_no_scale:
      if (o != 0 && std::isfinite(o))
        return fmt::format("the dump's {} is {} times ours (1/scale = {}{}); {}", name, significant_value(x / o, 6),
                           significant_value(1 / p.scale, 6), p.scale_given ? "" : " = √d_k", reproduces);
      return reproduces;
    case Mistake::gqa_first_head:
    case Mistake::gqa_last_head:
      return fmt::format(
          "each key/value head's gradient in the dump is the part of the {} of its {} query heads "
          "alone, not their sum; {}",
          c == Mistake::gqa_first_head ? "first" : "last", p.h / p.g, reproduces);
    case Mistake::softmax_d_from_da:
    case Mistake::softmax_d_from_do:
      if (s == Step::d_masked)
        return fmt::format(
            "the dump's rows of d_masked sum to as much as {} in size, where the softmax's backward "
            "makes each row sum to 0 (ours: {}); {}",
            significant_value(largest_sum(dumped, false), 6), significant_value(largest_sum(ours, false), 6),
            reproduces);
      return reproduces;
    case Mistake::softmax_backward_columns:
      if (s == Step::d_masked)
        return fmt::format(
            "the dump's d_masked sums to 0 down each column (largest |column sum| {}), not along each "
            "row (largest |row sum| {}); {}",
            significant_value(largest_sum(dumped, true), 6), significant_value(largest_sum(dumped, false), 6),
            reproduces);
      return reproduces;
    // the forward pass's mistakes have their findings in finding(); the other backward ones need none beyond it
    case Mistake::none:
    case Mistake::no_scale:
    case Mistake::no_mask:
    case Mistake::mask_after_softmax:
    case Mistake::softmax_columns:
    case Mistake::shared_qkv:
    case Mistake::wrong_reshape:
    case Mistake::minus_1e9:
    case Mistake::dropout_unscaled:
    case Mistake::scale_twice:
    case Mistake::k_untransposed:
    case Mistake::w_q_transposed:
    case Mistake::w_k_transposed:
    case Mistake::w_v_transposed:
    case Mistake::w_o_transposed:
    case Mistake::mask_sees_next:
    case Mistake::mask_misses_diagonal:
    case Mistake::align_flipped:
    case Mistake::dv_untransposed:
    case Mistake::dk_untransposed:
    case Mistake::dq_transposed: break;
  }
  return reproduces;
}

// A window of rows and columns of the last two axes around `at` (of the one axis, for a bias's gradient).
DivergenceWindow window_around(const Problem& p, const std::vector<std::string>& axes,
                               const std::vector<std::size_t>& at, const Tensor<double>& ours,
                               const Tensor<double>& dumped) {
  DivergenceWindow w;
  const Shape& shape = ours.shape();
  if (at.size() == 1) {  // a bias's gradient: one row
    w.col_axis = axes[0];
    w.rows = {0};
    w.row_labels = {""};
    for (std::size_t c = at[0] >= 2 ? at[0] - 2 : 0; c < std::min(shape[0], at[0] + 3); ++c) {
      w.cols.push_back(c);
      w.col_labels.push_back(std::to_string(c));
    }
    std::vector<double> o, d;
    for (const std::size_t c : w.cols) {
      o.push_back(ours.values()[c]);
      d.push_back(dumped.values()[c]);
    }
    w.ours.push_back(std::move(o));
    w.dumped.push_back(std::move(d));
    return w;
  }
  const std::size_t rank = at.size(), ra = rank - 2, ca = rank - 1;
  w.row_axis = axes[ra];
  w.col_axis = axes[ca];
  const auto span_of = [](std::size_t centre, std::size_t extent) {
    std::vector<std::size_t> v;
    const std::size_t first = centre >= 2 ? centre - 2 : 0, last = std::min(extent, centre + 3);
    for (std::size_t k = first; k < last; ++k) v.push_back(k);
    return v;
  };
  w.rows = span_of(at[ra], shape[ra]);
  w.cols = span_of(at[ca], shape[ca]);
  for (const std::size_t r : w.rows) w.row_labels.push_back(label(p, w.row_axis, at[0], r));
  for (const std::size_t c : w.cols) w.col_labels.push_back(label(p, w.col_axis, at[0], c));
  std::size_t base = 0;  // the flat offset of the (rows, cols) matrix holding `at`
  for (std::size_t a = 0; a < ra; ++a) base = (base + at[a]) * shape[a + 1];
  base *= shape[ca];
  for (const std::size_t r : w.rows) {
    std::vector<double> o, d;
    for (const std::size_t c : w.cols) {
      const std::size_t k = base + r * shape[ca] + c;
      o.push_back(ours.values()[k]);
      d.push_back(dumped.values()[k]);
    }
    w.ours.push_back(std::move(o));
    w.dumped.push_back(std::move(d));
  }
  return w;
}

}  // namespace

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::agrees: return "agrees";
    case Verdict::differs: return "differs";
    case Verdict::follows: return "follows";
  }
  return "?";
}

std::string_view to_string(Fusion fusion) {
  switch (fusion) {
    case Fusion::none: return "none";
    case Fusion::later_step: return "later_step";
    case Fusion::unnormalised: return "unnormalised";
  }
  return "?";
}

Shape canonical_shape(Step step, const Problem& p) { return step_shape(step, p, true); }

namespace {

// A step of one head's tokens and features, (B, h, n, d): the dump may hold it tokens first.
bool is_head_step(Step s) {
  const Dim first = step_info(s).dims.front();
  return (first == Dim::head || first == Dim::kv_head) && !is_score_step(s);
}

}  // namespace

std::vector<DumpLayout> layouts_that_fit(Step step, const Problem& p, const Shape& shape) {
  const Shape canonical = canonical_shape(step, p);
  const std::vector<std::string> names = dim_names(step, true, p.layout);
  // A parameter's gradient has no batch axis to leave out: its shape is the parameter's, in the input's layout.
  if (step_info(step).parameter) {
    if (shape == canonical) return {DumpLayout{false, HeadOrder::heads_first, names}};
    return {};
  }
  // The head axis (axis 1 of the 4-axis steps) may be left out when it has extent 1: one head.
  const bool has_heads = canonical.size() == 4;
  std::vector<DumpLayout> fits;
  for (const HeadOrder order : {HeadOrder::heads_first, HeadOrder::tokens_first}) {
    if (order == HeadOrder::tokens_first && !is_head_step(step)) break;
    Shape s = canonical;
    std::vector<std::string> dims = names;
    if (order == HeadOrder::tokens_first) {
      std::swap(s[1], s[2]);
      std::swap(dims[1], dims[2]);
    }
    const std::size_t head_axis = order == HeadOrder::tokens_first ? 2 : 1;
    for (const bool batch : {true, false}) {
      if (!batch && p.B != 1) continue;
      for (const bool heads : {true, false}) {
        if (!heads && (!has_heads || canonical[1] != 1 || order == HeadOrder::tokens_first)) continue;
        Shape fit;
        std::vector<std::string> fit_dims;
        for (std::size_t a = 0; a < s.size(); ++a) {
          if ((a == 0 && !batch) || (a == head_axis && !heads)) continue;
          fit.push_back(s[a]);
          fit_dims.push_back(dims[a]);
        }
        if (fit == shape) fits.push_back({batch, order, std::move(fit_dims)});
      }
    }
  }
  return fits;
}

namespace {

// The ops a line of code folds into the step before without computing anything new of its own.
bool folds_in(Op op) {
  return op == Op::relayout || op == Op::rotation || op == Op::scale || op == Op::add_bias || op == Op::mask;
}

}  // namespace

std::vector<Step> fused_steps(Step named, const Problem& p, std::span<const Step> dumped) {
  // The step graph (observe/steps.cpp) read forward from `named`: the next step that uses the last one
  // taken must use it alone and fold in; the walk stops at any other use.
  std::vector<Step> chain;
  Step last = named;
  for (const Step s : all_steps()) {
    if (slot(s) <= slot(last) || !step_applies(s, p)) continue;
    const std::vector<Step> in = inputs_of(s, p);
    if (std::find(in.begin(), in.end(), last) == in.end()) continue;
    if (in.size() != 1 || !folds_in(step_info(s).op) || std::find(dumped.begin(), dumped.end(), s) != dumped.end())
      break;
    chain.push_back(s);
    last = s;
  }
  return chain;
}

bool fits_some_reading(Step named, const Problem& p, const Shape& shape, std::span<const Step> dumped) {
  if (!layouts_that_fit(named, p, shape).empty()) return true;
  const std::vector<Step> fused = fused_steps(named, p, dumped);
  return std::any_of(fused.begin(), fused.end(), [&](Step s) { return !layouts_that_fit(s, p, shape).empty(); });
}

std::string shape_mismatch(Step step, const Problem& p, const std::string& source, const Shape& shape) {
  const Shape c = canonical_shape(step, p);
  const std::vector<std::string> names = dim_names(step, true, p.layout);
  std::vector<std::string> parts;
  for (std::size_t a = 0; a < c.size(); ++a) parts.push_back(fmt::format("{} {}", names[a], c[a]));
  return fmt::format("{}: shape ({:n}) does not fit step {} of this input: ({}){}{}{}", source, shape,
                     step_info(step).name, fmt::join(parts, ", "),
                     p.B == 1 && !step_info(step).parameter ? ", or without the batch axis" : "",
                     c.size() == 4 && c[1] == 1 ? ", or without the head axis" : "",
                     is_head_step(step) ? ", with the head and token axes in either order" : "");
}

Tensor<double> to_canonical(Step step, const Problem& p, const DumpLayout& layout, std::span<const double> values) {
  const Shape canonical = canonical_shape(step, p);
  Tensor<double> out(canonical, std::vector<double>(values.begin(), values.end()));
  if (layout.order == HeadOrder::heads_first) return out;
  // (B, n, h, d) -> (B, h, n, d)
  const std::size_t B = canonical[0], H = canonical[1], N = canonical[2], D = canonical[3];
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < N; ++t)
      for (std::size_t hd = 0; hd < H; ++hd)
        for (std::size_t d = 0; d < D; ++d) out(b, hd, t, d) = values[((b * N + t) * H + hd) * D + d];
  return out;
}

namespace {

// The dump read into canonical shapes, one slot per step: the step it holds.
struct ReadDump {
  Given given;     // what our steps resume from: the masked step's large negatives read as -inf
  Given as_given;  // the same, with the masked step's large negatives left as they were dumped
  std::array<const DumpedStep*, table_size> source{};
  std::array<DumpLayout, table_size> layouts{};
  std::array<Fusion, table_size> fusion{};
  std::vector<std::string> notes;  // one per dump read as another step than its name's
};

// Of two readings that both fit (h == n), the one nearer our trace.
std::size_t nearest_reading(const Problem& p, Step s, std::span<const double> values,
                            const std::vector<DumpLayout>& fits, const Tensor<double>& ours) {
  std::size_t best = 0;
  double best_error = inf;
  for (std::size_t f = 0; f < fits.size() && fits.size() > 1; ++f) {
    const Tensor<double> t = to_canonical(s, p, fits[f], values);
    double e = 0;
    for (std::size_t k = 0; k < t.size(); ++k) {
      const double diff = std::fabs(t.values()[k] - ours.values()[k]);
      e = std::max(e, std::isnan(diff) ? 0.0 : diff);
    }
    if (e < best_error) {
      best_error = e;
      best = f;
    }
  }
  return best;
}

// A large negative where the mask forbids, read as -inf from here on. S (B, h, n, m)
void read_large_negatives_as_masked(const Problem& p, Tensor<double>& S) {
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) {
          double& x = S(b, hd, i, j);
          if (!p.mask.allows(b, i, j) && std::isfinite(x) && x <= masked_threshold) x = -inf;
        }
}

// One way to read a dump: as step `holds`, in `layout`, its values in the canonical shape as dumped.
struct Reading {
  Step holds;
  Fusion fusion = Fusion::none;
  DumpLayout layout;
  Tensor<double> value;
};

// `d` read as step `s` in the layout nearest ours; nothing when its shape fits no layout of `s`.
std::optional<Reading> read_as(const Problem& p, const DumpedStep& d, Step s, const Ours& full) {
  const std::vector<DumpLayout> fits = layouts_that_fit(s, p, d.shape);
  if (fits.empty()) return std::nullopt;
  const std::size_t best = nearest_reading(p, s, d.values, fits, full.exact[slot(s)]);
  return Reading{s, s == d.step ? Fusion::none : Fusion::later_step, fits[best],
                 to_canonical(s, p, fits[best], d.values)};
}

// Weights before the division, A·l = exp(S'' − max) row by row, divided by each row's sum l. Such a row
// is never negative and its largest value is exp(0) = 1 in any dtype; a row of zeros (one the mask
// empties) stays zero. Nothing when some row is not so. W (…, m)
std::optional<Tensor<double>> rows_divided_by_sums(Tensor<double> W, DType dtype) {
  const std::size_t m = W.shape().back();
  if (m == 0) return std::nullopt;
  const double slack = 4 * unit_roundoff(dtype);  // a max reduced in another order, rounded
  const std::span<double> w = W.values();
  for (std::size_t first = 0; first < w.size(); first += m) {
    const std::span<double> row = w.subspan(first, m);
    double top = 0, l = 0;
    for (const double x : row) {
      if (!(x >= 0) || !std::isfinite(x)) return std::nullopt;
      top = std::max(top, x);
      l += x;
    }
    if (l == 0) continue;
    if (std::fabs(top - 1) > slack) return std::nullopt;
    for (double& x : row) x /= l;
  }
  return W;
}

// Every reading of `d`: its named step, the steps it may hold (fused_steps), and for weights, the
// weights before the division.
std::vector<Reading> readings_of(const Problem& p, const DumpedStep& d, std::span<const Step> dumped,
                                 const Ours& full) {
  std::vector<Reading> readings;
  if (std::optional<Reading> r = read_as(p, d, d.step, full)) readings.push_back(std::move(*r));
  if (d.step == Step::weights && !readings.empty())
    if (std::optional<Tensor<double>> w = rows_divided_by_sums(readings.front().value, d.dtype))
      readings.push_back({Step::weights, Fusion::unnormalised, readings.front().layout, std::move(*w)});
  for (const Step s : fused_steps(d.step, p, dumped))
    if (std::optional<Reading> r = read_as(p, d, s, full)) readings.push_back(std::move(*r));
  return readings;
}

// How `d` is read: the first of its readings that agrees with ours from the dump's earlier steps
// (`earlier`), its named step first; when none agrees, the first its shape fits (the walk then finds
// where it differs). A shape that fits no reading is an std::invalid_argument.
Reading choose_reading(const Problem& p, const DumpedStep& d, std::span<const Step> dumped, const Ours& full,
                       const Given& earlier, DType dtype) {
  std::vector<Reading> readings = readings_of(p, d, dumped, full);
  if (readings.empty()) throw std::invalid_argument(shape_mismatch(d.step, p, d.source, d.shape));
  if (readings.size() > 1) {
    const Ours resumed = reference(p, earlier, Mistake::none, dtype);
    for (Reading& r : readings)
      if (judge_against(p, resumed, r.holds, r.value.values(), dtype).ok()) return std::move(r);
  }
  return std::move(readings.front());
}

// What a step folds into the one before it, as a fusion note names it: "1/√d_k", "the mask".
std::string folded(Step s, const Problem& p) {
  switch (step_info(s).op) {
    case Op::relayout: return is_head_step(s) ? "the split into heads" : "the merge of the heads";
    case Op::rotation: return "RoPE's rotation";
    case Op::scale: return p.scale_given ? fmt::format("the scale {}", significant_value(p.scale, 6)) : "1/√d_k";
    case Op::add_bias: return "ALiBi's bias";
    case Op::mask: return "the mask";
    case Op::projection:
    case Op::dot_products:
    case Op::softcap:
    case Op::softmax:
    case Op::weighted_sum:
    case Op::dropout:
    case Op::softmax_backward:
    case Op::input_gradient:
    case Op::weight_gradient:
    case Op::bias_gradient: break;
  }
  return std::string(step_info(s).name);
}

// The one line that says how a dump holding more than its name says was read: "scores.npy: your
// scores already include 1/√d_k: read as our `scaled`".
std::string fusion_note(const Problem& p, const DumpedStep& d, const Reading& r, std::span<const Step> dumped) {
  if (r.fusion == Fusion::unnormalised)
    return fmt::format(
        "{}: your weights are exp(S'' − max) before the division by each row's sum: read as our "
        "`weights` once each row is divided by its sum",
        d.source);
  std::vector<std::string> parts;
  for (const Step s : fused_steps(d.step, p, dumped)) {
    parts.push_back(folded(s, p));
    if (s == r.holds) break;
  }
  std::string what = parts.back();
  if (parts.size() > 1) what = fmt::format("{} and {}", fmt::join(parts.begin(), parts.end() - 1, ", "), parts.back());
  const std::string_view name = step_info(d.step).name;
  return fmt::format("{}: your {} already include{} {}: read as our `{}`", d.source, name,
                     name.ends_with('s') ? "" : "s", what, step_info(r.holds).name);
}

ReadDump read_dump(const Problem& p, const std::vector<DumpedStep>& dumped, const Ours& full, DType dtype) {
  std::vector<Step> named;
  std::vector<const DumpedStep*> in_order;
  for (const DumpedStep& d : dumped) {
    named.push_back(d.step);
    in_order.push_back(&d);
  }
  // In pipeline order, so that each dump is read against ours from the dump's earlier steps.
  std::stable_sort(in_order.begin(), in_order.end(),
                   [](const DumpedStep* a, const DumpedStep* b) { return slot(a->step) < slot(b->step); });
  ReadDump r;
  for (const DumpedStep* d : in_order) {
    Reading reading = choose_reading(p, *d, named, full, r.given, dtype);
    const Step s = reading.holds;
    if (reading.fusion != Fusion::none) r.notes.push_back(fusion_note(p, *d, reading, named));
    r.as_given[slot(s)] = reading.value;
    if (s == Step::masked) read_large_negatives_as_masked(p, reading.value);
    r.given[slot(s)] = std::move(reading.value);
    r.source[slot(s)] = d;
    r.layouts[slot(s)] = reading.layout;
    r.fusion[slot(s)] = reading.fusion;
  }
  return r;
}

// Every known mistake that, made on the same inputs, reproduces the dump at step `s`, then whether a
// less precise dtype explains it (computed in it, stored as the dump's dtype).
std::vector<Diagnosis> diagnose(const Problem& p, const ReadDump& read, Step s, const Tensor<double>& as_dumped,
                                const Ours& resumed, const Judged& local, DType dtype) {
  std::vector<Diagnosis> found;
  const bool gradient = is_gradient_step(s);
  for (const Mistake c : diagnosable(p, gradient)) {
    // The large-negative mistake starts from the masked scores as dumped.
    const Ours r = reference(p, c == Mistake::minus_1e9 ? read.as_given : read.given, c, dtype, gradient);
    const Judged with = judge_against(p, r, s, as_dumped.values(), dtype);
    if (with.ok())
      found.push_back({*mistake_info(c).code, diagnosis_of(c, p),
                       gradient ? gradient_finding(p, c, s, as_dumped, resumed.exact[slot(s)], with, local.worst)
                                : finding(p, c, s, as_dumped, resumed.exact[slot(s)], with, local.worst)});
  }
  for (const DType lower : less_precise(dtype)) {
    Ours r = reference(p, read.given, Mistake::none, lower, gradient);
    // A gradient's floor in a half type is a good part of its size: the diagnosis asks for the strict
    // part of the rule alone, twice our own error in that dtype and one rounding (L = 0).
    if (gradient) r.gradient_count = 0;
    const Judged with = judge_against(p, r, s, as_dumped.values(), lower);
    if (!with.ok()) continue;
    const std::string_view stored = name_of(read.source[slot(s)]->dtype);
    found.push_back({DiagnosisCode::precision, fmt::format("computed in {}", name_of(lower)),
                     fmt::format("the dump's largest difference, {}, is within what {} arithmetic gives here ({}): the "
                                 "values were probably computed in {} and stored as {}",
                                 significant_value(local.max_abs, 6), name_of(lower),
                                 significant_value(with.worst_tolerance, 6), name_of(lower), stored)});
    break;
  }
  return found;
}

// Where step `s` first goes wrong: the worst element, a window around it, and the diagnosis.
Divergence divergence_at(const Problem& p, const ReadDump& read, Step s, const Tensor<double>& as_dumped,
                         const Ours& resumed, const Judged& local, DType dtype) {
  Divergence dv;
  dv.step = s;
  dv.index = unravel_index(local.worst, canonical_shape(s, p));
  dv.axes = dim_names(s, true, p.layout);
  for (std::size_t a = 0; a < dv.index.size(); ++a) dv.labels.push_back(label(p, dv.axes[a], dv.index[0], dv.index[a]));
  dv.ours = resumed.in_dtype[slot(s)].values()[local.worst];
  dv.dumped = as_dumped.values()[local.worst];
  dv.tolerance = local.worst_tolerance;
  dv.out_of_tolerance = local.out;
  dv.elements = as_dumped.size();
  dv.window = window_around(p, dv.axes, dv.index, resumed.in_dtype[slot(s)], as_dumped);
  dv.diagnosis = diagnose(p, read, s, as_dumped, resumed, local, dtype);
  return dv;
}

// The notes on how step `s` was read: large negatives taken as masked, tokens before heads.
void add_reading_notes(const StepJudgement& j, const DumpLayout& layout, std::vector<std::string>& notes) {
  if (j.large_negatives > 0)
    notes.push_back(fmt::format("{}: {} finite value{} of -1e4 or less where the mask forbids, read as -∞", j.source,
                                j.large_negatives, j.large_negatives == 1 ? "" : "s"));
  if (layout.order == HeadOrder::tokens_first)
    notes.push_back(
        fmt::format("{}: read as ({}), the tokens before the heads", j.source, fmt::join(layout.dims, ", ")));
}

}  // namespace

namespace {

// The row of step `s`: its figures against our run from the input and from the dump's earlier steps, and
// its verdict from the latter (follows is decided after).
StepJudgement judgement_of(const ReadDump& read, Step s, const Ours& full, const Ours& resumed, const Judged& local) {
  const DumpedStep& d = *read.source[slot(s)];
  const std::span<const double> as_dumped = read.as_given[slot(s)]->values();
  StepJudgement j{.step = s,
                  .named = d.step,
                  .fusion = read.fusion[slot(s)],
                  .source = d.source,
                  .dumped_shape = d.shape,
                  .layout = read.layouts[slot(s)],
                  .dtype = d.dtype};
  std::tie(j.max_abs, j.max_rel) = largest_difference(as_dumped, full.in_dtype[slot(s)], s == Step::masked);
  j.max_abs_resumed = largest_difference(as_dumped, resumed.in_dtype[slot(s)], s == Step::masked).first;
  j.tolerance = local.worst_tolerance;
  j.out_of_tolerance = local.out;
  j.large_negatives = local.large_negatives;
  j.verdict = local.ok() ? Verdict::agrees : Verdict::differs;
  return j;
}

// The figures of the judgement that gave the verdict: a row shows a value over its tolerance exactly when
// it does not agree.
void show_judged(StepJudgement& j, const Judged& local, const Judged& against_trace) {
  const Judged& by = j.verdict == Verdict::follows ? against_trace : local;
  j.judged_against_input = j.verdict == Verdict::follows;
  j.judged_max_abs = by.max_abs;
  j.judged_max_rel = by.max_rel;
  j.judged_tolerance = by.worst_tolerance;
}

}  // namespace

namespace {

// The problem with the upstream gradient a dump of gradients is judged with: the input's dY (its "dY", or
// drawn by --grad-seed), else the dump's own d_output, else 1 everywhere; where it came from, as diff's
// JSON names it, and the note that says so.
struct WithUpstream {
  Problem problem;
  std::string upstream;  // "input", "grad_seed", "dump", "ones"
  std::string note;
};

WithUpstream with_upstream(const Problem& input, const std::vector<DumpedStep>& dumped) {
  WithUpstream w{input, "ones",
                 "the upstream gradient dY is 1 everywhere (L = ΣY): the input has no \"dY\" and the dump no "
                 "d_output"};
  if (input.upstream == Upstream::input) {
    w.upstream = "input";
    w.note = "the upstream gradient dY is the input's \"dY\"";
    return w;
  }
  if (input.upstream == Upstream::seeded) {
    w.upstream = "grad_seed";
    w.note =
        fmt::format("the upstream gradient dY is drawn from a standard normal with --grad-seed {}", input.grad_seed);
    return w;
  }
  const auto d_output =
      std::find_if(dumped.begin(), dumped.end(), [](const DumpedStep& d) { return d.step == Step::d_output; });
  if (d_output == dumped.end()) return w;
  const std::vector<DumpLayout> fits = layouts_that_fit(Step::d_output, input, d_output->shape);
  if (fits.empty()) return w;  // refused by its shape when it is read
  w.problem.dY = to_canonical(Step::d_output, input, fits.front(), d_output->values);
  w.upstream = "dump";
  w.note = fmt::format("the upstream gradient dY is the dump's own d_output ({}): the input has no \"dY\"",
                       d_output->source);
  return w;
}

}  // namespace

DiffResult diff_dump(const Problem& input, const std::vector<DumpedStep>& dumped, DType dtype) {
  DiffResult result;
  result.dtype = dtype;
  const bool gradients =
      std::any_of(dumped.begin(), dumped.end(), [](const DumpedStep& d) { return is_gradient_step(d.step); });
  const WithUpstream dY = gradients ? with_upstream(input, dumped) : WithUpstream{};
  const Problem& p = gradients ? dY.problem : input;
  result.upstream = dY.upstream;

  // pass 1: every dumped step read into its canonical shape, as the step it holds
  const Ours full = reference(p, Given{}, Mistake::none, dtype, gradients);
  const ReadDump read = read_dump(p, dumped, full, dtype);
  result.notes = read.notes;
  if (gradients) result.notes.push_back(dY.note);
  if (const auto& theirs = read.given[slot(Step::dropped)]; p.dropout && theirs) {
    // The dump's keep mask against the seed's: where a weight is not 0, is it kept by both or dropped by both?
    const Tensor<double>& weights = full.exact[slot(Step::weights)];
    const Tensor<double>& seeded = full.exact[slot(Step::dropped)];
    std::size_t choices = 0, other = 0;
    for (std::size_t e = 0; e < theirs->size() && e < seeded.size(); ++e) {
      if (weights.values()[e] == 0) continue;
      ++choices;
      if ((theirs->values()[e] != 0) != (seeded.values()[e] != 0)) ++other;
    }
    result.notes.push_back(fmt::format(
        "dropped: the keep mask is read from the dump (a weight is kept where the dump's is not 0), so its weights "
        "and their 1/(1 - p) are judged, not its random numbers; {} of its {} keep-or-drop choices differ from the "
        "mask of seed {} (Philox4x32-10)",
        other, choices, p.dropout->seed));
  }

  // pass 2: each dumped step judged against ours from the dump's earlier steps (resumed) and from the
  // input (full), forward steps first, then the gradients in the backward's order; at the first that is
  // wrong itself, pass 3: the diagnosis (divergence_at)
  const Ours resumed = reference(p, read.given, Mistake::none, dtype, gradients);
  std::vector<Step> differing;
  std::vector<Step> walk(all_steps().begin(), all_steps().end());
  if (gradients) walk.insert(walk.end(), gradient_steps().begin(), gradient_steps().end());
  for (const Step s : walk) {
    if (!read.given[slot(s)]) continue;
    // Judge the dump's values as dumped: the masked step before its large negatives were read as -inf.
    const Tensor<double>& as_dumped = *read.as_given[slot(s)];
    const Judged local = judge_against(p, resumed, s, as_dumped.values(), dtype);
    const Judged against_trace = judge_against(p, full, s, as_dumped.values(), dtype);
    StepJudgement j = judgement_of(read, s, full, resumed, local);
    if (!local.ok()) {
      if (!result.first) result.first = divergence_at(p, read, s, as_dumped, resumed, local, dtype);
      differing.push_back(s);
    } else if (!against_trace.ok()) {
      for (const Step e : differing)
        if (depends_on(s, e)) j.follows = e;  // the latest one it uses
      if (j.follows) j.verdict = Verdict::follows;
    }
    show_judged(j, local, against_trace);
    add_reading_notes(j, read.layouts[slot(s)], result.notes);
    result.steps.push_back(std::move(j));
  }
  return result;
}

const std::vector<std::pair<std::string_view, Step>>& gradient_aliases() {
  using enum Step;
  static const std::vector<std::pair<std::string_view, Step>> aliases = {
      {"grad_output", d_output},
      {"grad_out", d_output},
      {"d_out", d_output},
      {"dy", d_output},
      {"dY", d_output},
      {"output.grad", d_output},
      {"out.grad", d_output},
      {"grad_attn", d_weights},
      {"dP", d_weights},
      {"dA", d_weights},
      {"grad_q", d_q},
      {"q.grad", d_q},
      {"dq", d_q},
      {"dQ", d_q},
      {"grad_k", d_k},
      {"k.grad", d_k},
      {"dk", d_k},
      {"dK", d_k},
      {"grad_v", d_v},
      {"v.grad", d_v},
      {"dv", d_v},
      {"dV", d_v},
      {"grad_x", d_X},
      {"x.grad", d_X},
      {"dx", d_X},
      {"dX", d_X},
      {"grad_context", d_context},
      {"context.grad", d_context},
      {"W_q.grad", d_W_q},
      {"q_proj.weight.grad", d_W_q},
      {"dW_q", d_W_q},
      {"W_k.grad", d_W_k},
      {"k_proj.weight.grad", d_W_k},
      {"dW_k", d_W_k},
      {"W_v.grad", d_W_v},
      {"v_proj.weight.grad", d_W_v},
      {"dW_v", d_W_v},
      {"W_o.grad", d_W_o},
      {"o_proj.weight.grad", d_W_o},
      {"out_proj.weight.grad", d_W_o},
      {"dW_o", d_W_o},
      {"b_q.grad", d_b_q},
      {"q_proj.bias.grad", d_b_q},
      {"db_q", d_b_q},
      {"b_k.grad", d_b_k},
      {"k_proj.bias.grad", d_b_k},
      {"db_k", d_b_k},
      {"b_v.grad", d_b_v},
      {"v_proj.bias.grad", d_b_v},
      {"db_v", d_b_v},
      {"b_o.grad", d_b_o},
      {"o_proj.bias.grad", d_b_o},
      {"out_proj.bias.grad", d_b_o},
      {"db_o", d_b_o},
  };
  return aliases;
}

std::optional<Step> gradient_alias(std::string_view name) {
  for (const auto& [alias, step] : gradient_aliases())
    if (alias == name) return step;
  return std::nullopt;
}

}  // namespace attn
