#pragma once
// `attn-trace plot`: one traced step as a standalone SVG figure for a slide or a paper. Every matrix
// entry is one <rect> that carries its exact value (data-value), so the picture can be checked
// against the trace number by number; text is <text> in generic fonts, and nothing is fetched.

#include <cstddef>
#include <optional>
#include <string>

#include "observe/steps.hpp"
#include "trace/trace.hpp"

namespace attn {

struct PlotOptions {
  Step step = Step::weights;
  // The query head to draw (for k_heads and v_heads: the key/value head it reads). Absent: head 0, or
  // the head that a trace saved with --head holds.
  std::optional<std::size_t> head;
  bool all_heads = false;  // one panel per head in a grid, with one colour bar
  std::size_t batch = 0;
};

// Whether `step` has a head axis (q_heads … head_outputs); q, k, v, concat and output hold every head
// side by side.
bool has_head_axis(Step step);

// The figure as a complete SVG document. Preconditions (the caller turns them into usage errors):
// the trace holds options.step, options.batch and options.head exist, and neither a head nor
// all_heads is asked of a step without a head axis.
std::string render_svg(const Trace& trace, const PlotOptions& options);

}  // namespace attn
