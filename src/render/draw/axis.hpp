#pragma once
// Which rows and columns of a matrix a table shows when not all of them fit: the terminal's tables and
// the report's tables for readers without scripts show the same ones.

#include <cstddef>
#include <vector>

namespace attn::render_detail {

// Which indices of an axis of `count` to show when at most `limit` fit: the first and the last ones.
// A gap is marked by the index `count` itself.
std::vector<std::size_t> shown(std::size_t count, std::size_t limit);

}  // namespace attn::render_detail
