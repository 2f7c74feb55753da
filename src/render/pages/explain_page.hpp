#pragma once
// attn-trace explain in the terminal: one weight (or one output number) followed operation by
// operation, each as an equation with its real numbers, in numbered sections.

#include <string>
#include <string_view>

#include "lessons/explain.hpp"
#include "lessons/explain_gradient.hpp"
#include "render/draw/options.hpp"

namespace attn {

// `title` (which may name a file from the command line: made visible) under the first heading. Every
// line at most options.width columns: long sums wrapped, and past 8 terms shown as their first and last
// ones with how many were hidden, their total always shown; numbers with options.precision digits after
// the point (whole numbers without); plain ASCII when !options.unicode.
std::string render_explanation(const Explanation& e, std::string_view title, const RenderOptions& options);
std::string render_output_explanation(const OutputExplanation& e, std::string_view title, const RenderOptions& options);
// explain --grad: one gradient entry, its sum term by term (the largest 12 of a longer one), the engine's value.
std::string render_gradient_explanation(const GradientExplanation& e, std::string_view title,
                                        const RenderOptions& options);

// Whichever of the three `e` is (what `attn-trace explain` was asked for), as its page.
std::string render_explained(const ExplainedNumber& e, std::string_view title, const RenderOptions& options);

}  // namespace attn
