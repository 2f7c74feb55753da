#pragma once
// JSON text parsed, with errors that say where (a JSON Pointer, a line and a column).

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attn {

// `text` parsed, or an InputError with the JSON Pointer, line and column of the first error. Strict
// parsing (for files people write) also refuses duplicate keys and nesting deeper than 64 levels.
// A valid text takes one pass (fast.hpp); a text that fast pass gives up on takes a checking pass,
// in strict parsing or to place an error, and nlohmann's parser.
nlohmann::json parse_json(std::string_view text, const std::string& file, bool strict = true);

// An InputError naming `file` when `text` holds nothing to parse, which tells the two cases apart:
// "the file is empty (0 bytes): expected EXPECTED" and "the file is blank (200.0 MiB, all white space):
// expected EXPECTED".
void refuse_blank(std::string_view text, const std::string& file, std::string_view expected);

}  // namespace attn
