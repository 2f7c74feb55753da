#include "text/visible.hpp"

#include <fmt/format.h>

#include "text/utf8.hpp"

namespace attn {

namespace {

bool reorders(char32_t c) { return (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069); }

}  // namespace

std::string visible(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    char32_t code = 0;
    const std::size_t length = utf8_sequence(text, at, code);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[at]));
      ++at;
      continue;
    }
    if (code < 0x20 || code == 0x7F) {
      switch (code) {
        case '\a': out += "\\a"; break;
        case '\b': out += "\\b"; break;
        case '\t': out += "\\t"; break;
        case '\n': out += "\\n"; break;
        case '\v': out += "\\v"; break;
        case '\f': out += "\\f"; break;
        case '\r': out += "\\r"; break;
        default: out += fmt::format("\\x{:02x}", static_cast<unsigned>(code)); break;
      }
    } else if ((code >= 0x80 && code <= 0x9F) || reorders(code)) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(code));
    } else {
      out.append(text.substr(at, length));
    }
    at += length;
  }
  return out;
}

}  // namespace attn
