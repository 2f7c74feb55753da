#include "render/draw/notes.hpp"

#include <algorithm>
#include <cmath>
#include <span>

namespace attn {

namespace {

// Whether every row of `t` (along its last axis) holds one number, to a part in 10⁹.
bool rows_hold_one_number(const Tensor<double>& t) {
  const std::size_t m = t.shape().back();
  for (std::size_t r = 0; m > 0 && r < t.size() / m; ++r) {
    const std::span<const double> row = t.values().subspan(r * m, m);
    const auto [lo, hi] = std::minmax_element(row.begin(), row.end());
    if (*hi - *lo > 1e-9 * std::max(1.0, std::fabs(*hi))) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> softmax_backward_note(const Trace& trace) {
  const StepRecord* dA = find_step(trace, Step::d_weights);
  if (dA == nullptr || !rows_hold_one_number(dA->value)) return std::nullopt;
  return "Every row of d_weights holds one number c, so D = rowsum(dA ⊙ A) = c (the weights sum to 1) and "
         "dA − D = 0: every score's gradient is 0. Moving weight from one key to another cannot change L when "
         "every key's value pulls L alike (in \"The cat sat\" with dY = 1, every row of V is [1, 1], so every "
         "dA = dO·v = 1 + 1 = 2).";
}

}  // namespace attn
