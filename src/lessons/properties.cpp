#include "lessons/properties.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "observe/steps.hpp"
#include "ops/random.hpp"
#include "trace/record.hpp"
#include "trace/trace.hpp"
#include "text/number.hpp"
#include "text/words.hpp"

namespace attn {

namespace {

void require_weights(const Tensor<double>& A, const char* who) {
  if (A.rank() != 4)
    throw std::invalid_argument(fmt::format("{}: expects weights (B, h, n, m), got rank {}", who, A.rank()));
}

}  // namespace

PropertyCheck rows_sum_to_one(const Tensor<double>& A, std::span<const EmptyRow> empty, DType dtype,
                              const Tensor<double>* sink_share) {
  require_weights(A, "rows_sum_to_one");
  const std::size_t B = A.dim(0), h = A.dim(1), n = A.dim(2), m = A.dim(3);
  const auto is_empty = [&](std::size_t b, std::size_t i) {
    return std::find(empty.begin(), empty.end(), EmptyRow{b, i}) != empty.end();
  };
  PropertyCheck c{.name = "rows sum to 1"};
  // The exact softmax of the rounded exps sums to 1 whatever the scores were, so only the sum's m - 1
  // roundings and the division's one are left; +2 leaves room for second-order terms.
  c.tolerance = static_cast<double>(m + 2) * unit_roundoff(dtype);
  double empty_sum = 0;      // the largest |Σ_j a_ij| over the emptied rows: 0 by the one policy
  double least_weights = 1;  // with sinks, the smallest 1 - share: what the weights alone sum to at least
  // r_i = Σ_j a_ij, summed in long double so that the check adds no rounding of its own worth counting
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i) {
        long double r = sink_share ? (*sink_share)(b, hd, i) : 0;
        least_weights = std::min(least_weights, 1 - static_cast<double>(r));
        for (std::size_t j = 0; j < m; ++j) r += A(b, hd, i, j);
        const double sum = static_cast<double>(r);
        if (is_empty(b, i)) empty_sum = std::max(empty_sum, std::fabs(sum));
        else c.figure = std::max(c.figure, std::fabs(sum - 1));  // NaN is caught below
        if (std::isnan(sum)) c.figure = sum;
      }
  c.holds = c.figure <= c.tolerance && empty_sum == 0;
  c.reason = fmt::format("softmax divides each row by its own sum; tolerance (m + 2)·u, m = {}", m);
  if (sink_share) {
    c.tolerance += unit_roundoff(dtype);  // the sink's share is one more rounded term of the sum
    c.reason = fmt::format(
        "softmax divides each row by its own sum, the sink's exp included, so the weights and "
        "the sink's share sum to 1 (the weights alone to as little as {}); tolerance (m + 3)·u, "
        "m = {}",
        significant_value(least_weights, 3), m);
  }
  if (!empty.empty())
    c.reason += fmt::format("; the {} the mask empties sum to {} (zero weights)", plural(empty.size(), "row", "rows"),
                            empty_sum == 0 ? "0" : significant_value(empty_sum, 3));
  return c;
}

PropertyCheck dropped_rows_sum_to_one(const Tensor<double>& A_drop, double p, DType dtype) {
  require_weights(A_drop, "dropped_rows_sum_to_one");
  const std::size_t B = A_drop.dim(0), h = A_drop.dim(1), n = A_drop.dim(2), m = A_drop.dim(3);
  PropertyCheck c{.name = "dropped rows sum to 1", .expected = false};
  // each dropped weight is a weight times 1/(1 - p), one rounding more than the weight's
  c.tolerance = static_cast<double>(m + 3) * unit_roundoff(dtype);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i) {
        long double r = 0;
        for (std::size_t j = 0; j < m; ++j) r += A_drop(b, hd, i, j);
        const double sum = static_cast<double>(r);
        if (sum == 0) continue;  // a row with nothing to attend, or every weight dropped
        c.figure = std::isnan(sum) ? sum : std::max(c.figure, std::fabs(sum - 1));
      }
  c.holds = c.figure <= c.tolerance;
  c.reason = fmt::format(
      "not expected: dropout zeroes each weight with probability {} and scales the rest by "
      "1/(1 - p) = {}, so a row sums to 1 only on average over seeds",
      significant_value(p, 3), significant_value(1 / (1 - p), 4));
  return c;
}

PropertyCheck columns_sum_to_one(const Tensor<double>& A, DType dtype) {
  require_weights(A, "columns_sum_to_one");
  const std::size_t B = A.dim(0), h = A.dim(1), n = A.dim(2), m = A.dim(3);
  PropertyCheck c{.name = "columns sum to 1", .expected = false};
  // Each weight is within about (m + 1)·u of its exact value, and the column's sum adds n - 1 roundings.
  c.tolerance = static_cast<double>(m + n + 2) * unit_roundoff(dtype);
  // c_j = Σ_i a_ij
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t j = 0; j < m; ++j) {
        long double col = 0;
        for (std::size_t i = 0; i < n; ++i) col += A(b, hd, i, j);
        const double dev = std::fabs(static_cast<double>(col) - 1);
        c.figure = std::isnan(dev) ? dev : std::max(c.figure, dev);
      }
  c.holds = c.figure <= c.tolerance;
  c.reason =
      "not expected: softmax normalises each query's row; a key's column sums to how much attention it "
      "draws";
  return c;
}

PropertyCheck masked_keys_get_zero(const Tensor<double>& A, const Mask& mask) {
  require_weights(A, "masked_keys_get_zero");
  const std::size_t B = A.dim(0), h = A.dim(1), n = A.dim(2), m = A.dim(3);
  PropertyCheck c{.name = "masked keys get weight 0"};
  std::size_t forbidden = 0;  // (query, key) pairs per head
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j) {
        if (mask.allows(b, i, j)) continue;
        ++forbidden;
        for (std::size_t hd = 0; hd < h; ++hd) {
          const double a = std::fabs(A(b, hd, i, j));
          c.figure = std::isnan(a) ? a : std::max(c.figure, a);
        }
      }
  c.holds = c.figure <= c.tolerance;  // exactly 0, NaN fails
  c.reason = forbidden == 0
                 ? fmt::format("the mask ({}) forbids no key here: nothing to check", mask.summary())
                 : fmt::format("{} forbidden ({}), in every head: their score is -∞ and exp(-∞) = 0 exactly",
                               plural(forbidden, "(query, key) pair is", "(query, key) pairs are"), mask.summary());
  return c;
}

std::vector<std::size_t> seeded_permutation(std::size_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<std::size_t> pi(n);
  const auto identity = [&pi] {
    for (std::size_t i = 0; i < pi.size(); ++i)
      if (pi[i] != i) return false;
    return true;
  };
  do {
    std::iota(pi.begin(), pi.end(), std::size_t{0});
    // Fisher–Yates: swap each position, from the last, with one at or before it (the modulo's bias is
    // below 2^-40 for any n a problem can have, and every permutation stays reachable)
    for (std::size_t k = n; k > 1; --k) std::swap(pi[k - 1], pi[rng.next() % k]);
  } while (n >= 2 && identity());
  return pi;
}

Problem permute_tokens(const Problem& p, std::span<const std::size_t> pi) {
  if (pi.size() != p.n)
    throw std::invalid_argument(fmt::format("permute_tokens: {} positions for {} queries", pi.size(), p.n));
  Problem q = p;
  // X'[b][i] = X[b][π(i)]; self-attention's keys are the same tokens, so they move too
  const auto rows = [&](const Tensor<double>& T, Tensor<double>& out) {
    const std::size_t width = T.dim(2);
    for (std::size_t b = 0; b < T.dim(0); ++b)
      for (std::size_t i = 0; i < pi.size(); ++i)
        for (std::size_t k = 0; k < width; ++k) out(b, i, k) = T(b, pi[i], k);
  };
  rows(p.X, q.X);
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) q.tokens[b][i] = p.tokens[b][pi[i]];
  if (!p.cross) {
    rows(p.C, q.C);
    q.context_tokens = q.tokens;
  }
  Mask& mask = q.mask;
  if (mask.kind == MaskKind::padding && !p.cross) {
    // keep'[b][j] = keep[b][π(j)]: a padding key stays padding wherever it goes
    for (std::size_t b = 0; b < mask.keep.dim(0); ++b)
      for (std::size_t j = 0; j < p.m; ++j) mask.keep(b, j) = p.mask.keep(b, pi[j]);
  }
  if (mask.kind == MaskKind::custom) {
    // allow'[b][i][j] = allow[b][π(i)][π(j)] (keys unmoved in cross-attention)
    for (std::size_t b = 0; b < mask.allow.dim(0); ++b)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) mask.allow(b, i, j) = p.mask.allow(b, pi[i], p.cross ? j : pi[j]);
  }
  return q;
}

Expectation equivariance_expected(const Problem& p) {
  if (p.n < 2) return {true, "one query: every permutation leaves it where it is"};
  const std::string_view kind = p.cross ? "cross-attention" : "self-attention";
  if (p.rope || p.alibi)
    return {false, fmt::format("not expected: {} gives each place its own position, which stays when the tokens "
                               "move, so a moved token is turned or biased differently",
                               p.rope && p.alibi ? "RoPE and ALiBi"
                               : p.rope          ? "RoPE"
                                                 : "ALiBi")};
  if (p.dropout)
    return {false,
            "not expected: dropout's keep mask is drawn from each weight's place (query, key), which stays "
            "when the tokens move, so a moved token's weights are kept or dropped differently"};
  switch (p.mask.kind) {
    case MaskKind::causal:
    case MaskKind::sliding_window:
      return {false, fmt::format("not expected: the {} mask depends on positions, so a token moved elsewhere sees "
                                 "other keys (positions added after the shuffle would break it too)",
                                 p.mask.kind == MaskKind::causal ? "causal" : "sliding-window")};
    case MaskKind::padding:
      if (!p.cross) return {true, "self-attention has no notion of order; the padding was moved with its tokens"};
      break;
    case MaskKind::custom:
      return {true, fmt::format("{} has no notion of order; the custom mask was permuted with the {}", kind,
                                p.cross ? "queries (its rows)" : "tokens (rows and columns)")};
    case MaskKind::none: break;
  }
  if (p.cross) return {true, "cross-attention: each query's output depends on itself and the unmoved context only"};
  return {true,
          "self-attention has no notion of order: it sees the tokens as a set (positions already in X move "
          "with them)"};
}

PropertyCheck permutation_equivariance(const Problem& p, const Tensor<double>& Y, const Tensor<double>& Y_permuted,
                                       std::span<const std::size_t> pi, double tolerance) {
  if (Y.shape() != Y_permuted.shape() || Y.rank() != 3 || Y.dim(1) != pi.size())
    throw std::invalid_argument(fmt::format("permutation_equivariance: outputs {} and {} for {} positions", Y.shape(),
                                            Y_permuted.shape(), pi.size()));
  const Expectation e = equivariance_expected(p);
  PropertyCheck c{.name = "permutation equivariance", .expected = e.expected, .tolerance = tolerance};
  // max |Y[b][π(i)][k] - Y'[b][i][k]|
  for (std::size_t b = 0; b < Y.dim(0); ++b)
    for (std::size_t i = 0; i < Y.dim(1); ++i)
      for (std::size_t k = 0; k < Y.dim(2); ++k) {
        const double d = std::fabs(Y(b, pi[i], k) - Y_permuted(b, i, k));
        c.figure = std::isnan(d) ? d : std::max(c.figure, d);
      }
  c.holds = c.figure <= c.tolerance;
  std::string order;
  for (std::size_t i = 0; i < std::min<std::size_t>(pi.size(), 8); ++i)
    order += fmt::format("{}{}", i ? "," : "", pi[i]);
  if (pi.size() > 8) order += ",…";
  c.reason = fmt::format("{}; π = [{}]", e.reason, order);
  return c;
}

PropertyCheck flash_equals_naive(const CompareRecord& r) {
  return PropertyCheck{
      .name = "flash equals naive",
      .holds = r.pass,
      .expected = true,
      .figure = r.flash_vs_ref.max_abs,
      .tolerance = r.bound,
      .reason = fmt::format("compare's rule: max|flash − ref| ≤ 2·max|naive − ref| + noise, ref: naive in {}",
                            reference_name(r.dtype))};
}

namespace {

const Tensor<double>& step_value(const Trace& trace, Step step) {
  if (const StepRecord* rec = find_step(trace, step)) return rec->value;
  throw std::logic_error(fmt::format("check_properties: the trace has no step {}", step_info(step).name));
}

}  // namespace

std::vector<PropertyCheck> check_properties(const std::shared_ptr<const Problem>& problem,
                                            const PropertiesRequest& request) {
  const Problem& p = *problem;

  // pass 1: naive, flash and the wider reference, keeping naive's weights
  RunRequest run;
  run.dtype = request.dtype;
  run.tile_size = request.tile_size;
  run.filter.only = {Step::weights, Step::sink_weights, Step::dropped};
  run.filter.tiles = false;
  const Trace trace = record_compare(problem, run);
  const CompareRecord& compare = *trace.compare;
  const Tensor<double> A = with_batch_axis(step_value(trace, Step::weights), 4);  // (B, h, n, m)
  const Tensor<double> share =
      p.sinks.empty() ? Tensor<double>() : with_batch_axis(step_value(trace, Step::sink_weights), 3);  // (B, h, n)

  // pass 2: naive again on the permuted tokens, keeping its output
  const std::vector<std::size_t> pi = seeded_permutation(p.n, request.seed);
  run.engine = Engine::naive;
  run.filter.only = {Step::output};
  const Trace permuted = record_run(std::make_shared<const Problem>(permute_tokens(p, pi)), run);
  const Tensor<double> Y_permuted = with_batch_axis(step_value(permuted, Step::output), 3);  // (B, n, d_out)

  // pass 3: the checks. Each run is within compare's Δy of the exact output on the rounded inputs,
  // whatever the order of its sums, so two runs differ by at most 2·max Δy: compare's noise.
  std::vector<PropertyCheck> checks{
      rows_sum_to_one(A, trace.empty_rows, request.dtype, p.sinks.empty() ? nullptr : &share)};
  if (p.dropout)
    checks.push_back(
        dropped_rows_sum_to_one(with_batch_axis(step_value(trace, Step::dropped), 4), p.dropout->p, request.dtype));
  checks.push_back(columns_sum_to_one(A, request.dtype));
  checks.push_back(permutation_equivariance(p, compare.naive, Y_permuted, pi, compare.noise));
  checks.push_back(masked_keys_get_zero(A, p.mask));
  checks.push_back(flash_equals_naive(compare));
  return checks;
}

bool all_expected_hold(std::span<const PropertyCheck> checks) {
  return std::all_of(checks.begin(), checks.end(), [](const PropertyCheck& c) { return c.holds || !c.expected; });
}

}  // namespace attn
