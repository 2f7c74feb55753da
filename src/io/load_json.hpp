#pragma once
// The loader's JSON-level entry points, for the other readers of src/io (the trace reader).

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/problem.hpp"

namespace attn {

// `text` parsed, or an InputError with the JSON Pointer, line and column of the first error. Strict
// parsing (for files people write) also refuses duplicate keys and nesting deeper than 64 levels,
// at the cost of a second pass; otherwise that pass runs only to place an error.
nlohmann::json parse_json(std::string_view text, const std::string& file, bool strict = true);

// An input object (docs/input-format.md) found at JSON Pointer `root` of `file`, validated.
Problem problem_from_json(const nlohmann::json& input, const std::string& file, const std::string& root);

}  // namespace attn
