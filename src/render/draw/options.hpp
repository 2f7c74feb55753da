#pragma once
// How every picture of the terminal is drawn: the options that the pages (render/pages/) share, and the
// commands' requests (request/) fill in.

#include <cstddef>
#include <string>
#include <vector>

#include "render/draw/colormap.hpp"

namespace attn {

// How a matrix is drawn: its numbers, a heatmap of coloured cells (a character ramp without colour),
// or numbers when they fit the width and --max-rows/--max-cols whole, a heatmap when they do not.
enum class View { numbers, heatmap, automatic };

// --format: the steps as a document instead of the terminal's text (render/pages/document.hpp).
enum class DocFormat { markdown, latex, csv };

struct RenderOptions {
  int precision = 4;        // digits after the point
  bool color = false;       // ANSI colours
  bool truecolor = false;   // 24-bit colours for heatmaps (else the 256-colour palette)
  bool unicode = true;      // false: plain ASCII only (a locale that is not UTF-8)
  std::size_t width = 100;  // no line is wider than this many columns
  View view = View::automatic;
  WeightScale weight_scale = WeightScale::automatic;  // --color-scale: how the weights' colours span them
  std::size_t max_rows = 16;                          // longer tables show their first and last rows; 0: all
  std::size_t max_cols = 10;                          // wider tables show their first and last columns; 0: all
  std::string version;                                // for the title line
  bool compare_only = false;                          // `compare`: the header and the comparison, not every step
  bool all_tiles = false;          // --steps tiles: every flash tile, however many (else a summary past 24)
  std::vector<std::string> notes;  // one line each, after the header: what the output leaves out and why
};

}  // namespace attn
