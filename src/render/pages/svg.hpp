#pragma once
// `attn-trace plot`: one traced step as a standalone SVG figure for a slide or a paper. Every matrix
// entry is one <rect> that carries its exact value (data-value), so the picture can be checked
// against the trace number by number (beyond PlotOptions::max_cells, one <rect> per pooled block, which
// the figure says); text is <text> in generic fonts, and nothing is fetched.

#include <cstddef>
#include <optional>
#include <string>

#include "observe/steps.hpp"
#include "render/draw/colormap.hpp"
#include "trace/trace.hpp"

namespace attn {

struct PlotOptions {
  Step step = Step::weights;
  // The query head to draw (for k_heads and v_heads: the key/value head it reads). Absent: head 0, or
  // the head that a trace saved with --head holds.
  std::optional<std::size_t> head;
  bool all_heads = false;  // one panel per head in a grid, with one colour bar
  std::size_t batch = 0;
  WeightScale weight_scale = WeightScale::automatic;  // the weights' colours (render/draw/colormap.hpp)
  // A panel with more rows or columns than this is drawn pooled: each drawn cell the mean of a square
  // block of what the mask kept, so that a long input makes a figure of at most max_cells² <rect>s
  // rather than n²; 0 draws every cell.
  std::size_t max_cells = 128;
};

// How many rows and columns of a rows × cols panel one drawn cell pools (1: none).
std::size_t pool_factor(std::size_t rows, std::size_t cols, std::size_t max_cells);

// Whether `step` has a head axis (q_heads … head_outputs); q, k, v, concat and output hold every head
// side by side.
bool has_head_axis(Step step);

// The figure as a complete SVG document. Preconditions (the caller turns them into usage errors):
// the trace holds options.step, options.batch and options.head exist, and neither a head nor
// all_heads is asked of a step without a head axis.
std::string render_svg(const Trace& trace, const PlotOptions& options);

}  // namespace attn
