#include "render/pages/report/pipeline_svg.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "observe/steps.hpp"
#include "render/pages/report/html.hpp"
#include "render/pages/report/writer.hpp"

namespace attn::report_detail {

namespace {

// A step's box: its column and row on the grid of the diagram.
struct Node {
  Step step;
  double col, row;
};

// The columns that move: RoPE adds a column after the heads (q_rot, k_rot), ALiBi one after the scale
// (bias); the rest move right.
struct Columns {
  double rot, bias, scores, scaled, masked, weights, heads_out, concat, output;
};

Columns columns_of(const Problem& p) {
  const double rot = p.rope ? 1 : 0, bias = p.alibi ? 1 : 0;
  return {rot, bias, 3 + rot, 4 + rot, 5 + rot + bias, 6 + rot + bias, 7 + rot + bias, 8 + rot + bias, 9 + rot + bias};
}

std::vector<Node> nodes_of(const Problem& p, const Columns& c) {
  std::vector<Node> nodes = {{Step::q, 1, 0},       {Step::k, 1, 1},       {Step::v, 1, 2},
                             {Step::q_heads, 2, 0}, {Step::k_heads, 2, 1}, {Step::v_heads, 2, 2}};
  if (p.rope) nodes.insert(nodes.end(), {{Step::q_rot, 3, 0}, {Step::k_rot, 3, 1}});
  nodes.insert(nodes.end(), {{Step::scores, c.scores, 0.5}, {Step::scaled, c.scaled, 0.5}});
  if (p.alibi) nodes.push_back({Step::bias, c.scaled + 1, 0.5});
  nodes.insert(nodes.end(), {{Step::masked, c.masked, 0.5},
                             {Step::weights, c.weights, 0.5},
                             {Step::head_outputs, c.heads_out, 1.5},
                             {Step::concat, c.concat, 1.5},
                             {Step::output, c.output, 1.5}});
  return nodes;
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

std::string svg_open(const Columns& c) {
  const double width = x(c.output) + w + x0, height = y(3.1) + h + y0;
  return fmt::format(
      "<svg class=\"pipeline\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"the steps of attention, from X to the "
      "output; each box links to its step\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
      "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10 z\" "
      "class=\"arrow-head\"/></marker></defs>",
      width, height);
}

// The arrows between the steps, drawn before the boxes so the boxes cover their ends.
std::string edges(const Problem& p, const Columns& c) {
  std::string out;
  for (const double row : {0.0, 1.0, 2.0}) out += edge(0, 1, 1, row, "edge");
  for (const double row : {0.0, 1.0, 2.0}) out += edge(1, row, 2, row, "edge");
  if (p.rope) out += edge(2, 0, 3, 0, "edge") + edge(2, 1, 3, 1, "edge");
  out += edge(2 + c.rot, 0, c.scores, 0.5, "edge") + edge(2 + c.rot, 1, c.scores, 0.5, "edge");
  out += edge(c.scores, 0.5, c.scaled, 0.5, "edge");
  if (p.alibi) out += edge(c.scaled, 0.5, c.scaled + 1, 0.5, "edge");
  out += edge(c.masked - 1, 0.5, c.masked, 0.5, "edge") + edge(c.masked, 0.5, c.weights, 0.5, "edge");
  out += edge(c.weights, 0.5, c.heads_out, 1.5, "edge") + edge(2, 2, c.heads_out, 1.5, "edge");
  out += edge(c.heads_out, 1.5, c.concat, 1.5, "edge") + edge(c.concat, 1.5, c.output, 1.5, "edge");
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
std::string flash_box(const Trace& t, const Columns& c) {
  const double fx = x(c.scores), fy = y(3.1), fw = x(c.weights) + w - x(c.scores);
  // In from below the heads (they hold Q, K and V per head, turned with RoPE), out to the bottom of
  // head_outputs. With ALiBi the tiles add the bias of their block to S.
  std::string out =
      fmt::format("<path class=\"edge flash-edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>",
                  x(2) + w / 2, y(2) + h, x(2) + w / 2, fy + h / 2, fx - 30, fy + h / 2, fx - 4, fy + h / 2);
  out += fmt::format("<path class=\"edge flash-edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#arrow)\"/>",
                     fx + fw, fy + h / 2, x(c.heads_out) + w / 2, fy + h / 2, x(c.heads_out) + w / 2, fy + h / 2,
                     x(c.heads_out) + w / 2, y(1.5) + h + 4);
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
  // pass 1: where the boxes go
  const Columns c = columns_of(p);
  const std::vector<Node> nodes = nodes_of(p, c);
  // pass 2: the arrows, then the boxes over their ends: the input, the steps, the flash pass
  std::string out = svg_open(c) + edges(p, c) + input_box();
  for (const Node& node : nodes) out += step_box(t, node);
  out += flash_box(t, c);
  out += "</svg>";
  return out;
}

}  // namespace attn::report_detail
