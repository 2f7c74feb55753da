#pragma once
// Input JSON (docs/input-format.md) -> Problem. Everything the format refuses is an InputError that names
// the file, the JSON Pointer of the offending value, and both sides of a mismatch.

#include <string>
#include <string_view>

#include "io/error.hpp"
#include "io/read.hpp"
#include "model/problem.hpp"

namespace attn {

// Parses and validates `text`; `file` names it in error messages.
Problem load_problem(std::string_view text, const std::string& file);

// Reads `path` ("-": standard input) whole within `limit` (read_text), then load_problem. An
// unreadable file is an InputError.
Problem load_problem_file(const std::string& path, const MemoryLimit& limit = {});

// Refuses (InputError naming the value's JSON Pointer) an input value beyond float32's range, which a
// float32 run would turn into inf.
void check_float32_range(const Problem& problem, const std::string& file);

}  // namespace attn
