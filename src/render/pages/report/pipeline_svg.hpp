#pragma once
// The report's pipeline diagram: one box per step, each a link to its section, and the flash pass as one
// box. Only pages/report/ includes this.

#include <string>

#include "trace/trace.hpp"

namespace attn::report_detail {

std::string pipeline_svg(const Trace& t);

}  // namespace attn::report_detail
