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

}  // namespace attn
