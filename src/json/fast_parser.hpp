#pragma once
// A one-pass JSON parser for parse_json's common case, a valid text: it builds the same nlohmann::json
// as nlohmann::json::parse and makes strict parsing's checks on the way, in about the time nlohmann's
// parser alone takes. It gives up on anything it is not certain to read exactly as nlohmann does, every
// error included, and parse_json's slower path then reads the text and says what is wrong where.

#include <cstddef>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attn {

// Strict parsing refuses containers nested deeper than this; the fast parser gives up beyond it.
inline constexpr std::size_t max_json_depth = 64;

// `text` as nlohmann::json::parse(text) reads it, when the text is valid JSON that strict parse_json
// accepts (no duplicate key, no nesting deeper than max_json_depth) and holds nothing this parser leaves
// to nlohmann (a number beyond double's range or so small it reads as 0, a NUL byte after the value,
// which nlohmann takes for the end of the text); otherwise std::nullopt, and the caller parses the text
// the careful way.
std::optional<nlohmann::json> parse_json_fast(std::string_view text);

// Destroys `doc` sooner than its destructor would: that moves every value onto a stack of its own
// first, so that no nesting can overflow the call stack, and for a large input's millions of numbers
// takes as long as parsing them. Here the lists that hold no list or object are emptied in place
// first, down to max_json_depth levels; the destructor then has little left to move.
void discard_json(nlohmann::json doc);

}  // namespace attn
