#include "render/draw/axis.hpp"

namespace attn::render_detail {

std::vector<std::size_t> shown(std::size_t count, std::size_t limit) {
  std::vector<std::size_t> out;
  if (limit == 0 || count <= limit) {
    for (std::size_t i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  const std::size_t head = (limit + 1) / 2, tail = limit / 2;
  for (std::size_t i = 0; i < head; ++i) out.push_back(i);
  out.push_back(count);  // the gap
  for (std::size_t i = count - tail; i < count; ++i) out.push_back(i);
  return out;
}

}  // namespace attn::render_detail
