#include "render/pages/report/legend.hpp"

#include <fmt/format.h>

#include "render/pages/report/html.hpp"

namespace attn::report_detail {

std::string legend_svg(const ColorRange& r, bool removed, std::string_view id) {
  std::string out = fmt::format(
      "<svg class=\"legend\" viewBox=\"0 0 {} 34\" width=\"{}\" height=\"34\" role=\"img\" aria-label=\"colour scale "
      "from {} to {}\"><defs><linearGradient id=\"legend-{}\">",
      removed ? 430 : 300, removed ? 430 : 300, short_number(r.lo), short_number(r.hi), id);
  for (int k = 0; k <= 10; ++k)
    out += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", k / 10.0, hex(color_at(r.scale, k / 10.0)));
  out += fmt::format(
      "</linearGradient></defs><rect x=\"1\" y=\"1\" width=\"240\" height=\"14\" fill=\"url(#legend-{})\" "
      "class=\"legend-bar\"/><text x=\"1\" y=\"30\">{}</text><text x=\"241\" y=\"30\" "
      "text-anchor=\"end\">{}</text>",
      id, short_number(r.lo), short_number(r.hi));
  if (r.scale == ColorScale::diverging) out += "<text x=\"121\" y=\"30\" text-anchor=\"middle\">0</text>";
  if (removed)
    out +=
        "<rect x=\"262\" y=\"1\" width=\"14\" height=\"14\" fill=\"url(#removed-hatch)\" class=\"legend-bar\"/>"
        "<text x=\"282\" y=\"12\">removed by the mask</text>";
  out += "</svg>";
  return out;
}

}  // namespace attn::report_detail
