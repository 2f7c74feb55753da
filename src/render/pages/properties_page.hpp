#pragma once
// attn-trace properties in the terminal: a table of every property (holds, figure, tolerance, expected),
// one line of why for each, and the verdict.

#include <span>
#include <string>

#include "render/draw/options.hpp"
#include "lessons/properties.hpp"

namespace attn {

// `title` (which may come from the command line: made visible) first. A table when it fits
// options.width, else one short block per property; ASCII only when !options.unicode.
std::string render_properties(std::span<const PropertyCheck> checks, std::string_view title,
                              const RenderOptions& options);

}  // namespace attn
