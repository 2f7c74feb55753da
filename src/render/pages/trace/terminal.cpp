// The terminal trace: the header, every step as tables, the footer (render/renderer.hpp).

#include "render/pages/trace/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "text/number.hpp"
#include "io/features.hpp"
#include "render/draw/notes.hpp"
#include "text/visible.hpp"

namespace attn::render_detail {

std::string Renderer::run() {
  header();
  if (t_.decode) {
    decode_section();
    footer();
    return std::move(out_);
  }
  if (o_.compare_only) {
    compare_section();
    return std::move(out_);
  }
  // The flash pass goes where its tiles replace the naive steps: after the heads are split (and turned,
  // with RoPE). When
  // both engines ran, it follows the whole naive trace.
  // The backward's tiles likewise replace the gradients of the weights and scores: after d_head_outputs.
  bool flash_done = !t_.flash, backward_done = !t_.flash_backward;
  for (const StepRecord& rec : t_.steps) {
    if (!flash_done && t_.engine == Engine::flash && rec.step > Step::k_rot) {
      flash_section();
      flash_done = true;
    }
    if (!backward_done && t_.engine == Engine::flash && rec.step > Step::d_head_outputs) {
      flash_backward_section();
      backward_done = true;
    }
    step(rec);
  }
  if (!flash_done) flash_section();
  if (!backward_done) flash_backward_section();
  comparison();
  compare_section();
  footer();
  return std::move(out_);
}

std::string Renderer::scale_text() const {
  return p_.scale_given ? format_value(p_.scale, o_.precision)
                        : fmt::format("1/√{} = {}", p_.d_k, format_value(p_.scale, o_.precision));
}

std::string Renderer::token_list(const std::vector<std::string>& tokens) const {
  std::vector<std::string> cut;
  for (std::size_t i = 0; i < tokens.size() && i < 8; ++i) cut.push_back(label(tokens[i]));
  return fmt::format("{}{}", fmt::join(cut, ", "), tokens.size() > 8 ? fmt::format(", {}", ellipsis()) : "");
}

void Renderer::header() {
  const std::string what =
      t_.decode ? std::string("decoding with a KV cache")
                : fmt::format("{} attention", t_.engine == Engine::both ? "naive and flash" : name_of(t_.engine));
  para(style_.title(fmt::format("attn-trace {} · {} · {}", o_.version, what, name_of(t_.dtype))), "");
  if (!p_.description.empty()) para(visible(p_.description), "");
  line("");
  const auto row = [&](std::string_view name, const std::string& value) {
    para(fmt::format("  {} {}", style_.faint(pad_right(name, 9)), value), "            ");
  };
  if (p_.batched) row("batch", fmt::format("{} items", p_.B));
  const std::string_view first_item = p_.batched ? " (batch item 0)" : "";
  row("queries", fmt::format("n = {}: {}{}", p_.n, token_list(p_.tokens[0]), first_item));
  if (p_.cross)
    row("keys", fmt::format("m = {}, from the context (cross-attention): {}{}", p_.m, token_list(p_.context_tokens[0]),
                            first_item));
  else row("keys", fmt::format("m = {}, the same tokens (self-attention)", p_.m));
  const std::string heads = p_.g == p_.h
                                ? fmt::format("{} head{}", p_.h, p_.h == 1 ? "" : "s")
                                : fmt::format("{} query heads sharing {} key/value head{} ({})", p_.h, p_.g,
                                              p_.g == 1 ? "" : "s", p_.g == 1 ? "multi-query" : "grouped-query");
  row("sizes", fmt::format("d_model = {}, {}, d_k = {}, d_v = {}, output width {}", p_.d_model, heads, p_.d_k, p_.d_v,
                           p_.d_out));
  row("scale", scale_text());
  for (const auto& [key, text] : feature_header(p_, HeaderPlace::scores)) row(key, text);  // io/features.hpp
  row("mask", p_.mask.summary());
  for (const auto& [key, text] : feature_header(p_, HeaderPlace::positions)) row(key, text);
  row("weights", fmt::format("layout {}{}",
                             p_.layout == Layout::in_out ? "in_out (Q = X·W_q)" : "out_in (Q = X·W_qᵀ, as nn.Linear)",
                             p_.has_output_projection() ? ", with W_o" : ", no W_o"));
  for (const std::string& note : o_.notes) {
    line("");
    para(fmt::format("{} {}", style_.faint("note:"), note));
  }
}

void Renderer::step(const StepRecord& rec, std::string_view name) {
  const StepInfo& info = step_info(rec.step);
  const Shape& shape = rec.value.shape();
  const std::vector<std::string> dims = dim_names(rec.step, p_.batched, p_.layout);

  line("");
  heading(name.empty() ? info.name : name);
  std::vector<std::string> parts;
  for (std::size_t a = 0; a < shape.size(); ++a) parts.push_back(fmt::format("{} {}", shape[a], dims[a]));
  const std::string formula = text(visible(rec.formula)), size = text(fmt::format("[{}]", fmt::join(parts, " × ")));
  if (display_width(formula) + 3 + display_width(size) <= o_.width)
    line("{}   {}", style_.formula(formula), style_.faint(size));
  else {
    para(formula, "    ");
    line("{}", style_.faint(size));
  }
  para(visible(rec.description), "");

  // A table or heatmap of the last two axes (one row for a rank-1 value) per batch item and head.
  for (const Panel& panel : panels(t_, rec)) matrix(panel);
  if (const std::vector<Panel> angles = rotation_panels(p_, rec.step); !angles.empty()) {
    const Rope& r = *p_.rope;
    line("");
    para(fmt::format("the angles: pair i turns by pos·θ_i, θ_i = {}^(-2i/{}) = {:.4g}", r.theta, r.dims,
                     fmt::join(r.frequencies, ", ")),
         "  ");
    for (const Panel& panel : angles) matrix(panel);
  }
  if (rec.step == Step::d_masked) softmax_backward_note();
}

// When every row of d_weights holds one number, d_masked is 0 everywhere: say why, since it looks like a bug.
void Renderer::softmax_backward_note() {
  const std::optional<std::string> why = attn::softmax_backward_note(t_);
  if (!why) return;
  line("");
  para("  " + *why, "  ", /*faint=*/true);
}

void Renderer::heading(std::string_view name) {
  const std::string title = fmt::format("━━ {} ", name);
  const std::size_t width = std::min<std::size_t>(72, o_.width);
  line("{}", style_.title(title + rule(width - std::min(width, display_width(title)))));
}

std::vector<std::string> Renderer::token_range(const std::vector<std::string>& tokens, std::size_t first,
                                               std::size_t last) const {
  std::vector<std::string> out;
  for (std::size_t i = first; i < last; ++i) out.push_back(label(tokens[i]));
  return out;
}

std::vector<std::string> Renderer::numbered(std::size_t count) const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(fmt::format("{}", i));
  return out;
}

std::string Renderer::rule(std::size_t width) const {
  std::string s;
  for (std::size_t i = 0; i < width; ++i) s += "━";
  return s;
}

void Renderer::footer() {
  if (t_.warnings.empty()) return;
  line("");
  for (const std::string& w : t_.warnings) para(fmt::format("{} {}", style_.warning("warning:"), visible(w)));
}

}  // namespace attn::render_detail

namespace attn {

std::string render_trace(const Trace& trace, const RenderOptions& options) {
  return render_detail::Renderer(trace, options).run();
}

}  // namespace attn
