#pragma once
// The terminal trace: every recorded step with its name, formula, shape, meaning and values, as
// aligned tables with token labels.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "render/draw/options.hpp"
#include "trace/trace.hpp"

namespace attn {

// The whole trace as text, ready to print.
std::string render_trace(const Trace& trace, const RenderOptions& options);

}  // namespace attn
