#include "render/terminal.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "render/number.hpp"
#include "render/visible.hpp"

namespace attn {

namespace {

constexpr std::size_t label_width = 10;  // longer token labels are cut, with "…"

struct Style {
  bool on;
  std::string wrap(std::string_view text, std::string_view code) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : std::string(text);
  }
  std::string title(std::string_view t) const { return wrap(t, "1;36"); }
  std::string formula(std::string_view t) const { return wrap(t, "1;33"); }
  std::string faint(std::string_view t) const { return wrap(t, "2"); }
  std::string label(std::string_view t) const { return wrap(t, "1"); }
  std::string warning(std::string_view t) const { return wrap(t, "1;31"); }
};

// Which indices of an axis of `count` to show when at most `limit` fit: the first and the last ones.
// A gap is marked by the index `count` itself.
std::vector<std::size_t> shown(std::size_t count, std::size_t limit) {
  std::vector<std::size_t> out;
  if (limit == 0 || count <= limit) {
    for (std::size_t i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  const std::size_t head = (limit + 1) / 2, tail = limit / 2;
  for (std::size_t i = 0; i < head; ++i) out.push_back(i);
  out.push_back(count);  // the gap
  for (std::size_t i = count - tail; i < count; ++i) out.push_back(i);
  return out;
}

// A token as a table label: control characters made visible (render/visible.hpp), then cut to fit.
std::string label_text(std::string_view token) { return truncate_to(visible(token), label_width); }

std::string pad_left(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  return std::string(width > w ? width - w : 0, ' ') + std::string(s);
}
std::string pad_right(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  return std::string(s) + std::string(width > w ? width - w : 0, ' ');
}

class Renderer {
 public:
  Renderer(const Trace& trace, const RenderOptions& options)
      : t_(trace), p_(*trace.problem), o_(options), style_{options.color} {}

  std::string run() {
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

 private:
  template <class... Args>
  void line(fmt::format_string<Args...> f, Args&&... args) {
    out_ += fmt::format(f, std::forward<Args>(args)...);
    out_ += '\n';
  }

  std::string scale_text() const {
    return p_.scale_given ? format_value(p_.scale, o_.precision)
                          : fmt::format("1/√{} = {}", p_.d_k, format_value(p_.scale, o_.precision));
  }

  std::string token_list(const std::vector<std::string>& tokens) const {
    std::vector<std::string> cut;
    for (std::size_t i = 0; i < tokens.size() && i < 8; ++i) cut.push_back(label_text(tokens[i]));
    return fmt::format("{}{}", fmt::join(cut, ", "), tokens.size() > 8 ? ", …" : "");
  }

  void header() {
    line("{}", style_.title(fmt::format("attn-trace {} · {} attention · {}", o_.version, t_.engine == Engine::both ? "naive and flash" : name_of(t_.engine), name_of(t_.dtype))));
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
    else
      row("keys", fmt::format("m = {}, the same tokens (self-attention)", p_.m));
    const std::string heads =
        p_.g == p_.h ? fmt::format("{} head{}", p_.h, p_.h == 1 ? "" : "s")
                     : fmt::format("{} query heads sharing {} key/value head{} ({})", p_.h, p_.g, p_.g == 1 ? "" : "s",
                                   p_.g == 1 ? "multi-query" : "grouped-query");
    row("sizes", fmt::format("d_model = {}, {}, d_k = {}, d_v = {}, output width {}", p_.d_model, heads, p_.d_k, p_.d_v,
                             p_.d_out));
    row("scale", scale_text());
    row("mask", p_.mask.summary());
    row("weights", fmt::format("layout {}{}", p_.layout == Layout::in_out ? "in_out (Q = X·W_q)" : "out_in (Q = X·W_qᵀ, as nn.Linear)",
                               p_.has_output_projection() ? ", with W_o" : ", no W_o"));
    for (const std::string& note : o_.notes) {
      line("");
      line("{} {}", style_.faint("note:"), note);
    }
  }

  // Labels along one axis of a table.
  std::vector<std::string> labels(Step step, Axis axis, std::size_t b, std::size_t count) const {
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

  void step(const StepRecord& rec) {
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

  void heading(std::string_view name) {
    const std::string text = fmt::format("━━ {} ", name);
    line("{}", style_.title(text + rule(72 - std::min<std::size_t>(72, display_width(text)))));
  }

  std::vector<std::string> token_range(const std::vector<std::string>& tokens, std::size_t first, std::size_t last) const {
    std::vector<std::string> out;
    for (std::size_t i = first; i < last; ++i) out.push_back(label_text(tokens[i]));
    return out;
  }

  std::vector<std::string> numbered(std::size_t count) const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < count; ++i) out.push_back(fmt::format("{}", i));
    return out;
  }

  // ---- the flash pass ----

  void flash_section() {
    const FlashRecord& f = *t_.flash;
    line("");
    heading("flash");
    line("{}", style_.formula("m_new = max(m_prev, rowmax S)   alpha = exp(m_prev − m_new)   P = exp(S − m_new)"));
    line("{}", style_.formula("l_new = alpha·l_prev + rowsum P   O = alpha·O_prev + P·V   then once: O / l, lse = m + log l"));
    line("FlashAttention-2's forward pass (arXiv:2307.08691, Algorithm 1): the same attention in tiles of {} query "
         "row{} by {} key{} (the last ones smaller where the lengths do not divide), never holding all n × m scores",
         f.tile_size.Br, f.tile_size.Br == 1 ? "" : "s", f.tile_size.Bc, f.tile_size.Bc == 1 ? "" : "s");
    line("{}", style_.faint("On a row's first key tile m_prev is -inf and alpha is 0: there is nothing yet to rescale."));
    std::size_t next = 0;
    for (const FlashFinal& done : f.finals) {
      for (; next < f.tiles.size(); ++next) {
        const FlashTile& tile = f.tiles[next];
        if (tile.batch != done.batch || tile.head != done.head || tile.i != done.i) break;
        flash_tile(tile);
      }
      flash_final(done);
    }
    for (; next < f.tiles.size(); ++next) flash_tile(f.tiles[next]);
  }

  std::string tile_place(std::size_t b, std::size_t head) const {
    std::string place = p_.batched ? fmt::format("batch {}, head {}", b, head) : fmt::format("head {}", head);
    return place;
  }

  void flash_tile(const FlashTile& tile) {
    const auto rows = token_range(p_.tokens[tile.batch], tile.row_begin, tile.row_end);
    const auto cols = token_range(p_.context_tokens[tile.batch], tile.col_begin, tile.col_end);
    line("");
    line("{}", style_.label(fmt::format("── {} · query tile {} ({}) × key tile {} ({})", tile_place(tile.batch, tile.head),
                                        tile.i, fmt::join(rows, ", "), tile.j, fmt::join(cols, ", "))));
    if (tile.skipped) {
      line("  {}", style_.faint("skipped: the mask rules out every query-key pair of this tile"));
      return;
    }
    const std::size_t r = rows.size(), c = cols.size();
    table(tile.S.values(), r, c, rows, cols, "S");
    std::vector<double> state;
    for (std::size_t k = 0; k < r; ++k)
      for (const Tensor<double>* t : {&tile.m_prev, &tile.m_new, &tile.alpha, &tile.l_prev, &tile.l_new})
        state.push_back(t->values()[k]);
    table(state, r, 5, rows, {"m_prev", "m_new", "alpha", "l_prev", "l_new"}, "state");
    table(tile.P.values(), r, c, rows, cols, "P");
    table(tile.O.values(), r, tile.O.dim(1), rows, numbered(tile.O.dim(1)), "O");
  }

  void flash_final(const FlashFinal& done) {
    const auto rows = token_range(p_.tokens[done.batch], done.row_begin, done.row_end);
    const std::size_t r = rows.size(), d = done.O.dim(1);
    std::vector<double> values;
    for (std::size_t k = 0; k < r; ++k) {
      for (std::size_t c = 0; c < d; ++c) values.push_back(done.O(k, c));
      values.push_back(done.lse(k));
    }
    std::vector<std::string> cols = numbered(d);
    cols.emplace_back("lse");
    line("");
    line("{}", style_.label(fmt::format("── {} · query tile {} ({}) done: O / l, lse = m + log l",
                                        tile_place(done.batch, done.head), done.i, fmt::join(rows, ", "))));
    table(values, r, d + 1, rows, cols, "O / l");
  }

  // When both engines ran: how far the flash output is from the naive one.
  void comparison() {
    if (!t_.flash || t_.engine != Engine::both) return;
    const StepRecord* naive = nullptr;
    for (const StepRecord& rec : t_.steps)
      if (rec.step == Step::output) naive = &rec;
    if (naive == nullptr || naive->value.shape() != t_.flash->output.shape()) return;
    double worst = 0;
    const auto a = naive->value.values(), b = t_.flash->output.values();
    for (std::size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::fabs(a[k] - b[k]));
    line("");
    heading("naive vs flash");
    line("max |flash output − naive output| = {:.3g} over {} values ({}); attn-trace compare judges both against a "
         "wider reference",
         worst, a.size(), name_of(t_.dtype));
  }

  // ---- compare ----

  static std::string sci(double x) { return std::isfinite(x) ? fmt::format("{:.3g}", x) : format_value(x, 0); }

  void compare_section() {
    if (!t_.compare) return;
    const CompareRecord& c = *t_.compare;
    line("");
    heading("compare");
    line("naive and flash in {} (tiles {} × {}) against a reference: naive attention in {} on the same inputs, "
         "rounded to {}",
         name_of(c.dtype), c.tile_size.Br, c.tile_size.Bc, reference_name(c.dtype), name_of(c.dtype));

    // The outputs side by side, then their differences, per batch item.
    const std::size_t B = p_.B, n = p_.n, d = p_.d_out;
    for (std::size_t b = 0; b < B; ++b) {
      std::vector<double> both;
      std::vector<double> diff;
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < d; ++k) both.push_back(c.naive.values()[(b * n + i) * d + k]);
        for (std::size_t k = 0; k < d; ++k) both.push_back(c.flash.values()[(b * n + i) * d + k]);
        for (std::size_t k = 0; k < d; ++k)
          diff.push_back(c.flash.values()[(b * n + i) * d + k] - c.naive.values()[(b * n + i) * d + k]);
      }
      std::vector<std::string> cols;
      for (std::size_t k = 0; k < d; ++k) cols.push_back(fmt::format("naive {}", k));
      for (std::size_t k = 0; k < d; ++k) cols.push_back(fmt::format("flash {}", k));
      const std::string item = p_.batched ? fmt::format("batch {}", b) : "output";
      const auto rows = token_range(p_.tokens[b], 0, n);
      table(both, n, 2 * d, rows, cols, item);
      std::vector<std::string> diff_cols;
      for (std::size_t k = 0; k < d; ++k) diff_cols.push_back(fmt::format("Δ {}", k));
      scientific_table(diff, n, d, rows, diff_cols, "flash − naive");
    }

    line("");
    const auto stats_row = [&](std::string_view name, const ErrorStats& s) {
      line("  {}  {:>12}  {:>12}  {:>8}", pad_right(name, 16), sci(s.max_abs), sci(s.max_rel), s.max_ulp);
    };
    line("  {}  {:>12}  {:>12}  {:>8}", style_.faint(pad_right("", 16)), "max |error|", "max rel", "max ULP");
    stats_row("naive vs ref", c.naive_vs_ref);
    stats_row("flash vs ref", c.flash_vs_ref);
    stats_row("flash vs naive", c.flash_vs_naive);

    line("");
    line("  peak memory for scores and weights, as the engines counted it:");
    line("    naive  {:>12} bytes   (all n × m scores of every head, two buffers at a time)", c.naive_peak_bytes);
    line("    flash  {:>12} bytes   (one S tile and one P tile of at most {} × {})", c.flash_peak_bytes, c.tile_size.Br,
         c.tile_size.Bc);

    line("");
    const std::string rule_text =
        fmt::format("max|flash − ref| = {} {} 2·max|naive − ref| + noise = 2·{} + {} = {}", sci(c.flash_vs_ref.max_abs),
                    c.pass ? "<=" : ">", sci(c.naive_vs_ref.max_abs), sci(c.noise), sci(c.bound));
    line("  {}  {}", c.pass ? style_.title("verdict: PASS") : style_.warning("verdict: FAIL"), rule_text);
  }

  void scientific_table(const std::vector<double>& v, std::size_t rows, std::size_t cols,
                        const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                        const std::string& caption) {
    std::vector<std::size_t> width(cols);
    std::size_t label_col = display_width(caption);
    for (std::size_t r = 0; r < rows; ++r) label_col = std::max(label_col, display_width(row_labels[r]));
    for (std::size_t c = 0; c < cols; ++c) {
      width[c] = display_width(col_labels[c]);
      for (std::size_t r = 0; r < rows; ++r) width[c] = std::max(width[c], sci(v[r * cols + c]).size());
    }
    line("");
    std::string head = "  " + style_.faint(pad_right(caption, label_col));
    for (std::size_t c = 0; c < cols; ++c) head += "  " + style_.label(pad_left(col_labels[c], width[c]));
    line("{}", head);
    for (std::size_t r = 0; r < rows; ++r) {
      std::string text = "  " + style_.label(pad_right(row_labels[r], label_col));
      for (std::size_t c = 0; c < cols; ++c) text += "  " + pad_left(sci(v[r * cols + c]), width[c]);
      line("{}", text);
    }
  }

  std::string rule(std::size_t width) const {
    std::string s;
    for (std::size_t i = 0; i < width; ++i) s += "━";
    return s;
  }

  std::string kv_caption(std::size_t kv) const {
    if (p_.g == p_.h) return fmt::format("head {}", kv);
    const std::size_t group = p_.h / p_.g;
    return group == 1 ? fmt::format("kv head {}", kv)
                      : fmt::format("kv head {} (read by query heads {}–{})", kv, kv * group, kv * group + group - 1);
  }

  void table(std::span<const double> v, std::size_t rows, std::size_t cols, const std::vector<std::string>& row_labels,
             const std::vector<std::string>& col_labels, const std::string& caption) {
    const std::vector<std::size_t> rs = shown(rows, o_.max_rows), cs = shown(cols, o_.max_cols);

    // Column widths: the widest of the label and every shown value.
    std::vector<std::size_t> width(cs.size(), 1);
    std::size_t label_col = display_width(caption);
    for (const std::size_t r : rs)
      if (r < rows) label_col = std::max(label_col, display_width(row_labels[r]));
    for (std::size_t c = 0; c < cs.size(); ++c) {
      if (cs[c] == cols) continue;
      width[c] = display_width(col_labels[cs[c]]);
      for (const std::size_t r : rs)
        if (r < rows) width[c] = std::max(width[c], format_value(v[r * cols + cs[c]], o_.precision).size());
    }

    line("");
    std::string head = "  " + style_.faint(pad_right(caption, label_col));
    for (std::size_t c = 0; c < cs.size(); ++c)
      head += "  " + (cs[c] == cols ? std::string("…") : style_.label(pad_left(col_labels[cs[c]], width[c])));
    line("{}", head);
    for (const std::size_t r : rs) {
      std::string text = "  " + (r == rows ? pad_right("⋮", label_col) : style_.label(pad_right(row_labels[r], label_col)));
      for (std::size_t c = 0; c < cs.size(); ++c) {
        if (cs[c] == cols || r == rows) {
          text += "  " + pad_left(cs[c] == cols ? "…" : "⋮", cs[c] == cols ? 1 : width[c]);
          continue;
        }
        const double x = v[r * cols + cs[c]];
        const std::string cell = pad_left(format_value(x, o_.precision), width[c]);
        text += "  " + (std::isfinite(x) ? cell : style_.faint(cell));
      }
      line("{}", text);
    }
    if (rs.size() != rows || cs.size() != cols) {
      std::vector<std::string> hidden;
      if (rs.size() != rows) hidden.push_back(fmt::format("{} of {} rows", rows - (rs.size() - 1), rows));
      if (cs.size() != cols) hidden.push_back(fmt::format("{} of {} columns", cols - (cs.size() - 1), cols));
      line("  {}", style_.faint(fmt::format("({} not shown; --max-rows 0 --max-cols 0 shows everything)",
                                            fmt::join(hidden, " and "))));
    }
  }

  void footer() {
    if (t_.warnings.empty()) return;
    line("");
    for (const std::string& w : t_.warnings) line("{} {}", style_.warning("warning:"), visible(w));
  }

  const Trace& t_;
  const Problem& p_;
  const RenderOptions& o_;
  Style style_;
  std::string out_;
};

}  // namespace

std::string render_trace(const Trace& trace, const RenderOptions& options) { return Renderer(trace, options).run(); }

}  // namespace attn
