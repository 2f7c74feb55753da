#pragma once
// Reading UTF-8 one code point at a time, for what measures text (render/draw/text.hpp) and what makes it
// safe to print (text/visible.hpp), and whether a locale's characters are UTF-8.

#include <cstddef>
#include <string_view>

namespace attn {

// The length of the UTF-8 sequence that starts at text[at] and its code point, or 0 when the bytes
// there are not well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
std::size_t utf8_sequence(std::string_view text, std::size_t at, char32_t& code);

// Whether a locale name (LC_ALL, else LC_CTYPE, else LANG) says its characters are UTF-8.
bool utf8_locale(std::string_view name);

}  // namespace attn
