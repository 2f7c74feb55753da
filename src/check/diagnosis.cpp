#include "check/diagnosis.hpp"

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

}  // namespace

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

}  // namespace attn::check
