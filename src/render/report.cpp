// The HTML report (docs/report.md): the page around a trace's numbers. This file writes the parts that
// must read without scripts (formulas, meanings, shapes, small tables, the pipeline diagram, the verdict)
// and the page's data as JSON; report/report.js draws the heatmaps and the tile walk from that JSON.

#include "render/report.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "render/colormap.hpp"
#include "render/mistakes.hpp"
#include "render/panel.hpp"
#include "render/renderer.hpp"
#include "render/report_assets.hpp"
#include "render/visible.hpp"
#include "text/number.hpp"

namespace attn {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;  // so that no "</script>" or "<!--" can end or bend the data block
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\u{:04x}", c);
        else out += ch;
    }
  }
  out += '"';
  return out;
}

namespace {

// ---- text ----

// A string from the trace (a token, a formula, a description) as page text: control characters written
// out (render/visible.hpp), then escaped for HTML.
std::string page_text(std::string_view text) { return html_escape(visible(text)); }
// The same string inside the page's JSON, where report.js only ever puts it into textContent.
std::string data_text(std::string_view text) { return json_string(visible(text)); }

std::string thousands(std::size_t count) {
  std::string digits = std::to_string(count), out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

std::string short_number(double x) { return significant_value(x, 3); }

// ---- JSON ----

// A number of the page's data: 7 significant digits (the page is for looking; the trace keeps every
// digit), and -inf, inf and nan as the strings the trace format uses.
void put_number(std::string& out, double x) {
  if (std::isnan(x)) out += "\"nan\"";
  else if (std::isinf(x)) out += x < 0 ? "\"-inf\"" : "\"inf\"";
  else fmt::format_to(std::back_inserter(out), "{:.7g}", x);
}

template <class Values>
void put_numbers(std::string& out, const Values& values) {
  out += '[';
  bool first = true;
  for (const double x : values) {
    if (!first) out += ',';
    first = false;
    put_number(out, x);
  }
  out += ']';
}

void put_texts(std::string& out, const std::vector<std::string>& items) {
  out += '[';
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (k > 0) out += ',';
    out += data_text(items[k]);
  }
  out += ']';
}

std::string_view scale_name(ColorScale s) { return s == ColorScale::sequential ? "sequential" : "diverging"; }

void put_range(std::string& out, const ColorRange& r) {
  fmt::format_to(std::back_inserter(out), "\"scale\":\"{}\",\"range\":[", scale_name(r.scale));
  put_number(out, r.lo);
  out += ',';
  put_number(out, r.hi);
  out += ']';
}

std::size_t cells(const Panel& p) { return p.rows * p.cols; }

// One heatmap: where it sits (batch, head), its labels and its numbers, or "values": null when the
// page's budget left it out.
void put_panel(std::string& out, const Panel& p, bool embed, std::size_t budget) {
  fmt::format_to(std::back_inserter(out), "{{\"batch\":{},\"head\":{},\"kv\":{},\"caption\":{},\"rows\":{},\"cols\":{}",
                 p.batch, p.head ? std::to_string(*p.head) : "null", p.kv ? "true" : "false", data_text(p.caption),
                 p.rows, p.cols);
  if (embed) {
    out += ",\"row_labels\":";
    put_texts(out, p.row_labels);
    out += ",\"col_labels\":";
    put_texts(out, p.col_labels);
    out += ",\"values\":";
    put_numbers(out, p.values);
    if (std::any_of(p.removed.begin(), p.removed.end(), [](unsigned char r) { return r != 0; })) {
      out += ",\"removed\":\"";
      for (const unsigned char r : p.removed) out += r != 0 ? '1' : '0';
      out += '"';
    }
    std::vector<std::size_t> empty;
    for (std::size_t r = 0; r < p.empty_row.size(); ++r)
      if (p.empty_row[r]) empty.push_back(r);
    if (!empty.empty()) fmt::format_to(std::back_inserter(out), ",\"empty_rows\":[{}]", fmt::join(empty, ","));
  } else {
    // Why it is not here: larger than any page holds, or the budget went to the heatmaps before it.
    fmt::format_to(std::back_inserter(out), ",\"values\":null,\"left_out\":\"{}\"",
                   cells(p) > budget ? "too large" : "budget");
  }
  out += '}';
}

// ---- the budget ----

// What the page needs to know of a step before it writes it. The panels themselves (a copy of the
// step's numbers) are made again when the step is written, so the report never holds a second copy of
// the whole trace.
struct PanelSize {
  std::optional<std::size_t> head;
  std::size_t cells = 0;
};

struct StepView {
  const StepRecord* rec = nullptr;
  std::vector<PanelSize> panels;
  std::vector<bool> embedded;
  ColorRange range;
  bool removed = false;  // some cell was removed by the mask
  std::string tables;    // for readers without scripts
  std::size_t left_out() const { return static_cast<std::size_t>(std::count(embedded.begin(), embedded.end(), false)); }
};

// Which heatmaps the page holds (ReportOptions): first the weights of the first head, then every step's
// first head (and the steps without heads), then the weights of the other heads, then everything else,
// each while it fits.
void plan_heatmaps(std::vector<StepView>& views, std::size_t budget) {
  std::size_t used = 0;
  const auto take = [&](StepView& view, std::size_t k) {
    if (view.embedded[k] || used + view.panels[k].cells > budget) return;
    view.embedded[k] = true;
    used += view.panels[k].cells;
  };
  const auto first_head = [&](StepView& view) {
    std::optional<std::size_t> first;
    for (const PanelSize& p : view.panels)
      if (p.head) first = std::min(first.value_or(*p.head), *p.head);
    for (std::size_t k = 0; k < view.panels.size(); ++k)
      if (!view.panels[k].head || view.panels[k].head == first) take(view, k);
  };
  for (StepView& view : views)
    if (view.rec->step == Step::weights) first_head(view);
  for (StepView& view : views) first_head(view);
  for (StepView& view : views)
    if (view.rec->step == Step::weights)
      for (std::size_t k = 0; k < view.panels.size(); ++k) take(view, k);
  for (StepView& view : views)
    for (std::size_t k = 0; k < view.panels.size(); ++k) take(view, k);
}

// The query tiles of the flash pass, each with its key tiles and its final, in the order the engine ran them.
struct QueryTile {
  std::size_t batch = 0, head = 0, i = 0, row_begin = 0, row_end = 0;
  std::vector<const FlashTile*> tiles;
  const FlashFinal* final = nullptr;
  std::size_t numbers() const {
    std::size_t count = final ? final->O.size() + final->lse.size() : 0;
    for (const FlashTile* t : tiles)
      if (!t->skipped) count += t->S.size() + t->P.size() + t->O.size() + 5 * (t->row_end - t->row_begin);
    return count;
  }
};

std::vector<QueryTile> query_tiles(const FlashRecord& f) {
  std::vector<QueryTile> out;
  for (const FlashTile& t : f.tiles) {
    if (out.empty() || out.back().batch != t.batch || out.back().head != t.head || out.back().i != t.i)
      out.push_back({t.batch, t.head, t.i, t.row_begin, t.row_end, {}, nullptr});
    out.back().tiles.push_back(&t);
  }
  for (const FlashFinal& done : f.finals)
    for (QueryTile& q : out)
      if (q.batch == done.batch && q.head == done.head && q.i == done.i) q.final = &done;
  return out;
}

// ---- the parts of the page ----

std::string shape_text(const Shape& shape) { return fmt::format("{}", fmt::join(shape, " × ")); }

// A legend: the colour map with its range, and the grey hatch of removed cells when the picture has any.
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

// A few rows and columns of a panel, for readers without scripts (and for print): the first and the last
// ones, like the terminal's tables.
std::string static_table(const Panel& p, std::size_t limit) {
  const std::vector<std::size_t> rows = render_detail::shown(p.rows, limit);
  const std::vector<std::size_t> cols = render_detail::shown(p.cols, limit);
  std::string out = "<table class=\"numbers\">";
  if (!p.caption.empty()) out += fmt::format("<caption>{}</caption>", page_text(p.caption));
  out += "<thead><tr><th></th>";
  for (const std::size_t c : cols)
    out += c == p.cols ? "<th>…</th>" : fmt::format("<th>{}</th>", page_text(p.col_labels[c]));
  out += "</tr></thead><tbody>";
  for (const std::size_t r : rows) {
    if (r == p.rows) {
      out += fmt::format("<tr><th>⋮</th><td colspan=\"{}\"></td></tr>", cols.size());
      continue;
    }
    out += fmt::format("<tr><th>{}</th>", page_text(p.row_labels[r]));
    for (const std::size_t c : cols) {
      if (c == p.cols) out += "<td>…</td>";
      else if (p.is_removed(r, c))
        out += fmt::format("<td class=\"removed\">{}</td>", format_value(p.values[r * p.cols + c], 4));
      else out += fmt::format("<td>{}</td>", format_value(p.values[r * p.cols + c], 4));
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  return out;
}

// A table of tile vectors or matrices (rows × cols) with labels, for the tile walk without scripts.
std::string static_matrix(std::string_view caption, std::span<const double> values, std::size_t rows, std::size_t cols,
                          const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                          std::size_t limit) {
  Panel p;
  p.caption = std::string(caption);
  p.rows = rows;
  p.cols = cols;
  p.values.assign(values.begin(), values.end());
  p.row_labels = row_labels;
  p.col_labels = col_labels;
  return static_table(p, limit);
}

std::string config_line(const Trace& t) {
  const Problem& p = *t.problem;
  std::string heads = p.g == p.h ? fmt::format("{} head{}", p.h, p.h == 1 ? "" : "s")
                                 : fmt::format("{} query heads, {} key/value heads", p.h, p.g);
  if (t.head) heads += fmt::format(" (this trace keeps head {})", *t.head);
  std::string engines = t.engine == Engine::both ? "naive and flash" : std::string(name_of(t.engine));
  if (t.flash) engines += fmt::format(" (tiles of {} × {})", t.flash->tile_size.Br, t.flash->tile_size.Bc);
  return fmt::format(
      "{}n = {} queries, m = {} keys, d_model = {}, d_k = {}, d_v = {}, d_out = {}, {}, scale = {}, mask {}, {}, "
      "engine {}",
      p.batched ? fmt::format("batch of {}, ", p.B) : "", p.n, p.m, p.d_model, p.d_k, p.d_v, p.d_out, heads,
      short_number(p.scale), page_text(p.mask.summary()), name_of(t.dtype), engines);
}

std::string token_line(const std::vector<std::string>& tokens) {
  constexpr std::size_t most = 40;
  std::string out;
  for (std::size_t k = 0; k < tokens.size() && k < most; ++k)
    out += fmt::format("<span class=\"token\">{}</span> ", page_text(tokens[k]));
  if (tokens.size() > most) out += fmt::format("… ({} in all)", tokens.size());
  return out;
}

// The pipeline as a diagram: one box per step, each a link to its section; the flash pass as one box.
std::string pipeline_svg(const Trace& t) {
  struct Node {
    Step step;
    double col, row;
  };
  // RoPE adds a column after the heads (q_rot, k_rot), ALiBi one after the scale (bias); the rest move right.
  const Problem& p = *t.problem;
  const double rot = p.rope ? 1 : 0, bias = p.alibi ? 1 : 0;
  const double c_scores = 3 + rot, c_scaled = 4 + rot, c_masked = 5 + rot + bias, c_weights = 6 + rot + bias,
               c_heads_out = 7 + rot + bias, c_concat = 8 + rot + bias, c_output = 9 + rot + bias;
  std::vector<Node> nodes = {{Step::q, 1, 0},       {Step::k, 1, 1},       {Step::v, 1, 2},
                             {Step::q_heads, 2, 0}, {Step::k_heads, 2, 1}, {Step::v_heads, 2, 2}};
  if (p.rope) nodes.insert(nodes.end(), {{Step::q_rot, 3, 0}, {Step::k_rot, 3, 1}});
  nodes.insert(nodes.end(), {{Step::scores, c_scores, 0.5}, {Step::scaled, c_scaled, 0.5}});
  if (p.alibi) nodes.push_back({Step::bias, c_scaled + 1, 0.5});
  nodes.insert(nodes.end(), {{Step::masked, c_masked, 0.5},
                             {Step::weights, c_weights, 0.5},
                             {Step::head_outputs, c_heads_out, 1.5},
                             {Step::concat, c_concat, 1.5},
                             {Step::output, c_output, 1.5}});
  constexpr double w = 112, h = 44, dx = 132, dy = 58, x0 = 8, y0 = 8;
  const auto x = [&](double col) { return x0 + col * dx; };
  const auto y = [&](double row) { return y0 + row * dy; };
  const auto kept = [&](Step s) {
    return std::any_of(t.steps.begin(), t.steps.end(), [s](const StepRecord& r) { return r.step == s; });
  };
  const auto shape_of = [&](Step s) -> std::string {
    for (const StepRecord& r : t.steps)
      if (r.step == s) return shape_text(r.value.shape());
    return is_score_step(s) && t.flash ? "flash: in tiles" : "not traced";
  };
  const auto edge = [&](double c1, double r1, double c2, double r2, std::string_view cls) {
    const double x1 = x(c1) + w, y1 = y(r1) + h / 2, x2 = x(c2) - 4, y2 = y(r2) + h / 2, xm = (x1 + x2) / 2;
    return fmt::format("<path class=\"{}\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>", cls, x1, y1,
                       xm, y1, xm, y2, x2, y2);
  };
  const double width = x(c_output) + w + x0, height = y(3.1) + h + y0;
  std::string out = fmt::format(
      "<svg class=\"pipeline\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"the steps of attention, from X to the "
      "output; each box links to its step\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
      "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10 z\" "
      "class=\"arrow-head\"/></marker></defs>",
      width, height);
  // The edges first, so the boxes cover their ends.
  for (const double row : {0.0, 1.0, 2.0}) out += edge(0, 1, 1, row, "edge");
  for (const double row : {0.0, 1.0, 2.0}) out += edge(1, row, 2, row, "edge");
  if (p.rope) out += edge(2, 0, 3, 0, "edge") + edge(2, 1, 3, 1, "edge");
  out += edge(2 + rot, 0, c_scores, 0.5, "edge") + edge(2 + rot, 1, c_scores, 0.5, "edge");
  out += edge(c_scores, 0.5, c_scaled, 0.5, "edge");
  if (p.alibi) out += edge(c_scaled, 0.5, c_scaled + 1, 0.5, "edge");
  out += edge(c_masked - 1, 0.5, c_masked, 0.5, "edge") + edge(c_masked, 0.5, c_weights, 0.5, "edge");
  out += edge(c_weights, 0.5, c_heads_out, 1.5, "edge") + edge(2, 2, c_heads_out, 1.5, "edge");
  out += edge(c_heads_out, 1.5, c_concat, 1.5, "edge") + edge(c_concat, 1.5, c_output, 1.5, "edge");
  // The input.
  out += fmt::format(
      "<g class=\"node input\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" "
      "y=\"{}\" class=\"node-name\">X</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">the input</text></g>",
      x(0), y(1), w, h, x(0) + w / 2, y(1) + 19, x(0) + w / 2, y(1) + 35);
  for (const Node& node : nodes) {
    const std::string_view name = step_info(node.step).name;
    const std::string box = fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" "
        "class=\"node-name\">{}</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">{}</text>",
        x(node.col), y(node.row), w, h, x(node.col) + w / 2, y(node.row) + 19, name, x(node.col) + w / 2,
        y(node.row) + 35, page_text(shape_of(node.step)));
    out += fmt::format("<a href=\"#step-{}\" class=\"node{}\"><title>{}: {}</title>{}</a>", name,
                       kept(node.step) ? "" : " absent", name, page_text(step_formula(node.step, *t.problem)), box);
  }
  // The flash pass: the same heads in, the same head outputs out, the scores only ever in tiles.
  const double fx = x(c_scores), fy = y(3.1), fw = x(c_weights) + w - x(c_scores);
  // In from below the heads (they hold Q, K and V per head, turned with RoPE), out to the bottom of
  // head_outputs. With ALiBi the tiles add the bias of their block to S.
  out += fmt::format("<path class=\"edge flash-edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>",
                     x(2) + w / 2, y(2) + h, x(2) + w / 2, fy + h / 2, fx - 30, fy + h / 2, fx - 4, fy + h / 2);
  out += fmt::format("<path class=\"edge flash-edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>",
                     fx + fw, fy + h / 2, x(c_heads_out) + w / 2, fy + h / 2, x(c_heads_out) + w / 2, fy + h / 2,
                     x(c_heads_out) + w / 2, y(1.5) + h + 4);
  const std::string flash_box = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" class=\"node-name\">flash: "
      "the tile walk</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">S and P one Br × Bc tile at a time; running m, "
      "l, O; one division at the end</text>",
      fx, fy, fw, h, fx + fw / 2, fy + 19, fx + fw / 2, fy + 35);
  out +=
      fmt::format("<a href=\"#flash\" class=\"node flash-node{}\"><title>FlashAttention-2's forward pass</title>{}</a>",
                  t.flash ? "" : " absent", flash_box);
  out += "</svg>";
  return out;
}

std::string note(std::string_view html) { return fmt::format("<p class=\"note\">{}</p>", html); }

// `page` with every {{name}} of report.html replaced by parts[name], in one pass, so that nothing put in
// (a token that reads "{{js}}") is replaced again.
std::string fill_template(std::string_view page, const std::map<std::string_view, std::string>& parts) {
  std::string out;
  std::size_t size = page.size();
  for (const auto& [name, text] : parts) size += text.size();
  out.reserve(size);
  for (std::size_t at = 0; at < page.size();) {
    const std::size_t open = page.find("{{", at);
    const std::size_t close = open == std::string_view::npos ? open : page.find("}}", open);
    if (close == std::string_view::npos) {
      out.append(page.substr(at));
      break;
    }
    out.append(page.substr(at, open - at));
    const auto found = parts.find(page.substr(open + 2, close - open - 2));
    out += found != parts.end() ? found->second : std::string(page.substr(open, close + 2 - open));
    at = close + 2;
  }
  return out;
}

// The report of one trace: first what the page will hold (the plan), then its JSON and its HTML.
class Report {
 public:
  Report(const Trace& trace, const ReportOptions& options) : t_(trace), p_(*trace.problem), o_(options) {
    // pass 1: flash's output minus naive's, when both ran (with flash alone, the output step is flash's own);
    // and with --mistake, the first step where the mistaken computation differs
    plan_difference();
    plan_mistake();
    // pass 2: which of the steps' heatmaps fit the page's budget
    plan_steps();
    // pass 3: which query tiles the tile walk holds
    plan_walk();
  }

  std::string html() const {
    return fill_template(report_template, {{"nav", nav()},
                                           {"title", page_text(p_.description.empty() ? "attention" : p_.description)},
                                           {"description", page_text(p_.description)},
                                           {"config", config_line(t_)},
                                           {"tokens", tokens_html()},
                                           {"notes", notes_html()},
                                           {"pipeline", pipeline_svg(t_)},
                                           {"steps", step_sections()},
                                           {"flash", flash_section()},
                                           {"diff", diff_section()},
                                           {"mistake", mistake_section()},
                                           {"generator", page_text(fmt::format("attn-trace {}", o_.version))},
                                           {"css", std::string(report_css)},
                                           {"js", std::string(report_js)},
                                           {"data", data()}});
  }

 private:
  void plan_difference() {
    const StepRecord* naive_output = nullptr;
    for (const StepRecord& rec : t_.steps)
      if (rec.step == Step::output && t_.engine == Engine::both) naive_output = &rec;
    if (!t_.flash || naive_output == nullptr || naive_output->value.shape() != t_.flash->output.shape()) return;
    // D = O_flash − O_naive
    const auto a = naive_output->value.values(), b = t_.flash->output.values();
    std::vector<double> d(a.size());
    for (std::size_t k = 0; k < a.size(); ++k) d[k] = b[k] - a[k];
    difference_ = StepRecord{Step::output, "D = O_flash − O_naive", "", Tensor<double>(naive_output->value.shape(), d)};
    diff_panels_ = panels(t_, *difference_);
    for (const Panel& panel : diff_panels_) diff_numbers_ += cells(panel);
    diff_embedded_ = diff_numbers_ <= o_.max_step_numbers / 4;
    // A difference is signed: blue-white-red about 0, white everywhere when the two agree exactly.
    for (const double x : d) max_diff_ = std::max(max_diff_, std::fabs(x));
    diff_range_ = {ColorScale::diverging, -max_diff_, max_diff_};
  }

  // The panel (batch item and head) of the first differing step that holds the largest difference, as
  // intended and as mistaken, on one colour scale.
  void plan_mistake() {
    if (o_.mistake == nullptr) return;
    std::optional<DifferencePanels> shown = first_difference_panels(*o_.mistake);
    if (!shown) return;
    mistake_panels_ = {std::move(shown->intended), std::move(shown->mistaken)};
    const Panel& wrong = mistake_panels_[1];
    for (Panel& p : mistake_panels_) {
      p.caption =
          fmt::format("{}{}{}", p.caption, p.caption.empty() ? "" : ", ", &p == &wrong ? "mistaken" : "intended");
      p.head.reset();  // shown whichever head the page's selector shows
    }
    mistake_range_ = panel_range({&mistake_panels_[0], &mistake_panels_[1]});
    mistake_numbers_ = 2 * cells(mistake_panels_[0]);
    mistake_embedded_ = mistake_numbers_ <= o_.max_step_numbers / 4;
  }

  void plan_steps() {
    for (const StepRecord& rec : t_.steps) {
      StepView view;
      view.rec = &rec;
      const std::vector<Panel> all = panels(t_, rec);
      std::vector<const Panel*> list;
      for (const Panel& panel : all) {
        view.panels.push_back({panel.head, cells(panel)});
        list.push_back(&panel);
        view.removed = view.removed ||
                       std::any_of(panel.removed.begin(), panel.removed.end(), [](unsigned char r) { return r != 0; });
      }
      view.embedded.assign(all.size(), false);
      view.range = panel_range(list);
      constexpr std::size_t tables_shown = 4;
      for (std::size_t k = 0; k < all.size() && k < tables_shown; ++k)
        view.tables += static_table(all[k], o_.table_size);
      if (all.size() > tables_shown)
        view.tables += note(fmt::format("The tables show the first {} of {} heatmaps.", tables_shown, all.size()));
      views_.push_back(std::move(view));
    }
    plan_heatmaps(views_, o_.max_step_numbers - (diff_embedded_ ? diff_numbers_ : 0) -
                              (mistake_embedded_ ? mistake_numbers_ : 0));
    std::size_t left_out = 0;
    for (const StepView& view : views_) left_out += view.left_out();
    if (left_out > 0)
      notes_.push_back(fmt::format(
          "This trace is large: {} of its heatmaps are not in this page, which holds at most {} of the steps' "
          "numbers (each step says which). <code>--head H</code> or <code>--steps</code> make a smaller trace that "
          "fits whole.",
          left_out, thousands(o_.max_step_numbers)));
  }

  // Whole query tiles, in the engine's order, while they fit.
  void plan_walk() {
    if (!t_.flash) return;
    std::vector<QueryTile> all = query_tiles(*t_.flash);
    query_tiles_total_ = all.size();
    std::size_t numbers = 0, tiles = 0;
    for (QueryTile& q : all) {
      if (numbers + q.numbers() > o_.max_tile_numbers || tiles + q.tiles.size() > o_.max_tiles) break;
      numbers += q.numbers();
      tiles += q.tiles.size();
      walk_.push_back(std::move(q));
    }
    if (walk_.size() < query_tiles_total_)
      notes_.push_back(
          fmt::format("The tile walk holds the first {} of the {} query tiles (at most {} tiles and {} numbers); "
                      "<code>--head H</code>, or larger <code>--block-q</code>/<code>--block-k</code>, walk others.",
                      walk_.size(), query_tiles_total_, thousands(o_.max_tiles), thousands(o_.max_tile_numbers)));
  }

  // ---- the page's data (docs/report.md, "The page's data") ----

  std::string data() const {
    std::string out = fmt::format(
        "{{\"format\":\"attn-trace.report\",\"version\":1,\"generator\":{},\"description\":{},\"config\":{{\"n\":{},"
        "\"m\":{},\"batch\":{},\"d_model\":{},\"d_k\":{},\"d_v\":{},\"d_out\":{},\"n_heads\":{},\"n_kv_heads\":{},"
        "\"scale\":",
        json_string(fmt::format("attn-trace {}", o_.version)), data_text(p_.description), p_.n, p_.m,
        p_.batched ? std::to_string(p_.B) : "null", p_.d_model, p_.d_k, p_.d_v, p_.d_out, p_.h, p_.g);
    put_number(out, p_.scale);
    out += fmt::format(",\"mask\":{},\"dtype\":\"{}\",\"engine\":\"{}\",\"head\":{}}}", data_text(p_.mask.summary()),
                       name_of(t_.dtype), name_of(t_.engine), t_.head ? std::to_string(*t_.head) : "null");
    out += fmt::format(",\"budget\":{{\"step_numbers\":{},\"tile_numbers\":{},\"tiles\":{}}}", o_.max_step_numbers,
                       o_.max_tile_numbers, o_.max_tiles);
    for (const auto& [key, tokens] :
         {std::pair{"tokens", &p_.tokens}, std::pair{"context_tokens", &p_.context_tokens}}) {
      fmt::format_to(std::back_inserter(out), ",\"{}\":[", key);
      for (std::size_t b = 0; b < tokens->size(); ++b) {
        if (b > 0) out += ',';
        put_texts(out, (*tokens)[b]);
      }
      out += ']';
    }
    // The colours of colormap.hpp, so the page's heatmaps are those of every other picture.
    constexpr int lut = 256;
    out += ",\"colors\":{";
    for (const ColorScale scale : {ColorScale::sequential, ColorScale::diverging}) {
      out += fmt::format("\"{}\":[", scale_name(scale));
      for (int k = 0; k < lut; ++k)
        out += fmt::format("{}\"{}\"", k > 0 ? "," : "", hex(color_at(scale, k / static_cast<double>(lut - 1))));
      out += "],";
    }
    out += fmt::format("\"removed\":\"{}\"}},\"steps\":[", hex(removed_color));
    for (std::size_t s = 0; s < views_.size(); ++s) {
      if (s > 0) out += ',';
      put_step(out, views_[s]);
    }
    out += "],\"flash\":";
    put_flash(out);
    out += ",\"diff\":";
    put_difference(out);
    out += ",\"mistake\":";
    put_mistake(out);
    out += ",\"notes\":[";
    for (std::size_t k = 0; k < notes_.size(); ++k) {
      if (k > 0) out += ',';
      out += json_string(notes_[k]);
    }
    out += "]}";
    return out;
  }

  void put_step(std::string& out, const StepView& view) const {
    const StepRecord& rec = *view.rec;
    fmt::format_to(
        std::back_inserter(out),
        "{{\"name\":\"{}\",\"formula\":{},\"description\":{},\"shape\":[{}],\"dims\":", step_info(rec.step).name,
        data_text(rec.formula), data_text(rec.description), fmt::join(rec.value.shape(), ","));
    put_texts(out, dim_names(rec.step, p_.batched));
    out += ',';
    put_range(out, view.range);
    out += ",\"panels\":[";
    const std::vector<Panel> all = panels(t_, rec);  // made again, one step at a time (StepView)
    for (std::size_t k = 0; k < all.size(); ++k) {
      if (k > 0) out += ',';
      put_panel(out, all[k], view.embedded[k], o_.max_step_numbers);
    }
    out += "]}";
  }

  void put_flash(std::string& out) const {
    if (!t_.flash) {
      out += "null";
      return;
    }
    const FlashRecord& f = *t_.flash;
    fmt::format_to(std::back_inserter(out),
                   "{{\"block_q\":{},\"block_k\":{},\"d_v\":{},\"tiles_total\":{},\"query_tiles_total\":{},\"walk\":[",
                   f.tile_size.Br, f.tile_size.Bc, p_.d_v, f.tiles.size(), query_tiles_total_);
    for (std::size_t q = 0; q < walk_.size(); ++q) {
      const QueryTile& qt = walk_[q];
      fmt::format_to(std::back_inserter(out), "{}{{\"batch\":{},\"head\":{},\"i\":{},\"rows\":[{},{}],\"tiles\":[",
                     q > 0 ? "," : "", qt.batch, qt.head, qt.i, qt.row_begin, qt.row_end);
      for (std::size_t k = 0; k < qt.tiles.size(); ++k) {
        const FlashTile& tile = *qt.tiles[k];
        fmt::format_to(std::back_inserter(out), "{}{{\"j\":{},\"cols\":[{},{}],\"skipped\":{}", k > 0 ? "," : "",
                       tile.j, tile.col_begin, tile.col_end, tile.skipped ? "true" : "false");
        if (!tile.skipped) {
          const std::pair<const char*, const Tensor<double>*> parts[] = {
              {"S", &tile.S}, {"m_prev", &tile.m_prev}, {"m_new", &tile.m_new}, {"alpha", &tile.alpha},
              {"P", &tile.P}, {"l_prev", &tile.l_prev}, {"l_new", &tile.l_new}, {"O", &tile.O}};
          for (const auto& [name, value] : parts) {
            fmt::format_to(std::back_inserter(out), ",\"{}\":", name);
            put_numbers(out, value->values());
          }
        }
        out += '}';
      }
      out += "],\"final\":";
      if (qt.final != nullptr) {
        out += "{\"O\":";
        put_numbers(out, qt.final->O.values());
        out += ",\"lse\":";
        put_numbers(out, qt.final->lse.values());
        out += '}';
      } else {
        out += "null";
      }
      out += '}';
    }
    out += "]}";
  }

  void put_mistake(std::string& out) const {
    if (o_.mistake == nullptr) {
      out += "null";
      return;
    }
    const MistakeResult& r = *o_.mistake;
    fmt::format_to(std::back_inserter(out), "{{\"name\":{},\"first_difference\":{}",
                   json_string(mistake_info(r.mistake).name),
                   r.first_difference ? json_string(step_info(*r.first_difference).name) : "null");
    if (!mistake_panels_.empty()) {
      out += ',';
      put_range(out, mistake_range_);
      out += ",\"panels\":[";
      put_panel(out, mistake_panels_[0], mistake_embedded_, o_.max_step_numbers / 4);
      out += ',';
      put_panel(out, mistake_panels_[1], mistake_embedded_, o_.max_step_numbers / 4);
      out += ']';
    }
    out += '}';
  }

  void put_difference(std::string& out) const {
    if (!difference_) {
      out += "null";
      return;
    }
    out += '{';
    put_range(out, diff_range_);
    out += ",\"max_abs\":";
    put_number(out, max_diff_);
    out += ",\"panels\":[";
    for (std::size_t k = 0; k < diff_panels_.size(); ++k) {
      if (k > 0) out += ',';
      put_panel(out, diff_panels_[k], diff_embedded_, o_.max_step_numbers / 4);
    }
    out += "]}";
  }

  // ---- the HTML around it ----

  std::string step_sections() const {
    std::string out;
    for (const Step step : steps_of(p_)) {
      const auto found =
          std::find_if(views_.begin(), views_.end(), [step](const StepView& v) { return v.rec->step == step; });
      out += found == views_.end() ? absent_step(step)
                                   : step_section(*found, static_cast<std::size_t>(found - views_.begin()));
    }
    return out;
  }

  // A step the trace does not hold keeps its section (the pipeline links to it), saying why.
  std::string absent_step(Step step) const {
    const std::string_view name = step_info(step).name;
    return fmt::format(
        "<section class=\"step absent\" id=\"step-{}\" data-step=\"{}\"><h2><a class=\"anchor\" "
        "href=\"#step-{}\">{}</a></h2><p class=\"formula\">{}</p><p class=\"meaning\">{}</p>{}</section>\n",
        name, name, name, name, page_text(step_formula(step, p_)), page_text(step_description(step, p_)),
        note(is_score_step(step) && t_.flash && t_.engine == Engine::flash
                 ? "The flash engine never forms this n × m matrix whole: its tiles hold it piece by piece, in "
                   "<a href=\"#flash\">the tile walk</a>. <code>--engine both</code> draws it here too."
                 : "Not in this trace (it was left out by <code>--steps</code>)."));
  }

  std::string step_section(const StepView& view, std::size_t index) const {
    const StepRecord& rec = *view.rec;
    const std::string_view name = step_info(rec.step).name;
    std::string notes;
    if (const std::size_t left = view.left_out(); left > 0) {
      const bool too_large = std::all_of(view.panels.begin(), view.panels.end(),
                                         [&](const PanelSize& size) { return size.cells > o_.max_step_numbers; });
      notes = note(too_large ? fmt::format("These heatmaps are larger than the {} numbers a page holds; the trace "
                                           "(<code>run --json</code>) has them all.",
                                           thousands(o_.max_step_numbers))
                             : fmt::format("{} of these {} heatmaps are not in this page (its budget of numbers "
                                           "went to the heatmaps before them); <code>--head H</code> makes a trace "
                                           "of one head that fits.",
                                           left, view.panels.size()));
    }
    if (const std::vector<Panel> angles = rotation_panels(p_, rec.step); !angles.empty()) {
      // RoPE's angle table: what each token was turned by.
      notes +=
          note(fmt::format("The angles: pair i turns by pos·θ_i, θ_i = {}^(−2i/{}).", p_.rope->theta, p_.rope->dims));
      for (const Panel& panel : angles) notes += static_table(panel, 12);
    }
    if (rec.step == Step::weights) {
      // The rows the mask emptied, one line per batch item.
      std::map<std::size_t, std::vector<std::string>> empty;
      for (const EmptyRow& e : t_.empty_rows) empty[e.batch].push_back(page_text(p_.tokens[e.batch][e.query]));
      for (auto& [b, names] : empty) {
        const std::size_t count = names.size();
        if (count > 8) names.resize(8), names.emplace_back("…");
        notes += note(fmt::format("{} {}{} {} no key to attend: {} weights are all 0.",
                                  count == 1 ? "Query" : fmt::format("{} queries", count), fmt::join(names, ", "),
                                  p_.batched ? fmt::format(" of batch item {}", b) : "", count == 1 ? "has" : "have",
                                  count == 1 ? "its" : "their"));
      }
    }
    return fmt::format(
        "<section class=\"step\" id=\"step-{}\" data-step=\"{}\" data-index=\"{}\"><h2><a class=\"anchor\" "
        "href=\"#step-{}\">{}</a></h2><p class=\"formula\">{}</p><p class=\"meaning\">{}</p><p "
        "class=\"shape\">shape <b>{}</b> ({}), {}</p>{}<div class=\"heatmaps needs-js\"></div>{}<details "
        "class=\"numbers\" open><summary>numbers</summary>{}</details></section>\n",
        name, name, index, name, name, page_text(rec.formula), page_text(rec.description),
        shape_text(rec.value.shape()), fmt::join(dim_names(rec.step, p_.batched), " × "), name_of(t_.dtype),
        legend_svg(view.range, view.removed, name), notes, view.tables);
  }

  // The flash section: the walk's controls, and its first tile as tables for readers without scripts.
  std::string flash_section() const {
    std::string out =
        "<section id=\"flash\" class=\"flash\"><h2><a class=\"anchor\" href=\"#flash\">flash: the tile walk</a></h2>"
        "<p class=\"formula\">m_new = max(m_prev, rowmax S) &nbsp; alpha = exp(m_prev − m_new) &nbsp; P = exp(S − "
        "m_new)</p><p class=\"formula\">l_new = alpha·l_prev + rowsum P &nbsp; O = alpha·O_prev + P·V &nbsp; then "
        "once: O / l, lse = m + log l</p>";
    if (!t_.flash)
      return out +
             note(
                 "This trace has no flash pass. <code>attn-trace report FILE</code> runs both engines by default; a "
                 "saved trace needs <code>run --engine both --json</code> (or <code>flash</code>, or <code>compare "
                 "--json</code>).") +
             "</section>\n";
    const FlashRecord& f = *t_.flash;
    out += fmt::format(
        "<p class=\"meaning\">FlashAttention-2's forward pass (arXiv:2307.08691, Algorithm 1): each query tile of "
        "{} row{} meets the keys {} at a time. Only one tile of scores S and its exponentials P exist at once; each "
        "row keeps a running maximum m, sum l and output O, and when a tile raises m, alpha = exp(m_prev − m_new) "
        "rescales what earlier tiles added. The rectangle on the score matrix is the current tile.</p>",
        f.tile_size.Br, f.tile_size.Br == 1 ? "" : "s", f.tile_size.Bc);
    out +=
        "<div class=\"walk-controls needs-js\"><label>query tile <select id=\"tile-select\"></select></label> "
        "<button type=\"button\" data-action=\"prev-tile\" title=\"previous tile (←)\">◀ previous tile</button> "
        "<button type=\"button\" data-action=\"next-tile\" title=\"next tile (→)\">next tile ▶</button></div>";
    std::string state = "The trace holds no tile that fits this page.";
    std::string tables;
    if (!walk_.empty() && !walk_.front().tiles.empty()) {
      const FlashTile& tile = *walk_.front().tiles.front();
      state = fmt::format("{}head {} · query tile {} (rows {}–{}) × key tile {} (keys {}–{}){}",
                          p_.batched ? fmt::format("batch {} · ", tile.batch) : "", tile.head, tile.i, tile.row_begin,
                          tile.row_end - 1, tile.j, tile.col_begin, tile.col_end - 1,
                          tile.skipped ? ": skipped, the mask rules out every pair" : "");
      if (!tile.skipped) tables = tile_tables(tile);
    }
    out += fmt::format(
        "<p id=\"tile-state\" aria-live=\"polite\">{}</p><div class=\"walk needs-js\"><div "
        "id=\"tile-full\"></div><div id=\"tile-parts\"></div></div>",
        page_text(state));
    if (!tables.empty())
      out += fmt::format("<details class=\"numbers\" open><summary>the first tile's numbers</summary>{}</details>",
                         tables);
    return out + "</section>\n";
  }

  // S, the running state, P and O of one tile, as tables.
  std::string tile_tables(const FlashTile& tile) const {
    const auto& row_tokens = p_.tokens[tile.batch];
    const auto& col_tokens = p_.context_tokens[tile.batch];
    const std::vector<std::string> rows(row_tokens.begin() + static_cast<long>(tile.row_begin),
                                        row_tokens.begin() + static_cast<long>(tile.row_end));
    const std::vector<std::string> cols(col_tokens.begin() + static_cast<long>(tile.col_begin),
                                        col_tokens.begin() + static_cast<long>(tile.col_end));
    const std::size_t r = rows.size(), c = cols.size(), d = tile.O.size() / std::max<std::size_t>(1, r);
    std::vector<double> state;
    for (std::size_t k = 0; k < r; ++k)
      for (const Tensor<double>* v : {&tile.m_prev, &tile.m_new, &tile.alpha, &tile.l_prev, &tile.l_new})
        state.push_back(v->values()[k]);
    std::vector<std::string> features;
    for (std::size_t k = 0; k < d; ++k) features.push_back(std::to_string(k));
    return static_matrix("S", tile.S.values(), r, c, rows, cols, o_.table_size) +
           static_matrix("state", state, r, 5, rows, {"m_prev", "m_new", "alpha", "l_prev", "l_new"}, 5) +
           static_matrix("P", tile.P.values(), r, c, rows, cols, o_.table_size) +
           static_matrix("O", tile.O.values(), r, d, rows, features, o_.table_size);
  }

  std::string diff_section() const {
    if (!difference_) {
      if (!t_.flash && t_.engine == Engine::naive) return "";
      return "<section id=\"naive-vs-flash\" class=\"diff\"><h2>naive vs flash</h2>" +
             note(t_.engine == Engine::both
                      ? "The naive output is not in this trace (<code>--steps</code> left it out), so there is "
                        "nothing to set the flash output against."
                      : "Only one engine's output is in this trace; <code>--engine both</code> (the default of "
                        "<code>report</code> for an input) shows how far flash is from naive.") +
             "</section>\n";
    }
    std::string verdict = fmt::format("max |flash − naive| = {} over {} values ({})", short_number(max_diff_),
                                      difference_->value.size(), name_of(t_.dtype));
    if (t_.compare) {
      const CompareRecord& c = *t_.compare;
      verdict += fmt::format(
          ". compare's verdict: <b class=\"{}\">{}</b>: max |flash − ref| = {} {} 2 · max |naive − ref| + noise = "
          "2 · {} + {} = {} (ref: naive attention in {})",
          c.pass ? "pass" : "fail", c.pass ? "pass" : "fail", short_number(c.flash_vs_ref.max_abs), c.pass ? "≤" : ">",
          short_number(c.naive_vs_ref.max_abs), short_number(c.noise), short_number(c.bound), reference_name(c.dtype));
    } else {
      verdict +=
          ". Both sum the same numbers in another order, so they differ in the last digits; "
          "<code>attn-trace compare</code> judges both against a wider reference.";
    }
    std::string tables;
    for (std::size_t k = 0; k < diff_panels_.size() && k < 4; ++k) {
      Panel shown = diff_panels_[k];
      if (shown.caption.empty()) shown.caption = "flash − naive";
      tables += static_table(shown, o_.table_size);
    }
    return fmt::format(
        "<section id=\"naive-vs-flash\" class=\"diff\"><h2><a class=\"anchor\" href=\"#naive-vs-flash\">naive vs "
        "flash</a></h2><p class=\"formula\">D = O_flash − O_naive</p><p class=\"meaning\">How far the flash "
        "output is from the naive one, entry by entry (shape {}).</p><p class=\"verdict\" "
        "id=\"verdict\">{}</p>{}{}<div class=\"heatmaps needs-js\" id=\"diff-maps\"></div><details "
        "class=\"numbers\" open><summary>numbers</summary>{}</details></section>\n",
        shape_text(difference_->value.shape()), verdict, legend_svg(diff_range_, false, "diff"),
        diff_embedded_ ? "" : note("The difference map is too large for this page; the verdict above covers it all."),
        tables);
  }

  // report --mistake: what the mistake is, every step's largest difference, the first difference as two
  // heatmaps (and tables), and what it costs.
  std::string mistake_section() const {
    if (o_.mistake == nullptr) return "";
    const MistakeResult& r = *o_.mistake;
    const MistakeInfo& info = mistake_info(r.mistake);
    std::string steps;
    for (const StepDifference& d : r.steps) {
      const bool first = r.first_difference && *r.first_difference == d.step;
      const std::string what = !d.same_shape ? fmt::format("shapes differ: {} and {}", shape_text(d.intended_shape),
                                                           shape_text(d.mistaken_shape))
                               : d.differs() ? short_number(d.max_abs)
                                             : "0 (identical)";
      steps += fmt::format("<tr{}><th>{}</th><td>{}</td><td>{}</td></tr>", first ? " class=\"first\"" : "",
                           step_info(d.step).name, what, first ? "first difference" : "");
    }
    std::string first =
        "<p class=\"meaning\">No step differs: on this input the mistake changes nothing (see "
        "below why).</p>";
    if (r.first_difference) {
      const Step step = *r.first_difference;
      first = fmt::format(
          "<h3 id=\"mistake-first\">first difference: {}</h3><p class=\"formula\">intended: {}</p>"
          "<p class=\"formula\">mistaken: {}</p>",
          step_info(step).name, page_text(find_step(r.intended, step)->formula),
          page_text(find_step(r.mistaken, step)->formula));
      if (!mistake_panels_.empty()) {
        first += legend_svg(mistake_range_, !mistake_panels_[0].removed.empty(), "mistake");
        if (!mistake_embedded_) first += note("These matrices are too large for this page; the tables show a corner.");
        first +=
            "<div class=\"heatmaps needs-js\" id=\"mistake-maps\"></div><details class=\"numbers\" "
            "open><summary>numbers</summary>" +
            static_table(mistake_panels_[0], o_.table_size) + static_table(mistake_panels_[1], o_.table_size) +
            "</details>";
      }
    }
    std::string costs = "<ul class=\"findings\">";
    for (const std::string& f : r.findings) costs += fmt::format("<li>{}</li>", page_text(f));
    costs += "</ul>";
    for (const CostTable& t : r.costs) {
      if (t.rows.empty()) continue;
      costs += fmt::format("<table class=\"numbers cost\"><caption>{}</caption><thead><tr><th>{}</th>",
                           page_text(t.title), t.by_key ? "key" : "query");
      for (const std::string& m : t.measures)
        costs += fmt::format("<th>{} (intended)</th><th>{} (mistaken)</th>", page_text(m), page_text(m));
      costs += "</tr></thead><tbody>";
      constexpr std::size_t most = 32;
      for (std::size_t k = 0; k < t.rows.size() && k < most; ++k) {
        const CostRow& row = t.rows[k];
        const auto& tokens = t.by_key && p_.cross ? p_.context_tokens : p_.tokens;
        std::string label = page_text(tokens[row.batch][row.index]);
        if (p_.h > 1) label = fmt::format("head {}, {}", row.head, label);
        if (p_.batched) label = fmt::format("batch {}, {}", row.batch, label);
        costs += fmt::format("<tr><th>{}</th>", label);
        for (std::size_t m = 0; m < t.measures.size(); ++m)
          costs +=
              fmt::format("<td>{}</td><td>{}</td>", format_value(row.intended[m], 4), format_value(row.mistaken[m], 4));
        costs += "</tr>";
      }
      costs += "</tbody></table>";
      if (t.rows.size() > most)
        costs +=
            note(fmt::format("The table shows the first {} of {} rows; <code>attn-trace run --mistake {} "
                             "--json OUT</code> writes them all.",
                             most, t.rows.size(), info.name));
    }
    return fmt::format(
        "<section id=\"mistake\" class=\"mistake\"><h2><a class=\"anchor\" href=\"#mistake\">mistake: {}</a></h2>"
        "<p class=\"meaning\">{}</p><p class=\"formula\">intended: {}</p><p class=\"formula\">mistaken: {}</p>"
        "<p class=\"meaning\">{}</p><table class=\"numbers mistake-steps\"><caption>the largest |intended − "
        "mistaken| of each step</caption><tbody>{}</tbody></table>{}<h3>what it costs, measured</h3>{}</section>\n",
        info.name, page_text(info.summary), page_text(info.intended), page_text(info.mistaken), page_text(info.why),
        steps, first, costs);
  }

  std::string notes_html() const {
    std::string out;
    for (const std::string& line : notes_) out += note(line);
    for (const std::string& warning : t_.warnings)
      out += fmt::format("<p class=\"note warning\">{}</p>", page_text(warning));
    return out.empty() ? out : "<div class=\"notes\" id=\"notes\">" + out + "</div>";
  }

  std::string tokens_html() const {
    std::string out = fmt::format("<p class=\"tokens\">queries: {}</p>", token_line(p_.tokens[0]));
    if (p_.cross) out += fmt::format("<p class=\"tokens\">keys: {}</p>", token_line(p_.context_tokens[0]));
    return out;
  }

  std::string nav() const {
    std::string out = "<a href=\"#pipeline\">pipeline</a>";
    for (const StepView& view : views_) {
      const std::string_view name = step_info(view.rec->step).name;
      out += fmt::format(" <a href=\"#step-{}\">{}</a>", name, name);
    }
    if (t_.flash) out += " <a href=\"#flash\">tile walk</a>";
    if (difference_) out += " <a href=\"#naive-vs-flash\">naive vs flash</a>";
    if (o_.mistake != nullptr) out = "<a href=\"#mistake\">mistake</a> " + out;
    return out;
  }

  const Trace& t_;
  const Problem& p_;
  const ReportOptions& o_;
  std::vector<std::string> notes_;  // what the page leaves out, as HTML sentences
  // naive vs flash
  std::optional<StepRecord> difference_;
  std::vector<Panel> diff_panels_;
  std::size_t diff_numbers_ = 0;
  bool diff_embedded_ = false;
  double max_diff_ = 0;
  ColorRange diff_range_;
  // the steps
  std::vector<StepView> views_;
  // the mistake: its first difference as intended and as mistaken
  std::vector<Panel> mistake_panels_;
  ColorRange mistake_range_;
  std::size_t mistake_numbers_ = 0;
  bool mistake_embedded_ = false;
  // the tile walk
  std::vector<QueryTile> walk_;
  std::size_t query_tiles_total_ = 0;
};

}  // namespace

std::string report_html(const Trace& trace, const ReportOptions& options) { return Report(trace, options).html(); }

}  // namespace attn
