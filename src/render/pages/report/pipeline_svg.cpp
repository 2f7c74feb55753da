#include "render/pages/report/pipeline_svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "observe/steps.hpp"
#include "trace/decode.hpp"
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

// One step's box: a link to its section, faded ("absent") when the trace does not hold the step. A decode's
// steps (but its whole output) are in each decode step's section: the box links to the first.
std::string step_box(const Trace& t, const Node& node) {
  const std::string_view name = step_info(node.step).name;
  const bool in_decode = t.decode && !t.decode->steps.empty() && node.step != Step::output;
  const bool kept = in_decode || std::any_of(t.steps.begin(), t.steps.end(),
                                             [&](const StepRecord& r) { return r.step == node.step; });
  const std::string box = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" "
      "class=\"node-name\">{}</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">{}</text>",
      x(node.col), y(node.row), w, h, x(node.col) + w / 2, y(node.row) + 19, name, x(node.col) + w / 2,
      y(node.row) + 35, in_decode ? std::string("per decode step") : page_text(shape_of(t, node.step)));
  const std::string target =
      in_decode ? fmt::format("decode-{}", t.decode->steps.front().position) : fmt::format("step-{}", name);
  return fmt::format("<a href=\"#{}\" class=\"node{}\"><title>{}: {}</title>{}</a>", target, kept ? "" : " absent",
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

// ------------------------------------------------------------------------------ the backward pass

// The backward diagram's grid: taller rows than the forward's, so that over each box there is room for
// the forward steps it reads.
constexpr double by0 = 34, bdy = 84;
double by(double row) { return by0 + row * bdy; }

// The gradient steps a gradient step of `p` is computed from, and the forward steps it reads.
std::vector<Step> gradient_inputs(Step s, const Problem& p) {
  std::vector<Step> out;
  for (const Step i : inputs_of(s, p))
    if (is_gradient_step(i)) out.push_back(i);
  return out;
}
std::vector<Step> forward_inputs(Step s, const Problem& p) {
  std::vector<Step> out;
  for (const Step i : inputs_of(s, p))
    if (!is_gradient_step(i)) out.push_back(i);
  return out;
}

// The gradient boxes laid out from the step graph (observe/steps.hpp), in the order of the backward
// pass: a step goes one column past the furthest of the gradients it reads and on the mean of their
// rows, and under the box that already holds that place; a step that reads no gradient (dY itself) goes
// in column 1, next to the loss.
std::vector<Node> gradient_nodes(const Problem& p) {
  std::vector<Node> nodes;
  for (const Step s : gradient_steps_of(p)) {
    Node node{s, 1, 0};
    if (const std::vector<Step> in = gradient_inputs(s, p); !in.empty()) {
      double col = 0, rows = 0;
      for (const Step i : in) {
        col = std::max(col, node_of(nodes, i).col);
        rows += node_of(nodes, i).row;
      }
      node = {s, col + 1, rows / static_cast<double>(in.size())};
    }
    for (bool moved = true; moved;) {
      moved = false;
      for (const Node& other : nodes)
        if (other.col == node.col && std::fabs(other.row - node.row) < 1 - 1e-9) {  // two boxes would overlap
          node.row = other.row + 1;
          moved = true;
        }
    }
    nodes.push_back(node);
  }
  return nodes;
}

// An arrow of the backward grid, from the right side of one box to the left side of another. One that
// skips columns runs in the lane under the boxes of its first row, so that it passes under the boxes
// between, never through them.
std::string backward_edge(const Node& from, const Node& to) {
  const double x1 = x(from.col) + w, y1 = by(from.row) + h / 2, x2 = x(to.col) - 4, y2 = by(to.row) + h / 2;
  if (to.col - from.col <= 1) {
    const double xm = (x1 + x2) / 2;
    return fmt::format("<path class=\"edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#backward-arrow)\"/>", x1,
                       y1, xm, y1, xm, y2, x2, y2);
  }
  const double lane = by(from.row) + h + 7, turn = (dx - w) / 2;
  return fmt::format(
      "<path class=\"edge\" d=\"M{} {} C{} {} {} {} {} {} L{} {} C{} {} {} {} {} {}\" "
      "marker-end=\"url(#backward-arrow)\"/>",
      x1, y1, x1 + turn, y1, x1 + turn, lane, x1 + 2 * turn, lane, x2 - 2 * turn, lane, x2 - turn, lane, x2 - turn, y2,
      x2, y2);
}

// The forward steps a gradient reads, as small links over its box, each with an arrow down into it.
std::string forward_tags(const Trace& t, const Node& node) {
  const std::vector<Step> in = forward_inputs(node.step, *t.problem);
  std::string out;
  const double gap = 4, tw = (w - gap * static_cast<double>(in.size() - 1)) / static_cast<double>(in.size());
  for (std::size_t k = 0; k < in.size(); ++k) {
    const std::string_view name = step_info(in[k]).name;
    const double tx = x(node.col) + static_cast<double>(k) * (tw + gap), ty = by(node.row) - 30;
    out += fmt::format(
        "<a href=\"#step-{}\" class=\"node forward-input\"><title>{} (forward), which {} reads</title><rect x=\"{}\" "
        "y=\"{}\" width=\"{}\" height=\"17\" rx=\"8\"/><text x=\"{}\" y=\"{}\" class=\"node-shape\">{}</text></a>"
        "<path class=\"edge forward-edge\" d=\"M{} {} L{} {}\" marker-end=\"url(#backward-arrow)\"/>",
        name, name, step_info(node.step).name, tx, ty, tw, tx + tw / 2, ty + 12.5, name, tx + tw / 2, ty + 17,
        tx + tw / 2, by(node.row) - 3);
  }
  return out;
}

// One gradient's box, as the forward's step_box draws it, on the backward grid; a parameter's gradient
// has a class of its own.
std::string gradient_box(const Trace& t, const Node& node) {
  const std::string_view name = step_info(node.step).name;
  const bool kept =
      std::any_of(t.steps.begin(), t.steps.end(), [&](const StepRecord& r) { return r.step == node.step; });
  const std::string shape =
      kept || !is_score_step(node.step) || !t.flash_backward ? shape_of(t, node.step) : std::string("flash: in tiles");
  const std::string box = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" "
      "class=\"node-name\">{}</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">{}</text>",
      x(node.col), by(node.row), w, h, x(node.col) + w / 2, by(node.row) + 19, name, x(node.col) + w / 2,
      by(node.row) + 35, page_text(shape));
  return fmt::format("<a href=\"#step-{}\" class=\"node{}{}\"><title>{}: {}</title>{}</a>", name,
                     step_info(node.step).parameter ? " parameter" : "", kept ? "" : " absent", name,
                     page_text(step_formula(node.step, *t.problem)), box);
}

// Where the flash backward pass goes: the columns of the gradients it holds only in tiles, and the row
// under every box from the column before them to the last column that reads them. Empty without tiles.
struct BackwardFlashPlace {
  double first = 1e9, last = 0, row = 0;
};

std::optional<BackwardFlashPlace> backward_flash_place(const Problem& p, const std::vector<Node>& nodes) {
  BackwardFlashPlace f;
  double reach = 0;
  for (const Node& n : nodes) {
    const std::vector<Step> in = gradient_inputs(n.step, p);
    if (std::any_of(in.begin(), in.end(), is_score_step)) reach = std::max(reach, n.col);
    if (!is_score_step(n.step)) continue;
    f.first = std::min(f.first, n.col);
    f.last = std::max(f.last, n.col);
  }
  if (f.last < f.first) return std::nullopt;
  for (const Node& n : nodes)
    if (n.col >= f.first - 1 && n.col <= reach) f.row = std::max(f.row, n.row + 1);
  return f;
}

// The flash backward pass: under the gradients it holds only in tiles, fed by the gradients those read
// whole, and out into the gradients that read them.
std::string backward_flash_box(const Trace& t, const std::vector<Node>& nodes, const BackwardFlashPlace& f) {
  const Problem& p = *t.problem;
  const double fx = x(f.first), fy = by(f.row), fw = x(f.last) + w - x(f.first);
  const auto arrow = [](double x1, double y1, double cx1, double cy1, double cx2, double cy2, double x2, double y2) {
    return fmt::format(
        "<path class=\"edge flash-edge\" d=\"M{} {} C{} {} {} {} {} {}\" marker-end=\"url(#backward-arrow)\"/>", x1, y1,
        cx1, cy1, cx2, cy2, x2, y2);
  };
  std::string out;
  // in: from under each whole gradient the tiles read, to the box's left
  std::map<double, double> lowest;  // out: the lowest box of each column that reads a tiled gradient
  for (const Node& n : nodes) {
    const std::vector<Step> in = gradient_inputs(n.step, p);
    if (is_score_step(n.step)) {
      for (const Step s : in) {
        if (is_score_step(s)) continue;
        const Node& from = node_of(nodes, s);
        const double from_x = x(from.col) + w / 2;
        out += arrow(from_x, by(from.row) + h, from_x, fy + h / 2, fx - 30, fy + h / 2, fx - 4, fy + h / 2);
      }
    } else if (std::any_of(in.begin(), in.end(), is_score_step)) {
      lowest[n.col] = std::max(lowest.contains(n.col) ? lowest[n.col] : n.row, n.row);
    }
  }
  for (const auto& [col, row] : lowest) {
    const double into_x = x(col) + w / 2;
    out += arrow(fx + fw, fy + h / 2, into_x, fy + h / 2, into_x, fy + h / 2, into_x, by(row) + h + 4);
  }
  const std::string box = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" class=\"node-name\">flash "
      "backward: the tile walk</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">P again from lse; dP, dS one tile at "
      "a "
      "time; dK_j, dV_j per key tile</text>",
      fx, fy, fw, h, fx + fw / 2, fy + 19, fx + fw / 2, fy + 35);
  out += fmt::format(
      "<a href=\"#flash-backward\" class=\"node flash-node{}\"><title>FlashAttention-2's backward pass</title>{}</a>",
      t.flash_backward ? "" : " absent", box);
  return out;
}

}  // namespace

std::string backward_pipeline_svg(const Trace& t) {
  const Problem& p = *t.problem;
  // pass 1: where the boxes go, from the step graph
  const std::vector<Node> nodes = gradient_nodes(p);
  const std::optional<BackwardFlashPlace> flash = backward_flash_place(p, nodes);
  double last_col = 0, bottom = flash ? flash->row : 0;
  for (const Node& n : nodes) {
    last_col = std::max(last_col, n.col);
    bottom = std::max(bottom, n.row);
  }
  const double width = x(last_col) + w + x0, height = by(bottom) + h + y0;
  std::string out = fmt::format(
      "<svg class=\"pipeline backward-pipeline\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"the gradients of the "
      "backward pass, from dY to X and the weights; each box links to its step\"><defs><marker id=\"backward-arrow\" "
      "viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
      "orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10 z\" class=\"arrow-head\"/></marker></defs>",
      width, height);
  // pass 2: the arrows between gradients (from the loss into dY), then the boxes over their ends, the
  // forward steps each reads, and the flash pass
  const Node loss{Step::d_output, 0, 0};
  for (const Node& n : nodes) {
    const std::vector<Step> in = gradient_inputs(n.step, p);
    if (in.empty()) out += backward_edge(loss, n);
    for (const Step s : in) out += backward_edge(node_of(nodes, s), n);
  }
  out += fmt::format(
      "<g class=\"node input\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" "
      "class=\"node-name\">L</text><text x=\"{}\" y=\"{}\" class=\"node-shape\">L = Σ Y ⊙ dY</text></g>",
      x(0), by(0), w, h, x(0) + w / 2, by(0) + 19, x(0) + w / 2, by(0) + 35);
  for (const Node& n : nodes) out += gradient_box(t, n) + forward_tags(t, n);
  if (flash) out += backward_flash_box(t, nodes, *flash);
  return out + "</svg>";
}

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
