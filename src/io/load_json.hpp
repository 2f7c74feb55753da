#pragma once
// The loader's JSON-level entry points, for the other readers of src/io (the trace reader).

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/problem.hpp"

namespace attn {

// `text` parsed, or an InputError with the line and column of the first syntax error.
nlohmann::json parse_json(std::string_view text, const std::string& file);

// An input object (input-format.md) found at JSON Pointer `root` of `file`, validated.
Problem problem_from_json(const nlohmann::json& input, const std::string& file, const std::string& root);

}  // namespace attn
