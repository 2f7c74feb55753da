#include "render/pages/report/pipeline_svg.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "observe/steps.hpp"
#include "trace/trace.hpp"
#include "render/pages/report/html.hpp"
#include "render/pages/report/writer.hpp"

namespace attn::report_detail {

namespace {

// A step's box: its column and row on the grid of the diagram.
struct Node {
  Step step;
  double col, row;
};

// The boxes laid out from the step graph (observe/steps.hpp), in pipeline order: a step goes one column
// past the furthest of the steps it reads and on the mean of their rows; a step that reads the input X
// (a projection) goes in column 1, one row under the one before. A step that applies to the problem
// (RoPE's, ALiBi's) adds its column by itself.
std::vector<Node> nodes_of(const Problem& p) {
  std::vector<Node> nodes;
  std::array<Node, step_count> at{};
  double next_row = 0;
  for (const Step s : steps_of(p)) {
    const std::vector<Step> in = inputs_of(s, p);
    Node node{s, 1, next_row};
    if (in.empty()) {
      next_row += 1;
    } else {
      double col = 0, rows = 0;
      for (const Step i : in) {
        col = std::max(col, at[static_cast<std::size_t>(i)].col);
        rows += at[static_cast<std::size_t>(i)].row;
      }
      node = {s, col + 1, rows / static_cast<double>(in.size())};
    }
    at[static_cast<std::size_t>(s)] = node;
    nodes.push_back(node);
  }
  return nodes;
}

const Node& node_of(const std::vector<Node>& nodes, Step s) {
  return *std::find_if(nodes.begin(), nodes.end(), [s](const Node& n) { return n.step == s; });
}

// Where the flash pass goes: under the steps it holds only in tiles, fed from below the step the
// tiles' reader also reads whole (the values), and out into that reader (the head outputs).
struct FlashPlace {
  double first_col = 0, last_col = 0, row = 0;
  Node from, into;
};

FlashPlace flash_place(const Problem& p, const std::vector<Node>& nodes) {
  FlashPlace f{1e9, 0, 0, nodes.front(), nodes.front()};
  double rows = 0;
  for (const Node& n : nodes) {
    rows = std::max(rows, n.row);
    if (is_score_step(n.step)) {
      f.first_col = std::min(f.first_col, n.col);
      f.last_col = std::max(f.last_col, n.col);
      continue;
    }
    const std::vector<Step> in = inputs_of(n.step, p);
    if (std::none_of(in.begin(), in.end(), is_score_step)) continue;
    f.into = n;
    for (const Step s : in)
      if (!is_score_step(s)) f.from = node_of(nodes, s);
  }
  f.row = rows + 1.1;  // under every row of boxes
  return f;
}

// A box's size, the grid's pitch and the margin, in user units.
constexpr double w = 112, h = 44, dx = 132, dy = 58, x0 = 8, y0 = 8;
double x(double col) { return x0 + col * dx; }
double y(double row) { return y0 + row * dy; }

// An arrow from the right side of one box to the left side of another.
std::string edge(double c1, double r1, double c2, double r2, std::string_view cls) {
  const double x1 = x(c1) + w, y1 = y(r1) + h / 2, x2 = x(c2) - 4, y2 = y(r2) + h / 2, xm = (x1 + x2) / 2;
  return fmt::format("<path class=\"{}\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>", cls, x1, y1, xm,
                     y1, xm, y2, x2, y2);
}

std::string svg_open(const std::vector<Node>& nodes, const FlashPlace& f) {
  double last = 0;
  for (const Node& n : nodes) last = std::max(last, n.col);
  const double width = x(last) + w + x0, height = y(f.row) + h + y0;
  return fmt::format(
      "<svg class=\"pipeline\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"the steps of attention, from X to the "
      "output; each box links to its step\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
      "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10 z\" "
      "class=\"arrow-head\"/></marker></defs>",
      width, height);
}

// The arrows of the graph, drawn before the boxes so the boxes cover their ends: from X (column 0, the
// middle row) into each projection, and from each step into the steps that read it.
std::string edges(const Problem& p, const std::vector<Node>& nodes) {
  std::string out;
  for (const Node& n : nodes) {
    const std::vector<Step> in = inputs_of(n.step, p);
    if (in.empty()) out += edge(0, 1, n.col, n.row, "edge");
    for (const Step s : in) {
      const Node& from = node_of(nodes, s);
      out += edge(from.col, from.row, n.col, n.row, "edge");
    }
  }
  return out;
}

std::string input_box() {
  return fmt::format(
      "<g class=\"node input\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" "
      "y=\"{}\" class=\"node-name\">X</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">the input</text></g>",
      x(0), y(1), w, h, x(0) + w / 2, y(1) + 19, x(0) + w / 2, y(1) + 35);
}

// The shape of a step as the trace holds it, or why it holds none.
std::string shape_of(const Trace& t, Step s) {
  for (const StepRecord& r : t.steps)
    if (r.step == s) return shape_text(r.value.shape());
  return is_score_step(s) && t.flash ? "flash: in tiles" : "not traced";
}

// One step's box: a link to its section, faded ("absent") when the trace does not hold the step.
std::string step_box(const Trace& t, const Node& node) {
  const std::string_view name = step_info(node.step).name;
  const bool kept =
      std::any_of(t.steps.begin(), t.steps.end(), [&](const StepRecord& r) { return r.step == node.step; });
  const std::string box = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" "
      "class=\"node-name\">{}</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">{}</text>",
      x(node.col), y(node.row), w, h, x(node.col) + w / 2, y(node.row) + 19, name, x(node.col) + w / 2,
      y(node.row) + 35, page_text(shape_of(t, node.step)));
  return fmt::format("<a href=\"#step-{}\" class=\"node{}\"><title>{}: {}</title>{}</a>", name, kept ? "" : " absent",
                     name, page_text(step_formula(node.step, *t.problem)), box);
}

// The flash pass: the same heads in, the same head outputs out, the scores only ever in tiles.
std::string flash_box(const Trace& t, const FlashPlace& f) {
  const double fx = x(f.first_col), fy = y(f.row), fw = x(f.last_col) + w - x(f.first_col);
  // In from below the values (the heads hold Q, K and V, turned with RoPE), out to the bottom of the
  // head outputs. With ALiBi the tiles add the bias of their block to S.
  const double from_x = x(f.from.col) + w / 2, into_x = x(f.into.col) + w / 2;
  std::string out =
      fmt::format("<path class=\"edge flash-edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>",
                  from_x, y(f.from.row) + h, from_x, fy + h / 2, fx - 30, fy + h / 2, fx - 4, fy + h / 2);
  out += fmt::format("<path class=\"edge flash-edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>",
                     fx + fw, fy + h / 2, into_x, fy + h / 2, into_x, fy + h / 2, into_x, y(f.into.row) + h + 4);
  const std::string box = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" class=\"node-name\">flash: "
      "the tile walk</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">S and P one Br × Bc tile at a time; running m, "
      "l, O; one division at the end</text>",
      fx, fy, fw, h, fx + fw / 2, fy + 19, fx + fw / 2, fy + 35);
  out +=
      fmt::format("<a href=\"#flash\" class=\"node flash-node{}\"><title>FlashAttention-2's forward pass</title>{}</a>",
                  t.flash ? "" : " absent", box);
  return out;
}

}  // namespace

std::string pipeline_svg(const Trace& t) {
  const Problem& p = *t.problem;
  // pass 1: where the boxes go, from the step graph
  const std::vector<Node> nodes = nodes_of(p);
  const FlashPlace flash = flash_place(p, nodes);
  // pass 2: the arrows, then the boxes over their ends: the input, the steps, the flash pass
  std::string out = svg_open(nodes, flash) + edges(p, nodes) + input_box();
  for (const Node& node : nodes) out += step_box(t, node);
  out += flash_box(t, flash);
  out += "</svg>";
  return out;
}

}  // namespace attn::report_detail
