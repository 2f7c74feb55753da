#pragma once
// The seeded random input that `attn-trace bench` measures, and its size before it is made.

#include <cstddef>
#include <cstdint>

#include "bench/bench_records.hpp"
#include "model/problem.hpp"

namespace attn {

// The random input of `shape`: X and the context uniform in [-1, 1], the weights uniform in
// [-1, 1]/√d_model (so a projection's outputs stay about as large as X), no biases, one SplitMix64 stream
// drawn in the order X, context, W_q, W_k, W_v, W_o. Self-attention when m == n, cross-attention else.
// Needs n, m >= 1, heads dividing d_model and kv_heads dividing heads.
Problem bench_problem(const BenchShape& shape);

// The sizes of bench_problem(shape) without its values: enough for the memory estimate. Throws
// std::invalid_argument when the sizes do not fit together.
Problem bench_sizes(const BenchShape& shape);

// The bytes bench_problem's float64 values take: X, the context and the four weights.
std::uint64_t bench_problem_bytes(const BenchShape& shape);

}  // namespace attn
