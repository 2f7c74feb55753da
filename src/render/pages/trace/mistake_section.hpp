#pragma once
// run --mistake in the terminal: the intended computation beside the mistaken one.

#include <optional>
#include <string>

#include "lessons/mistakes.hpp"
#include "render/draw/panel.hpp"
#include "render/draw/options.hpp"

namespace attn {

// The input's header, every step's largest difference, the first step that differs shown side by side
// (or, when focus_mistake kept some steps, each of them), and what the mistake costs on this input.
std::string render_mistake(const MistakeResult& result, const RenderOptions& options);

// The first differing step as two panels of the batch item and head that hold its largest difference:
// as intended, and as mistaken (without the mask's marks: the mistaken numbers as they are). None when
// no step differs or the two runs' shapes differ there.
struct DifferencePanels {
  Panel intended, mistaken;
};
std::optional<DifferencePanels> first_difference_panels(const MistakeResult& result);

// The same two panels for `step`: of the batch item and head that hold its largest difference (the
// first panel when it does not differ). None when the traces do not both hold it or its shapes differ.
std::optional<DifferencePanels> difference_panels(const MistakeResult& result, Step step);

// --mistake list: each mistake's name and one line.
std::string render_mistake_list(const RenderOptions& options);

}  // namespace attn
