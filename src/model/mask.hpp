#pragma once
// Which keys each query may attend: the resolved form of the input's `mask`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace attn {

enum class MaskKind { none, causal, sliding_window, padding, custom };
enum class Align { top_left, bottom_right };

std::string_view to_string(MaskKind kind);
std::string_view to_string(Align align);

struct Mask {
  MaskKind kind = MaskKind::none;
  Align align = Align::top_left;
  std::size_t window = 0;      // sliding_window: itself and the window - 1 keys before it
  Tensor<std::uint8_t> keep;   // padding: (B, m), 1 = a real key; one row is shared by all items
  Tensor<std::uint8_t> allow;  // custom: (B, n, m), 1 = allowed; one matrix is shared by all items
  std::size_t n = 0;           // queries
  std::size_t m = 0;           // keys

  // The alignment offset o: 0 for top_left, m - n for bottom_right (negative when n > m).
  long long offset() const;

  // May query i of batch item b attend key j?
  bool allows(std::size_t b, std::size_t i, std::size_t j) const;

  // The key range [first, last) that the causal or sliding-window band leaves to query i; the whole
  // row for the other kinds, whose gaps allows() reports. Lets flash skip whole tiles cheaply.
  std::pair<std::size_t, std::size_t> band(std::size_t i) const;

  // One line for people: "causal (top_left, offset 0)".
  std::string summary() const;
};

}  // namespace attn
