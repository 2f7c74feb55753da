#pragma once
// The lengths of `attn-trace bench --sweep`.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// The lengths of a sweep "n=A..B": A, the powers of two strictly between A and B, and B (A alone when
// A == B). `error` says what is wrong with the text instead, and `lengths` is then empty.
struct SweepSpec {
  std::vector<std::size_t> lengths;
  std::string error;
};
SweepSpec parse_sweep(std::string_view spec);

}  // namespace attn
