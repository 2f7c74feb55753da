#include "render/pages/scaling_page.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "render/draw/page.hpp"
#include "render/draw/text.hpp"
#include "text/number.hpp"

namespace attn {

namespace {

constexpr double ceiling = 0.25;  // the largest s(1−s) can be, at s = 1/2

std::string repeat(std::string_view piece, std::size_t count) {
  std::string s;
  for (std::size_t i = 0; i < count; ++i) s += piece;
  return s;
}

// One figure, raw and scaled, for every d_k.
void table(Page& page, const ScalingResult& r, const RenderOptions& o, const std::string& title,
           double ScalingRow::*raw, double ScalingRow::*scaled) {
  const int w = std::max(o.precision, 1) + 8;  // "-1.234e-100" and its like
  page.line(title);
  page.line(fmt::format("{:>6}  {:>{}}  {:>{}}", "d_k", "raw", w, "scaled", w));
  for (const ScalingRow& row : r.rows)
    page.line(fmt::format("{:>6}  {:>{}}  {:>{}}", row.d_k, significant_value(row.*raw, o.precision), w,
                          significant_value(row.*scaled, o.precision), w));
  page.line("");
}

// Horizontal bars on a log scale from the decade below the smallest value (or 1/N) up to 0.25.
void chart(Page& page, const ScalingResult& r, const RenderOptions& o) {
  const double one_over_n = 1.0 / static_cast<double>(r.samples);
  double smallest = one_over_n;
  for (const ScalingRow& row : r.rows)
    for (const double v : {row.raw_mean_grad, row.scaled_mean_grad})
      if (v > 0) smallest = std::min(smallest, v);
  const double lo = std::floor(std::log10(smallest)), hi = std::log10(ceiling);
  const std::size_t label = 14, value = static_cast<std::size_t>(std::max(o.precision, 1)) + 8;
  const std::size_t bar = std::max<std::size_t>(10, o.width > label + value + 1 ? o.width - label - value - 1 : 0);
  const auto column = [&](double v) {
    if (!(v > 0)) return std::size_t{0};
    const double at = std::clamp((std::log10(v) - lo) / (hi - lo), 0.0, 1.0);
    return std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(at * static_cast<double>(bar))));
  };
  const std::size_t mark = std::min(column(one_over_n), bar - 1);
  const std::string_view raw_block = o.unicode ? "█" : "#", scaled_block = o.unicode ? "▒" : "=";
  const auto draw = [&](double v, std::string_view block) {
    const std::size_t n = column(v);
    std::string s = repeat(block, n);
    if (n <= mark) s += repeat(" ", mark - n) + "|";
    return s + repeat(" ", bar - std::max(n, mark + 1));
  };

  page.paragraph(fmt::format("mean s(1−s), log scale from 1e{} to 0.25 (its ceiling); | marks 1/N = {}", lo,
                             significant_value(one_over_n, o.precision)));
  for (const ScalingRow& row : r.rows) {
    page.line(fmt::format("{:>6} raw    {} {:>{}}", row.d_k, draw(row.raw_mean_grad, raw_block),
                          significant_value(row.raw_mean_grad, o.precision), value));
    page.line(fmt::format("{:>6} scaled {} {:>{}}", "", draw(row.scaled_mean_grad, scaled_block),
                          significant_value(row.scaled_mean_grad, o.precision), value));
  }
  const std::string left = fmt::format("1e{}", lo);
  page.line(fmt::format("{:{}}{}{:>{}}", "", label, left, "0.25", bar > left.size() ? bar - left.size() : 4));
  page.line("");
}

void explain(Page& page, const ScalingResult& r, const RenderOptions& o) {
  const auto widest = std::max_element(r.rows.begin(), r.rows.end(),
                                       [](const ScalingRow& a, const ScalingRow& b) { return a.d_k < b.d_k; });
  const ScalingRow& big = *widest;
  const auto n = static_cast<double>(r.samples);
  const auto p = [&](double x) { return significant_value(x, o.precision); };
  double low = ceiling, high = 0;
  for (const ScalingRow& row : r.rows) {
    low = std::min(low, row.scaled_mean_grad);
    high = std::max(high, row.scaled_mean_grad);
  }
  page.heading("what the numbers show");
  page.paragraph(fmt::format("- q·k adds d_k products of independent standard normals, each of variance 1, so its "
                             "variance is d_k ({} at d_k = {}); dividing by √d_k brings it back to 1 ({}).",
                             p(big.raw_var), big.d_k, p(big.scaled_var)),
                 "  ");
  page.paragraph(fmt::format("- 0.25 is the ceiling of s(1−s), reached at s = 1/2, e.g. a softmax over two equal "
                             "logits. The explainer's code cannot show it: its softmax runs over all N = {} samples, "
                             "whose weights add up to 1 and so average 1/N. The mean of s(1−s) is (1 − Σ s^2)/N, at "
                             "most (1 − 1/N)/N, just under 1/N = {}. Scaled, the weights stay spread out and the "
                             "mean stays near 1/N at every d_k ({} to {}), nowhere near 0.25.",
                             r.samples, p(1 / n), p(low), p(high)),
                 "  ");
  page.paragraph(fmt::format("- Raw, the scores spread as √d_k, so the largest outruns the others: at d_k = {} one "
                             "sample takes {} of the weight. Its s(1−s) is near 0 because its s is near 1, every "
                             "other one because its s is near 0, so the mean falls to {} against {} scaled. That "
                             "collapse of the gradient is what dividing by √d_k prevents.",
                             big.d_k, p(big.raw_max_weight), p(big.raw_mean_grad), p(big.scaled_mean_grad)),
                 "  ");
  const double ratio = big.raw_grad_norm > 0 ? big.scaled_grad_norm / big.raw_grad_norm : 0;
  page.paragraph(
      fmt::format("- The backward pass measures it with a real loss, L = Σ_j a_j·v_j for a fixed random v "
                  "(seed + 1): ‖∂L/∂z‖, the softmax's backward a ⊙ (v − a·v) of its logits z, is {} raw "
                  "against {} scaled at d_k = {}: {} times {}. (Through the scale itself, the scores q·k "
                  "get ∂L/∂z / √d_k of it.)",
                  p(big.raw_grad_norm), p(big.scaled_grad_norm), big.d_k,
                  p(ratio >= 1 ? ratio : (ratio > 0 ? 1 / ratio : 0)), ratio >= 1 ? "more scaled" : "more raw"),
      "  ");
}

}  // namespace

std::string render_scaling(const ScalingResult& r, const RenderOptions& o) {
  Page page(o);
  page.heading("scaling: why attention divides q·k by √d_k");
  page.paragraph(
      fmt::format("{} random q and k per d_k, standard normal entries (seed {}); scores q·k (raw) and "
                  "q·k/√d_k (scaled); each softmax runs over the {} samples, as in the explainer's code.",
                  r.samples, r.seed, r.samples));
  page.line("");
  table(page, r, o, "variance of the scores (~d_k, ~1)", &ScalingRow::raw_var, &ScalingRow::scaled_var);
  table(page, r, o, "mean s(1−s), the explainer's \"gradient\"", &ScalingRow::raw_mean_grad,
        &ScalingRow::scaled_mean_grad);
  table(page, r, o, "largest softmax weight (1: saturated)", &ScalingRow::raw_max_weight,
        &ScalingRow::scaled_max_weight);
  table(page, r, o, "‖∂L/∂z‖, what the softmax passes back to its logits z", &ScalingRow::raw_grad_norm,
        &ScalingRow::scaled_grad_norm);
  chart(page, r, o);
  explain(page, r, o);
  return page.text();
}

}  // namespace attn
