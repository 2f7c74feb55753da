#pragma once
// attn::bit_cast: std::bit_cast's meaning (the same bits, read as another type of the same size), from the
// compiler's builtin, which GCC 12 and Clang 14 both have. The explorer's core (docs/explorer.md) is
// compiled against Emscripten 3.1.6's libc++ 13, which has no std::bit_cast yet.

#include <type_traits>

namespace attn {

template <class To, class From>
requires(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> &&
         std::is_trivially_copyable_v<From>) constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}

}  // namespace attn
