#pragma once
// The report's budget of numbers (ReportOptions): which heatmaps of the steps the page holds, and the
// query tiles of the flash pass that the tile walk can hold. Only pages/report/ includes this.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "render/draw/colormap.hpp"
#include "trace/trace.hpp"

namespace attn::report_detail {

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
void plan_heatmaps(std::vector<StepView>& views, std::size_t budget);

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

std::vector<QueryTile> query_tiles(const FlashRecord& f);

// The key tiles of the flash backward pass (its outer loop), each with its query tiles (the inner loop),
// in the order the engine ran them.
struct KeyTile {
  std::size_t batch = 0, head = 0, j = 0, col_begin = 0, col_end = 0;
  std::vector<const FlashBackwardTile*> tiles;
  std::size_t numbers() const {
    std::size_t count = 0;
    for (const FlashBackwardTile* t : tiles)
      if (!t->skipped)
        count += t->P.size() + t->dP.size() + t->dS.size() + t->dQ_add.size() + t->dK_j.size() + t->dV_j.size();
    return count;
  }
};

std::vector<KeyTile> key_tiles(const FlashBackwardRecord& f);

}  // namespace attn::report_detail
