#pragma once
// The work that bench's GFLOP/s divide: what the mask leaves of the attention.

#include <cstddef>

#include "model/problem.hpp"

namespace attn {

// The query-key pairs the mask leaves, over every batch item: Σ_b Σ_i #{ j : allows(b, i, j) }.
std::size_t allowed_pairs(const Problem& p);

// The attention's floating-point work for what the mask leaves, counting a multiply-add as two:
// per head and allowed pair, q·k takes 2·d_k and p·v takes 2·d_v, so 4·n·m·d per head unmasked (d_k = d_v
// = d) and 4·d·n(n+1)/2 per head causal. The softmax's exp, max and divisions are not counted.
double attention_flops(const Problem& p);

// The projections' floating-point work, a multiply-add counted as two: q = X·W_q (n × d_model · d_model × h·d_k),
// k and v from the keys' sequence (m × d_context · d_context × g·d_k, g·d_v), and the output projection
// (n × h·d_v · h·d_v × d_out) when there is one; over every batch item. Biases and the reshapes are not counted.
double projection_flops(const Problem& p);

}  // namespace attn
