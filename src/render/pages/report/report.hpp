#pragma once
// The HTML report: one self-contained page (docs/report.md) with every step of a trace, its formula,
// meaning, shape and a heatmap per head, the pipeline as a diagram, the flash pass's tile walk, and
// naive vs flash. The numbers are in the page once, as JSON, and report.js draws them; with scripts
// off the page still shows every formula and a small table of each step's numbers.

#include <cstddef>
#include <string>

#include "lessons/mistakes.hpp"
#include "render/draw/colormap.hpp"
#include "trace/trace.hpp"

namespace attn {

struct ReportOptions {
  std::string version;  // the program's, for the page's generator line
  // The page's budget of numbers, so that a large trace still makes a page of a few MB that opens in a
  // second or two: the steps' heatmaps share `max_step_numbers` (the first head's weights go first,
  // then the first head of every step, then the weights of the other heads, then the rest); the tile
  // walk keeps whole query tiles, in the order the engine ran them, up to `max_tile_numbers` and
  // `max_tiles`. What is left out is said on the page.
  std::size_t max_step_numbers = 1'000'000;
  std::size_t max_tile_numbers = 250'000;
  std::size_t max_tiles = 1024;
  WeightScale weight_scale = WeightScale::automatic;  // the weights' colours (render/draw/colormap.hpp)
  std::size_t table_size = 6;  // the tables for readers without scripts: at most this many rows and columns
  // report --mistake: the page opens with the mistake beside the intended computation (section #mistake).
  const MistakeResult* mistake = nullptr;
};

// The whole page.
std::string report_html(const Trace& trace, const ReportOptions& options);

}  // namespace attn
