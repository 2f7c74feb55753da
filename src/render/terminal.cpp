// The terminal trace: the header, every step as tables, the footer (render/renderer.hpp).

#include "render/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "render/number.hpp"
#include "render/visible.hpp"

namespace attn::render_detail {

std::string Renderer::run() {
  header();
  if (o_.compare_only) {
    compare_section();
    return std::move(out_);
  }
  // The flash pass goes where its tiles replace the naive steps: after the heads are split. When
  // both engines ran, it follows the whole naive trace.
  bool flash_done = !t_.flash;
  for (const StepRecord& rec : t_.steps) {
    if (!flash_done && t_.engine == Engine::flash && rec.step > Step::v_heads) {
      flash_section();
      flash_done = true;
    }
    step(rec);
  }
  if (!flash_done) flash_section();
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
  for (std::size_t i = 0; i < tokens.size() && i < 8; ++i) cut.push_back(label_text(tokens[i]));
  return fmt::format("{}{}", fmt::join(cut, ", "), tokens.size() > 8 ? ", …" : "");
}

void Renderer::header() {
  line("{}", style_.title(fmt::format("attn-trace {} · {} attention · {}", o_.version,
                                      t_.engine == Engine::both ? "naive and flash" : name_of(t_.engine),
                                      name_of(t_.dtype))));
  if (!p_.description.empty()) line("{}", visible(p_.description));
  line("");
  const auto row = [&](std::string_view name, const std::string& value) {
    line("  {} {}", style_.faint(pad_right(name, 9)), value);
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
  row("mask", p_.mask.summary());
  row("weights", fmt::format("layout {}{}",
                             p_.layout == Layout::in_out ? "in_out (Q = X·W_q)" : "out_in (Q = X·W_qᵀ, as nn.Linear)",
                             p_.has_output_projection() ? ", with W_o" : ", no W_o"));
  for (const std::string& note : o_.notes) {
    line("");
    line("{} {}", style_.faint("note:"), note);
  }
}

// Labels along one axis of a table.
std::vector<std::string> Renderer::labels(Step step, Axis axis, std::size_t b, std::size_t count) const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) {
    switch (axis) {
      case Axis::query: out.push_back(label_text(p_.tokens[b][i])); break;
      case Axis::key: out.push_back(label_text(p_.context_tokens[b][i])); break;
      default: {
        // Columns of the projections say which head they belong to, so the split is visible.
        std::size_t heads = 1;
        if (step == Step::q || step == Step::concat) heads = p_.h;
        if (step == Step::k || step == Step::v) heads = p_.g;
        const std::size_t width = count / heads;
        out.push_back(heads == 1 ? fmt::format("{}", i) : fmt::format("h{}.{}", i / width, i % width));
      }
    }
  }
  return out;
}

void Renderer::step(const StepRecord& rec) {
  const StepInfo& info = step_info(rec.step);
  const Shape& shape = rec.value.shape();
  const std::vector<std::string> dims = dim_names(rec.step, p_.batched);

  line("");
  heading(info.name);
  std::vector<std::string> parts;
  for (std::size_t a = 0; a < shape.size(); ++a) parts.push_back(fmt::format("{} {}", shape[a], dims[a]));
  line("{}   {}", style_.formula(visible(rec.formula)), style_.faint(fmt::format("[{}]", fmt::join(parts, " × "))));
  line("{}", visible(rec.description));

  // Tables over the last two axes (a 1-row table for a rank-1 value); one per batch item and head.
  const std::size_t rank = shape.size();
  const std::size_t rows = rank >= 2 ? shape[rank - 2] : 1, cols = shape[rank - 1];
  std::vector<Axis> axes = info.axes;
  if (p_.batched) axes.insert(axes.begin(), Axis::feature);  // placeholder for the batch axis
  const Axis row_axis = axes[rank - 2], col_axis = axes[rank - 1];
  const std::size_t outer_rank = rank - 2;
  std::size_t outer = 1;
  for (std::size_t a = 0; a < outer_rank; ++a) outer *= shape[a];
  for (std::size_t k = 0; k < outer; ++k) {
    // Unravel k into (batch?, head?).
    std::size_t rest = k, b = 0, hd = 0;
    bool has_head = false, kv = false;
    for (std::size_t a = outer_rank; a-- > 0;) {
      const std::size_t index = rest % shape[a];
      rest /= shape[a];
      if (p_.batched && a == 0) b = index;
      else {
        hd = index;
        has_head = true;
        kv = axes[a] == Axis::kv_head;
      }
    }
    hd = head_at(t_, kv, hd);
    std::string caption;
    if (p_.batched) caption = fmt::format("batch {}", b);
    if (has_head) {
      if (!caption.empty()) caption += ", ";
      caption += kv ? kv_caption(hd) : fmt::format("head {}", hd);
    }
    table(rec.value.values().subspan(k * rows * cols, rows * cols), rows, cols, labels(rec.step, row_axis, b, rows),
          labels(rec.step, col_axis, b, cols), caption);
  }
}

void Renderer::heading(std::string_view name) {
  const std::string text = fmt::format("━━ {} ", name);
  line("{}", style_.title(text + rule(72 - std::min<std::size_t>(72, display_width(text)))));
}

std::vector<std::string> Renderer::token_range(const std::vector<std::string>& tokens, std::size_t first,
                                               std::size_t last) const {
  std::vector<std::string> out;
  for (std::size_t i = first; i < last; ++i) out.push_back(label_text(tokens[i]));
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

std::string Renderer::kv_caption(std::size_t kv) const {
  if (p_.g == p_.h) return fmt::format("head {}", kv);
  const std::size_t group = p_.h / p_.g;
  return group == 1 ? fmt::format("kv head {}", kv)
                    : fmt::format("kv head {} (read by query heads {}–{})", kv, kv * group, kv * group + group - 1);
}

void Renderer::footer() {
  if (t_.warnings.empty()) return;
  line("");
  for (const std::string& w : t_.warnings) line("{} {}", style_.warning("warning:"), visible(w));
}

}  // namespace attn::render_detail

namespace attn {

std::string render_trace(const Trace& trace, const RenderOptions& options) {
  return render_detail::Renderer(trace, options).run();
}

}  // namespace attn
