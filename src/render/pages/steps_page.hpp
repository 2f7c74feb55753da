#pragma once
// attn-trace steps: the pipeline's table (observe/steps.hpp) for people, one step to a few lines.

#include <cstddef>
#include <string>

namespace attn {

// Every step in pipeline order: its name, its axes and the steps it reads, then its formula; each line
// wrapped to `width` columns under its own column; in plain ASCII (to_ascii) when `ascii`.
std::string steps_text(std::size_t width, bool ascii);

// The step names, one to a line, in pipeline order: for scripts and shell completion.
std::string step_names_text();

}  // namespace attn
