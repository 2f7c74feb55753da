#pragma once
// attn-trace diff in the terminal: one line per dumped step with its errors and verdict, then the
// first step that differs (where, both values, a window of both around it) and the diagnosis.

#include <string>
#include <string_view>

#include "check/diff.hpp"
#include "render/draw/options.hpp"

namespace attn {

// `title` names the input and the dumps (from the command line: made visible). Every line at most
// options.width columns; plain ASCII when !options.unicode.
std::string render_diff(const DiffResult& result, std::string_view title, const RenderOptions& options);

}  // namespace attn
