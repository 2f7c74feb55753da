#pragma once
// Trace <-> JSON text (docs/trace-format.md). Numbers are written in their shortest form that reads back to
// the same value of the trace's dtype; -inf, inf and nan as strings.

#include <string>
#include <string_view>

#include "trace/trace.hpp"

namespace attn {

inline constexpr int trace_format_version = 1;

// The trace as JSON text; `generator` names the program ("attn-trace 0.1.0").
std::string trace_to_json(const Trace& trace, const std::string& generator);

// A trace read back; an InputError for anything that is not a readable trace of this or an older
// version. `file` names the text in errors.
Trace trace_from_json(std::string_view text, const std::string& file);

// Whether `text` is a trace rather than an input: its first key is "format", as every trace's is (an
// input has no such key). Looks at the first bytes only; trace_from_json then checks the rest.
bool looks_like_trace(std::string_view text);

inline constexpr int steps_format_version = 1;

// attn-trace steps --json: the pipeline's table (observe/steps.hpp), the step names a trace uses.
//   {"format": "attn-trace.steps", "version": 1, "generator",
//    "steps": [{"name", "formula", "description", "dims", "inputs", "op", "values", "needs", "tiled"}]}
std::string steps_to_json(const std::string& generator);

// One number as the trace writes it (exposed for tests).
std::string format_trace_number(double x, bool float32);

}  // namespace attn
