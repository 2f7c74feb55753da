// attn-trace explain --grad in the terminal: one gradient entry as the sum that makes it, term by term.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "render/draw/page.hpp"
#include "text/visible.hpp"
#include "render/pages/explain_page.hpp"
#include "text/number.hpp"

namespace attn {

namespace {

constexpr std::size_t most_terms = 12;  // longer sums show their largest terms, and how many were left out

std::string upstream_words(const GradientExplanation& e) {
  switch (e.upstream) {
    case Upstream::input: return "the input's dY";
    case Upstream::seeded: return fmt::format("dY drawn from a standard normal, seed {}", e.grad_seed);
    case Upstream::ones: break;
  }
  return "dY = 1 everywhere (L = ΣY)";
}

}  // namespace

std::string render_gradient_explanation(const GradientExplanation& e, std::string_view title,
                                        const RenderOptions& options) {
  Page page(options);
  const int p = options.precision;
  const auto num = [p](double x) { return format_value(x, p); };
  page.heading(fmt::format("explain {}: one gradient entry, term by term", step_info(e.step).name));
  page.paragraph(visible(title));
  page.paragraph(
      fmt::format("L = Σ Y ⊙ dY with {}; {} at {}", upstream_words(e), step_info(e.step).name, visible(e.where)));
  page.line("");
  page.paragraph(visible(e.formula), "    ");
  page.paragraph(visible(e.sum), "    ");
  page.line("");
  if (!e.terms.empty()) {
    // the terms, the largest first when there are too many to show
    std::vector<std::size_t> order(e.terms.size());
    std::iota(order.begin(), order.end(), 0);
    const bool cut = e.terms.size() > most_terms;
    if (cut)
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return std::fabs(e.terms[a].product) > std::fabs(e.terms[b].product);
      });
    if (cut) order.resize(most_terms);
    std::size_t wa = 0, wb = 0, wx = 0, wy = 0;
    for (const std::size_t k : order) {
      wa = std::max(wa, visible(e.terms[k].a_name).size());
      wb = std::max(wb, visible(e.terms[k].b_name).size());
      wx = std::max(wx, num(e.terms[k].a).size());
      wy = std::max(wy, num(e.terms[k].b).size());
    }
    for (const std::size_t k : order) {
      const GradientTerm& t = e.terms[k];
      page.line(fmt::format("  {:<{}} × {:<{}} = {:>{}} × {:>{}} = {}", visible(t.a_name), wa, visible(t.b_name), wb,
                            num(t.a), wx, num(t.b), wy, num(t.product)));
    }
    if (cut)
      page.paragraph(fmt::format("  (the {} largest of {} terms; --json lists them all)", most_terms, e.terms.size()),
                     "  ");
    double sum = 0;
    for (const GradientTerm& t : e.terms) sum += t.product;
    page.line(fmt::format("  sum of the {} terms = {}", e.terms.size(), num(sum)));
  }
  if (!e.finish.empty()) page.paragraph(fmt::format("  then {}", visible(e.finish)), "    ");
  page.line("");
  page.line(fmt::format("  recomputed in float64 = {}", num(e.recomputed)));
  page.line(fmt::format("  the backward pass ({}) = {}", name_of(e.dtype), num(e.value)));
  for (const std::string& note : e.notes) page.paragraph(fmt::format("  {}", visible(note)), "    ");
  return std::move(page).take();
}

}  // namespace attn
