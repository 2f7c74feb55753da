#pragma once
// Text laid out for a terminal: how many columns it takes (a CJK character takes two, a combining
// accent none, a colour escape none), cutting and wrapping it to a width, and plain ASCII for a
// terminal whose locale is not UTF-8.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "text/utf8.hpp"

namespace attn {

// The number of terminal columns `text` takes: East Asian wide and fullwidth characters (猫, ｘ, most
// emoji) two, combining marks and zero-width characters none, the others one. ANSI escape sequences
// (ESC [ … final byte), which only the printer itself writes, take none.
std::size_t display_width(std::string_view text);

// `text` cut to at most `width` columns, ending in `ellipsis` (counted in the width) where it was cut.
// Escape sequences are kept whole, and a colour left on where the cut falls is reset.
std::string truncate_to(std::string_view text, std::size_t width, std::string_view ellipsis = "…");

// `text` broken at spaces into lines of at most `width` columns, the lines after the first starting
// with `indent`; a word longer than a line is cut.
std::vector<std::string> wrap(std::string_view text, std::size_t width, std::string_view indent);

// `text` in plain ASCII: the printer's own symbols spelled out (√ sqrt, · *, × x, ━ =, … ...,
// ᵀ ^T, Σ sum, − -), every other character that is not ASCII written as \uXXXX (\UXXXXXXXX above
// U+FFFF), so a token stays recognisable and nothing needs a UTF-8 terminal.
std::string to_ascii(std::string_view text);

}  // namespace attn
