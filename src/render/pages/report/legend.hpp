#pragma once
// The colour legend beside the report's heatmaps, as inline SVG. Only pages/report/ includes this.

#include <string>
#include <string_view>

#include "render/draw/colormap.hpp"

namespace attn::report_detail {

// A legend: the colour map with its range, and the grey hatch of removed cells when the picture has any.
// `id` names its gradient, unique in the page. Values from −neutral to neutral (the difference map's
// "within the rule") take the colour of 0.
std::string legend_svg(const ColorRange& r, bool removed, std::string_view id, double neutral = 0);

}  // namespace attn::report_detail
