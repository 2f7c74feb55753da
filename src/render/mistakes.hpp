#pragma once
// run --mistake in the terminal: the intended computation beside the mistaken one.

#include <string>

#include "lessons/mistakes.hpp"
#include "render/terminal.hpp"

namespace attn {

// The input's header, every step's largest difference, the first step that differs shown side by side,
// and what the mistake costs on this input.
std::string render_mistake(const MistakeResult& result, const RenderOptions& options);

// --mistake list: each mistake's name and one line.
std::string render_mistake_list(const RenderOptions& options);

}  // namespace attn
