#pragma once
// The terminal page of `attn-trace scaling`: the figures as three small tables, a log-scale chart of
// the mean softmax gradient, raw against scaled, across d_k, and what the numbers show.

#include <string>

#include "lessons/scaling.hpp"
#include "render/draw/options.hpp"

namespace attn {

// Every line at most options.width columns (from about 40 up), plain ASCII when !options.unicode;
// numbers with options.precision significant digits.
std::string render_scaling(const ScalingResult& result, const RenderOptions& options);

}  // namespace attn
