#include "render/draw/escape.hpp"

#include <fmt/format.h>

namespace attn {

namespace {

// The two ways the pictures escape markup. They differ in two places only: the apostrophe (&apos; is
// XML's own name, &#39; the reference that every HTML also reads) and the noncharacters U+FFFE and
// U+FFFF, which XML 1.0 forbids outright and HTML only warns about.
enum class Markup { html, xml };

// At text[i], the three bytes of U+FFFE or U+FFFF.
bool noncharacter_at(std::string_view text, std::size_t i) {
  return text.substr(i, 2) == "\xEF\xBF" && i + 2 < text.size() && (text[i + 2] == '\xBE' || text[i + 2] == '\xBF');
}

std::string escape_markup(std::string_view text, Markup markup) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    switch (text[i]) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += markup == Markup::xml ? "&apos;" : "&#39;"; break;
      default:
        if (markup == Markup::xml && noncharacter_at(text, i)) {
          out += text[i + 2] == '\xBE' ? "\\ufffe" : "\\uffff";
          i += 2;
        } else {
          out += text[i];
        }
    }
  }
  return out;
}

}  // namespace

std::string html_escape(std::string_view text) { return escape_markup(text, Markup::html); }

std::string xml_escape(std::string_view text) { return escape_markup(text, Markup::xml); }

std::string json_string(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;  // so that no "</script>" or "<!--" can end or bend the data block
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\u{:04x}", c);
        else out += ch;
    }
  }
  out += '"';
  return out;
}

}  // namespace attn
