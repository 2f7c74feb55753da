#pragma once
// Plain records of what the engines found, which the trace keeps and the printers and the JSON
// writer read: no engine needs to be compiled to use them.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <vector>

#include "model/run.hpp"
#include "observe/steps.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// A query row that the mask leaves with no key to attend (zero weights, zero head output).
struct EmptyRow {
  std::size_t batch;
  std::size_t query;
  friend bool operator==(const EmptyRow&, const EmptyRow&) = default;
};

// How far one result is from another.
struct ErrorStats {
  double max_abs = 0;         // max |a - b|
  double max_rel = 0;         // max |a - b| / |b| over the entries where b != 0
  std::uint64_t max_ulp = 0;  // max distance in units in the last place of the working dtype
};

// What compare's reference computes in: one precision up from the engines' dtype (x86's 80-bit long
// double for float64).
constexpr std::string_view reference_name(DType t) { return t == DType::float64 ? "long double (80-bit)" : "float64"; }

// One gradient judged by compare --backward: naive's and flash's backward against the wider reference.
struct GradientCheck {
  Step step;
  ErrorStats naive_vs_ref, flash_vs_ref, flash_vs_naive;
  double max_ref = 0;  // max |reference|: the size of the gradient
  double noise = 0;    // the noise floor of this gradient (docs/backward.md)
  double bound = 0;    // 2 · max|naive - ref| + noise
  bool pass = false;   // flash_vs_ref.max_abs <= bound
};

// Naive vs flash vs a wider reference on the same problem, and the verdict (attn-trace compare).
struct CompareRecord {
  DType dtype = DType::float32;  // the working dtype of naive and flash
  TileSize tile_size;            // the flash pass's tiles
  ErrorStats naive_vs_ref, flash_vs_ref, flash_vs_naive;
  std::size_t naive_peak_bytes = 0;  // scores and weights, as the engines counted them
  std::size_t flash_peak_bytes = 0;
  double noise = 0;                        // 2 · the spacing of the working dtype at max |ref| + 0.3
  double bound = 0;                        // 2 · max|naive - ref| + noise
  bool pass = false;                       // flash_vs_ref.max_abs <= bound
  Tensor<double> naive, flash, reference;  // the three outputs (B, n, d_out); the reference rounded to double
  // compare --backward: every gradient that both engines form, in the order of the backward pass; the
  // verdict then holds only if every one of them passes too.
  std::vector<GradientCheck> gradients;
  bool backward = false;
  bool gradients_pass = true;  // every gradient passes its rule
  double largest_logit = 0;    // the largest |exponent| of the softmax the noise floors assume (docs/backward.md)
};

// compare's verdict: the output's rule, and with --backward every gradient's.
inline bool passes(const CompareRecord& c) { return c.pass && c.gradients_pass; }

}  // namespace attn
