#pragma once
// Numbers as people read them in a table.

#include <string>

namespace attn {

// `precision` digits after the point; scientific notation for |x| >= 1e6; "-inf", "inf", "nan".
std::string format_value(double x, int precision);

// The number of terminal columns `text` takes (UTF-8: one per code point).
std::size_t display_width(std::string_view text);

// `text` cut to at most `width` columns, with "…" where it was cut.
std::string truncate_to(std::string_view text, std::size_t width);

}  // namespace attn
