#pragma once
// Small pieces of English that every layer writes: counted nouns.

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace attn {

// "1 row", "3 rows": the count and the noun that fits it.
inline std::string plural(std::size_t count, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", count, count == 1 ? one : many);
}

}  // namespace attn
