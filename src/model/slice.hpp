#pragma once
// A part of a causal self-attention problem: some of its queries against the keys up to the last of them.
// Decoding (engine/decoder.hpp) is made of such parts: the prompt against itself (prefill), and each later
// token against every key so far.

#include <cstddef>
#include <optional>
#include <string>

#include "model/problem.hpp"

namespace attn {

// Why `p` cannot be decoded token by token, or nothing when it can: decoding needs self-attention (keys
// from the tokens themselves, no `context`) under a causal or sliding-window mask, so that no token sees
// a later one; and no dropout, which inference does not apply.
std::optional<std::string> decode_refusal(const Problem& p);

// Queries [q_begin, q_end) of `p` against keys [k_begin, q_end): the rows of X, C, the labels, RoPE's
// table and ALiBi's positions cut to them, the mask moved so that each query sees the keys it saw in `p`
// (a causal or sliding-window band aligned bottom-right), the scale, heads and weights unchanged, no dY.
// Precondition: decode_refusal(p) is empty, k_begin <= q_begin < q_end <= p.n.
Problem slice_problem(const Problem& p, std::size_t q_begin, std::size_t q_end, std::size_t k_begin);

}  // namespace attn
