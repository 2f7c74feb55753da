#pragma once
// How far a bench run's output is from float64, without an n² reference: a few sampled rows computed
// in double.

#include <cstddef>
#include <vector>

#include "model/problem.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// The float64 reference on sampled rows: for every batch item, `rows` (evenly spread from the first to
// the last query), the output computed in double from the problem's own values, independent of n²
// (keys and values are projected once, each sampled row attends every key its mask leaves).
struct RowReference {
  std::vector<std::size_t> rows;  // the sampled queries, ascending
  Tensor<double> Y;               // (B, rows, d_out) the reference outputs of those rows
};

// `count` query indices spread evenly over [0, n), first and last included (all of them when n <= count).
std::vector<std::size_t> sample_rows(std::size_t n, std::size_t count = 8);
RowReference reference_rows(const Problem& p, std::size_t count = 8);

// The largest |output - reference| over the sampled rows and every output feature; NaN when an
// output there is NaN. output (B, n, d_out).
double max_error(const RowReference& reference, const Tensor<float>& output);
double max_error(const RowReference& reference, const Tensor<double>& output);

}  // namespace attn
