#include "render/pages/report/legend.hpp"

#include <cmath>

#include <fmt/format.h>

#include "render/pages/report/html.hpp"

namespace attn::report_detail {

std::string legend_svg(const ColorRange& r, bool removed, std::string_view id, double neutral) {
  const bool row = r.weights == WeightScale::row;
  // + 0.0: a range of zeros from −0 says 0, not -0
  const std::string lo = row ? "0" : short_number(r.lo + 0.0), hi = row ? "row max" : short_number(r.hi + 0.0);
  std::string out = fmt::format(
      "<svg class=\"legend\" viewBox=\"0 0 {} 34\" width=\"{}\" height=\"34\" role=\"img\" aria-label=\"colour scale "
      "from {} to {}\"><defs><linearGradient id=\"legend-{}\">",
      removed ? 430 : 300, removed ? 430 : 300, lo, hi, id);
  // Finely enough that the edges of a neutral band stay sharp.
  const int stops = neutral > 0 ? 40 : 10;
  for (int k = 0; k <= stops; ++k) {
    const double t = k / static_cast<double>(stops), x = r.lo + (r.hi - r.lo) * t;
    const Rgb c = neutral > 0 && std::fabs(x) <= neutral ? color_at(r.scale, r.position(0)) : color_at(r.scale, t);
    out += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", t, hex(c));
  }
  out += fmt::format(
      "</linearGradient></defs><rect x=\"1\" y=\"1\" width=\"240\" height=\"14\" fill=\"url(#legend-{})\" "
      "class=\"legend-bar\"/><text x=\"1\" y=\"30\">{}</text><text x=\"241\" y=\"30\" "
      "text-anchor=\"end\">{}</text>",
      id, lo, hi);
  if (r.scale == ColorScale::diverging) out += "<text x=\"121\" y=\"30\" text-anchor=\"middle\">0</text>";
  if (removed)
    out +=
        "<rect x=\"262\" y=\"1\" width=\"14\" height=\"14\" fill=\"url(#removed-hatch)\" class=\"legend-bar\"/>"
        "<text x=\"282\" y=\"12\">removed by the mask</text>";
  out += "</svg>";
  // Which scale the weights' colours use, in words beside the bar.
  if (const std::string words = scale_words(r); !words.empty())
    out += fmt::format("<p class=\"legend-scale\" data-scale=\"{}\">{}</p>", weight_scale_name(r.weights), words);
  return out;
}

}  // namespace attn::report_detail
