#include "text/utf8.hpp"

#include <cctype>
#include <string>

namespace attn {

std::size_t utf8_sequence(std::string_view text, std::size_t at, char32_t& code) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  std::size_t length = 0;
  if (lead < 0x80) length = 1, code = lead;
  else if (lead >= 0xC2 && lead <= 0xDF) length = 2, code = lead & 0x1Fu;
  else if (lead >= 0xE0 && lead <= 0xEF) length = 3, code = lead & 0x0Fu;
  else if (lead >= 0xF0 && lead <= 0xF4) length = 4, code = lead & 0x07u;
  else return 0;
  if (at + length > text.size()) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0u) != 0x80u) return 0;
    code = (code << 6) | (byte(at + i) & 0x3Fu);
  }
  if ((length == 3 && code < 0x800) || (length == 4 && (code < 0x10000 || code > 0x10FFFF)) ||
      (code >= 0xD800 && code <= 0xDFFF))
    return 0;
  return length;
}

bool utf8_locale(std::string_view name) {
  std::string lower;
  for (const char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("utf-8") != std::string::npos || lower.find("utf8") != std::string::npos;
}

}  // namespace attn
