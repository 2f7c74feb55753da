#pragma once
// The report's pipeline diagrams: one box per step, each a link to its section, and the flash pass as one
// box. Only pages/report/ includes this.

#include <string>

#include "trace/trace.hpp"

namespace attn::report_detail {

std::string pipeline_svg(const Trace& t);

// The backward pass's diagram (report --backward), drawn from the same table: one box per gradient, the
// forward steps each reads over it, and the flash backward pass as one box.
std::string backward_pipeline_svg(const Trace& t);

}  // namespace attn::report_detail
