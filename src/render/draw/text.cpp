#include "render/draw/text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace attn {

namespace {

// One UTF-8 sequence at text[k]: its code point and length. A byte that does not start a valid
// sequence is itself (as U+FFFD) with length 1; visible() has written such bytes out before here.
std::pair<char32_t, std::size_t> decode(std::string_view text, std::size_t k) {
  char32_t cp = 0;
  const std::size_t length = utf8_sequence(text, k, cp);
  return length == 0 ? std::pair<char32_t, std::size_t>{0xFFFD, 1} : std::pair{cp, length};
}

// The length of the ANSI escape sequence at text[k] (ESC [ parameters final-byte), or 0.
std::size_t escape_length(std::string_view text, std::size_t k) {
  if (text[k] != '\x1b' || k + 1 >= text.size() || text[k + 1] != '[') return 0;
  for (std::size_t i = k + 2; i < text.size(); ++i)
    if (text[i] >= 0x40 && text[i] <= 0x7E) return i - k + 1;
  return text.size() - k;
}

struct Range {
  char32_t first, last;
};

// Characters that take no column: combining marks, zero-width spaces and joiners, variation selectors.
constexpr std::array<Range, 12> zero_width = {{{0x0300, 0x036F},
                                               {0x0483, 0x0489},
                                               {0x0591, 0x05BD},
                                               {0x0610, 0x061A},
                                               {0x064B, 0x065F},
                                               {0x1AB0, 0x1AFF},
                                               {0x1DC0, 0x1DFF},
                                               {0x200B, 0x200F},
                                               {0x20D0, 0x20FF},
                                               {0xFE00, 0xFE0F},
                                               {0xFE20, 0xFE2F},
                                               {0xE0100, 0xE01EF}}};

// East Asian Wide (W) and Fullwidth (F) blocks of Unicode's EastAsianWidth.txt, merged into the
// blocks they fill, and the emoji that terminals draw two columns wide.
constexpr std::array<Range, 20> wide = {
    {{0x1100, 0x115F}, {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},   {0x2E80, 0x303E},
     {0x3041, 0x33FF}, {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},   {0xA960, 0xA97F},
     {0xAC00, 0xD7A3}, {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},
     {0xFFE0, 0xFFE6}, {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x20000, 0x3FFFD}}};

template <std::size_t N>
bool in(const std::array<Range, N>& ranges, char32_t cp) {
  return std::any_of(ranges.begin(), ranges.end(), [cp](Range r) { return cp >= r.first && cp <= r.last; });
}

std::size_t columns_of(char32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return 0;
  if (cp < 0x300) return 1;
  if (in(zero_width, cp)) return 0;
  return in(wide, cp) ? 2 : 1;
}

// The printer's own symbols in ASCII.
std::string_view ascii_spelling(char32_t cp) {
  switch (cp) {
    case U'·': return "*";
    case U'×': return "x";
    case U'━': return "=";
    case U'…': return "...";
    case U'⋮': return ":";
    case U'ᵀ': return "^T";
    case U'Σ': return "sum";
    case U'Δ': return "d";
    case U'─':
    case U'−':
    case U'–': return "-";
    case U'—': return "--";
    case U'≥': return ">=";
    case U'≤': return "<=";
    case U'≈': return "~";
    case U'±': return "+/-";
    case U'→': return "->";
    case U'←': return "<-";
    case U'∞': return "inf";
    case U'‘':
    case U'’': return "'";
    case U'“':
    case U'”': return "\"";
    case U'η': return "eta";
    case U'γ': return "gamma";
    case U'δ': return "delta";
    case U'π': return "pi";
    case U'▀':
    case U'█': return "#";
    default: return {};
  }
}

}  // namespace

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t k = 0; k < text.size();) {
    if (const std::size_t esc = escape_length(text, k); esc != 0) {
      k += esc;
      continue;
    }
    const auto [cp, length] = decode(text, k);
    width += columns_of(cp);
    k += length;
  }
  return width;
}

std::string truncate_to(std::string_view text, std::size_t width, std::string_view ellipsis) {
  if (display_width(text) <= width) return std::string(text);
  const std::size_t room = width > display_width(ellipsis) ? width - display_width(ellipsis) : 0;
  std::string out;
  std::size_t used = 0;
  bool coloured = false;
  for (std::size_t k = 0; k < text.size();) {
    if (const std::size_t esc = escape_length(text, k); esc != 0) {
      const std::string_view seq = text.substr(k, esc);
      out += seq;
      coloured = seq != "\x1b[0m" && seq != "\x1b[m";
      k += esc;
      continue;
    }
    const auto [cp, length] = decode(text, k);
    const std::size_t w = columns_of(cp);
    if (used + w > room) break;
    used += w;
    out += text.substr(k, length);
    k += length;
  }
  if (width >= display_width(ellipsis)) out += ellipsis;
  if (coloured) out += "\x1b[0m";
  return out;
}

std::vector<std::string> wrap(std::string_view text, std::size_t width, std::string_view indent) {
  std::vector<std::string> lines;
  std::string current;
  std::size_t used = 0;
  bool fresh = true;  // no word on the current line yet (its leading spaces are kept on the first line)
  for (std::size_t k = 0; k < text.size();) {
    // The spaces before the next word are kept as they are, unless the line breaks there.
    const std::size_t begin = std::min(text.find_first_not_of(' ', k), text.size());
    std::size_t end = text.find(' ', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view spaces = text.substr(k, begin - k), word = text.substr(begin, end - begin);
    k = end;
    if (word.empty()) {
      if (lines.empty() && fresh) current += spaces;
      break;
    }
    const std::size_t w = display_width(word);
    // A word too wide for any line starts where it is; one that fits a fresh line moves there.
    const bool fits_a_line = display_width(indent) + w <= width;
    if (!fresh && used + spaces.size() + w > width && (fits_a_line || used + spaces.size() >= width)) {
      lines.push_back(std::move(current));
      current = std::string(indent);
      used = display_width(indent);
    } else {
      current += spaces;
      used += spaces.size();
    }
    // A word wider than the line (a long path, say) is broken across lines, never cut short.
    std::string_view rest = word;
    while (display_width(rest) > (width > used ? width - used : 0)) {
      const std::size_t room = width > used ? width - used : 0;
      std::size_t taken = 0, columns = 0;
      while (taken < rest.size()) {
        const auto [cp, length] = decode(rest, taken);
        if (columns + columns_of(cp) > room && (taken > 0 || used > display_width(indent))) break;
        columns += columns_of(cp);
        taken += length;
      }
      current += rest.substr(0, taken);
      rest.remove_prefix(taken);
      if (rest.empty()) break;
      lines.push_back(std::move(current));
      current = std::string(indent);
      used = display_width(indent);
    }
    current += rest;
    used += display_width(rest);
    fresh = false;
  }
  lines.push_back(std::move(current));
  return lines;
}

std::string to_ascii(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t k = 0; k < text.size();) {
    const auto [cp, length] = decode(text, k);
    k += length;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
      continue;
    }
    if (cp == U'√') {
      // √d_k as sqrt(d_k): the argument is the name or number that follows.
      std::size_t end = k;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_' || text[end] == '.'))
        ++end;
      out += fmt::format("sqrt({})", text.substr(k, end - k));
      k = end;
    } else if (const std::string_view spelled = ascii_spelling(cp); !spelled.empty()) out += spelled;
    else if (cp <= 0xFFFF) out += fmt::format("\\u{:04X}", static_cast<std::uint32_t>(cp));
    else out += fmt::format("\\U{:08X}", static_cast<std::uint32_t>(cp));
  }
  return out;
}

}  // namespace attn
