#pragma once
// How a decode is asked for (attn-trace decode's --prompt, --split-kv, --page-size): plain values, so that
// what records, writes and draws a decode knows them without the engine (engine/decoder.hpp).

#include <cstddef>
#include <cstdint>
#include <utility>

namespace attn {

// How to decode (attn-trace decode's options).
struct DecodePlan {
  std::size_t prompt = 0;       // tokens of the prefill, 0 … n - 1: the rest are decoded one by one
  std::size_t split = 0;        // --split-kv: chunks of the cache per decode step; 0 or 1: unsplit
  std::size_t page_size = 0;    // --page-size: tokens per page of a paged cache; 0: contiguous
  std::uint64_t page_seed = 0;  // the order in which the pool hands out its pages
};

// The prompt's length when --prompt is not given: all but the last three tokens.
inline std::size_t default_prompt(std::size_t n) { return n > 3 ? n - 3 : 0; }

// Chunk s of S of a cache of L keys: [⌊s·L/S⌋, ⌊(s+1)·L/S⌋), as even as whole keys allow (empty when L < S).
inline std::pair<std::size_t, std::size_t> chunk_of(std::size_t s, std::size_t S, std::size_t L) {
  return {s * L / S, (s + 1) * L / S};
}

}  // namespace attn
