#pragma once
// Input JSON (input-format.md) -> Problem. Everything the format refuses is an InputError that names
// the file, the JSON Pointer of the offending value, and both sides of a mismatch.

#include <string>
#include <string_view>

#include "io/error.hpp"
#include "model/problem.hpp"

namespace attn {

// Parses and validates `text`; `file` names it in error messages.
Problem load_problem(std::string_view text, const std::string& file);

// Reads `path` ("-": standard input) whole, then load_problem. An unreadable file is an InputError.
Problem load_problem_file(const std::string& path);

// Refuses (InputError naming the value's JSON Pointer) an input value beyond float32's range, which a
// float32 run would turn into inf.
void check_float32_range(const Problem& problem, const std::string& file);

// The whole content of `path` ("-": standard input), or an InputError saying why not.
std::string read_text(const std::string& path);

// How error messages name `path`.
std::string display_name(const std::string& path);

}  // namespace attn
