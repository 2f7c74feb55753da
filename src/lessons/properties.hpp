#pragma once
// attn-trace properties: what the explainer says attention always does, checked on the user's own input,
// each with the figure it measured, the tolerance it allows and one line of why.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/records.hpp"
#include "tensor/tensor.hpp"

namespace attn {

struct PropertyCheck {
  std::string name;      // "rows sum to 1"
  bool holds = false;    // figure <= tolerance
  bool expected = true;  // whether attention promises it for this input
  double figure = 0;     // what was measured: the largest deviation
  double tolerance = 0;  // how far rounding may move it
  std::string reason;    // one line: why it holds, or why it need not
};

// ------------------------------------------------------------------ checks on the weights
// A (B, h, n, m): the weights of every batch item and head.

// max |Σ_j a_ij - 1| over the rows that have a key to attend, within (m + 2)·u: the sum's m - 1 roundings
// and the division's one, with room to spare; u is the unit roundoff of `dtype`. The rows the mask empties (`empty`)
// must sum to exactly 0. With sinks, `sink_share` (B, h, n) is each row's sink's share, which the row's
// weights and it sum to 1 (within one rounding more).
PropertyCheck rows_sum_to_one(const Tensor<double>& A, std::span<const EmptyRow> empty, DType dtype,
                              const Tensor<double>* sink_share = nullptr);

// With dropout, A_drop (B, h, n, m) the dropped weights: max |Σ_j a_ij - 1| over the rows with a weight
// left, not expected, since dropout keeps the rows' sums at 1 only on average; `p` its probability.
PropertyCheck dropped_rows_sum_to_one(const Tensor<double>& A_drop, double p, DType dtype);

// max |Σ_i a_ij - 1|: not expected, since softmax normalises each query's row, not each key's column.
PropertyCheck columns_sum_to_one(const Tensor<double>& A, DType dtype);

// The largest weight on a key that `mask` forbids: exactly 0 expected (exp(-inf) is 0).
PropertyCheck masked_keys_get_zero(const Tensor<double>& A, const Mask& mask);

// ------------------------------------------------------------------ permutation equivariance

// A permutation π of 0..n-1 from `seed`: SplitMix64 (Steele, Lea and Flood 2014) drives a Fisher–Yates
// shuffle; drawn again while it is the identity (n >= 2), so that the check is never vacuous.
std::vector<std::size_t> seeded_permutation(std::size_t n, std::uint64_t seed);

// `p` with its queries reordered: row i of the result is row π(i) of `p` (X, tokens). Self-attention moves
// the keys with them (C, context tokens), and a padding or custom mask is moved with its tokens; a
// causal or sliding-window mask stays where it is, since it belongs to the positions.
Problem permute_tokens(const Problem& p, std::span<const std::size_t> pi);

// Whether permuting the tokens must permute the outputs the same way for `p`, and the reason.
struct Expectation {
  bool expected;
  std::string reason;
};
Expectation equivariance_expected(const Problem& p);

// max |Y[b][π(i)] - Y'[b][i]| over every batch item, row and column, within `tolerance`.
// Y, Y_permuted (B, n, d_out).
PropertyCheck permutation_equivariance(const Problem& p, const Tensor<double>& Y, const Tensor<double>& Y_permuted,
                                       std::span<const std::size_t> pi, double tolerance);

// ------------------------------------------------------------------ flash

// compare's verdict: max|flash - ref| <= 2 · max|naive - ref| + noise (docs/cli.md).
PropertyCheck flash_equals_naive(const CompareRecord& c);

// ------------------------------------------------------------------ all of them

struct PropertiesRequest {
  DType dtype = DType::float32;
  TileSize tile_size;      // the flash pass's tiles
  std::uint64_t seed = 0;  // of the permutation
};

// Runs naive, flash and the reference on `problem` (record_compare), naive again on the permuted tokens,
// and checks every property above: rows, columns, equivariance, masked keys, flash.
std::vector<PropertyCheck> check_properties(const std::shared_ptr<const Problem>& problem,
                                            const PropertiesRequest& request);

// Whether every property expected to hold holds: the exit code of attn-trace properties.
bool all_expected_hold(std::span<const PropertyCheck> checks);

}  // namespace attn
