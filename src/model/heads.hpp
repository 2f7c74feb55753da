#pragma once
// Which key/value head a query head reads: the grouping of grouped-query attention, which the ops, the
// engines and the pictures (render/pages/svg.cpp's head selector) all follow.

#include <cstddef>

namespace attn {

// Query head hd reads key/value head hd / (h/g): consecutive query heads share one K/V head (GQA),
// as PyTorch's repeat_interleave does. g == h is ordinary multi-head, g == 1 is multi-query.
inline std::size_t kv_head_of(std::size_t hd, std::size_t h, std::size_t g) { return hd / (h / g); }

}  // namespace attn
