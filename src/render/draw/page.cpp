#include "render/draw/page.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "render/draw/text.hpp"

namespace attn {

std::string Page::plain(std::string_view text) const { return o_.unicode ? std::string(text) : to_ascii(text); }

void Page::line(std::string_view text) {
  text_ += truncate_to(plain(text), o_.width, o_.unicode ? "…" : "...");
  text_ += '\n';
}

void Page::paragraph(std::string_view text, std::string_view indent) {
  for (const std::string& l : wrap(plain(text), std::max<std::size_t>(o_.width, 1), indent)) {
    text_ += l;
    text_ += '\n';
  }
}

void Page::heading(std::string_view title) {
  const std::string start = plain(fmt::format("━━ {} ", title));
  std::string rule;
  for (std::size_t k = display_width(start); k < o_.width; ++k) rule += o_.unicode ? "━" : "=";
  const std::string text = truncate_to(start + rule, o_.width, o_.unicode ? "…" : "...");
  text_ += o_.color ? fmt::format("\x1b[1;36m{}\x1b[0m", text) : text;
  text_ += '\n';
}

void Page::pieces(const std::vector<std::string>& parts, std::string_view indent) {
  const std::size_t width = std::max<std::size_t>(o_.width, 1);
  std::string current;
  const auto flush = [&] {
    for (const std::string& l : wrap(current, width, indent)) {
      text_ += l;
      text_ += '\n';
    }
  };
  for (const std::string& raw : parts) {
    const std::string piece = plain(raw);
    if (current.empty()) current = piece;
    else if (display_width(current) + 1 + display_width(piece) <= width) current += " " + piece;
    else {
      flush();
      current = std::string(indent) + piece;
    }
  }
  flush();
}

}  // namespace attn
