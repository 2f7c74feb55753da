#include "render/page.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "render/text.hpp"

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
  for (std::size_t k = display_width(start); k < o_.width; ++k) rule += "━";
  line(start + plain(rule));
}

}  // namespace attn
