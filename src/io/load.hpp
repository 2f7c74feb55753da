#pragma once
// Input JSON (docs/input-format.md) -> Problem. Everything the format refuses is an InputError that names
// the file, the JSON Pointer of the offending value, and both sides of a mismatch.

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "io/read.hpp"
#include "json/error.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"

namespace attn {

// Parses and validates `text`; `file` names it in error messages.
Problem load_problem(std::string_view text, const std::string& file);

// An input object (docs/input-format.md) found at JSON Pointer `root` of `file`, validated: the
// JSON-level entry point, for readers of documents that hold an input (the trace reader).
Problem problem_from_json(const nlohmann::json& input, const std::string& file, const std::string& root);

// Reads `path` ("-": standard input) whole within `limit` (read_text), then load_problem. An
// unreadable file is an InputError.
Problem load_problem_file(const std::string& path, const MemoryLimit& limit = {});

// Refuses (InputError naming the value's JSON Pointer) an input value beyond the range of `dtype`, which
// a run in it would turn into inf: float32's ±3.4e38, float16's 65504 (what rounds to inf), bfloat16's
// (as float32's, what rounds to inf). A float64 run takes every finite input.
void check_range(const Problem& problem, const std::string& file, DType dtype);

}  // namespace attn
