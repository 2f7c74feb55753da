#pragma once
// One picture's worth of a step: the 2-D matrix of one batch item and one head, with its axis labels,
// which cells the mask removed and, for the weights, each row's sum. Every picture (terminal tables and
// heatmaps, SVG, the HTML report) draws panels, so they all label and mark cells the same way.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "render/draw/colormap.hpp"
#include "trace/trace.hpp"

namespace attn {

struct Panel {
  Step step;
  std::size_t batch = 0;                            // 0 for an unbatched input
  std::optional<std::size_t> head;                  // the head it shows (a query head, or a key/value head when kv)
  bool kv = false;                                  // the head axis is k/v heads
  std::string caption;                              // "head 1", "batch 0, kv head 1 (read by query heads 2–3)", or ""
  std::size_t rows = 0, cols = 0;                   // a rank-1 value is one row
  std::vector<double> values;                       // (rows, cols), row-major
  std::vector<std::string> row_labels, col_labels;  // raw tokens or feature names, not yet made visible
  // (rows, cols): 1 where the mask removed the query-key pair; empty for steps before the mask (and
  // for every step without an n × m matrix).
  std::vector<unsigned char> removed;
  // The weights only: which rows the mask emptied (they sum to 0, not 1).
  std::vector<bool> empty_row;

  bool is_removed(std::size_t r, std::size_t c) const { return !removed.empty() && removed[r * cols + c] != 0; }
  bool is_empty_row(std::size_t r) const { return !empty_row.empty() && empty_row[r]; }
  // The sum of row r: 1 up to rounding for a row of weights, 0 for one the mask emptied.
  double row_sum(std::size_t r) const;
};

// The panels of `rec`, one per batch item and head, in the order of its values.
std::vector<Panel> panels(const Trace& trace, const StepRecord& rec);

// RoPE's angle table under q_rot (the queries' positions) or k_rot (the keys'): two panels, cos and
// sin of pos·θ_i, one row per token (of batch item 0: a batch shares the positions) and one column per
// pair i. Empty for any other step or an input without rope.
std::vector<Panel> rotation_panels(const Problem& p, Step step);

// The caption of key/value head `kv` for a problem with grouped heads: "kv head 1 (read by query heads 2–3)".
std::string kv_head_caption(const Problem& p, std::size_t kv);

// The colour range of a panel (or of several drawn with one legend): the cells the mask kept. `weights`
// applies to probability steps only (colormap.hpp's WeightScale); automatic is resolved here, from the
// rows' largest kept weights.
ColorRange panel_range(const std::vector<const Panel*>& panels, WeightScale weights = WeightScale::absolute);

// Where each cell of a panel falls on its colour map, in [0, 1]: ColorRange::position of its value,
// under the row scale of its value over the largest value its row kept.
class Shading {
 public:
  Shading(const Panel& panel, const ColorRange& range);
  double at(std::size_t r, std::size_t c) const { return of(panel_.values[r * panel_.cols + c], r); }
  double of(double x, std::size_t r) const;
  // The mean shade of the cells the mask kept in rows [r0, r1) and columns [c0, c1), and the mean of their
  // values; `removed` when the mask removed every one.
  struct Block {
    double shade = 0, value = 0;
    bool removed = false;
  };
  Block block(std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) const;

 private:
  const Panel& panel_;
  const ColorRange& range_;
  std::vector<double> row_max_;  // (rows) under the row scale: the largest kept value of each row
};

}  // namespace attn
