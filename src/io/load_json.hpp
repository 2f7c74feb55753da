#pragma once
// The loader's JSON-level entry points, for the other readers of src/io (the trace reader).

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/problem.hpp"

namespace attn {

// `text` parsed, or an InputError with the JSON Pointer, line and column of the first error. Strict
// parsing (for files people write) also refuses duplicate keys and nesting deeper than 64 levels.
// A valid text takes one pass (json_fast.hpp); a text that fast pass gives up on takes a checking pass,
// in strict parsing or to place an error, and nlohmann's parser.
nlohmann::json parse_json(std::string_view text, const std::string& file, bool strict = true);

// An input object (docs/input-format.md) found at JSON Pointer `root` of `file`, validated.
Problem problem_from_json(const nlohmann::json& input, const std::string& file, const std::string& root);

}  // namespace attn
