#pragma once
// diff's judge, inside check/ (check/diff.cpp walks the dump with it): ours computed in the dump's dtype
// beside float64, from the input or from the dump's own earlier steps, and the rule that says whether a
// dumped value agrees with it (docs/diff.md, "The rule").

#include <cstddef>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "check/diff.hpp"
#include "lessons/mistaken_backward.hpp"
#include "lessons/mistaken_forward.hpp"

namespace attn::check {

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

// Every step of `p` (and with `gradients` every gradient) with mistake `v` made, in `dtype` and in
// float64, each resuming from `given` where it holds the step.
Ours reference(const Problem& p, const Given& given, Mistake v, DType dtype, bool gradients = false);

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

// max |dumped - ours| and max |dumped - ours| / |ours|, the masked step's large negatives counting as -inf.
std::pair<double, double> largest_difference(std::span<const double> dumped, const Tensor<double>& ours,
                                             bool masked_step);

// The dump's values of step `s` judged by the rule against ours in `r`.
Judged judge_against(const Problem& p, const Ours& r, Step s, std::span<const double> dumped, DType dtype);

// The dtypes less precise than `dtype`, most precise first.
std::vector<DType> less_precise(DType dtype);

}  // namespace attn::check
