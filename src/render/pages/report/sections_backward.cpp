// The report's backward part (report --backward): the backward pass's diagram, the gradients' sections
// and the flash backward's tile walk, as sections.cpp writes the forward's: readable without scripts.

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "render/pages/report/html.hpp"
#include "render/pages/report/pipeline_svg.hpp"
#include "render/pages/report/sections.hpp"
#include "render/pages/report/writer.hpp"

namespace attn::report_detail {

std::string ReportSections::backward_section() const {
  const std::string intro = fmt::format(
      "<section id=\"backward\" class=\"pipeline-section backward-intro\"><h2><a class=\"anchor\" "
      "href=\"#backward\">the backward pass</a></h2><p class=\"formula\">L = Σ Y ⊙ dY</p><p class=\"meaning\">{}. "
      "The gradients run from the loss back to the input and the weights: each box is ∂L/∂ of the step it is named "
      "after (d_weights = ∂L/∂A), with that step's shape, and the small links over a box are the forward steps it "
      "reads; choose one to go to it.</p>{}</section>\n",
      page_text(step_description(Step::d_output, p_)), backward_pipeline_svg(t_));
  return intro + sections_of(gradient_steps_of(p_)) + flash_backward_section();
}

// The backward walk's controls, and its first tile as tables for readers without scripts.
std::string ReportSections::flash_backward_section() const {
  std::string out =
      "<section id=\"flash-backward\" class=\"flash flash-backward\"><h2><a class=\"anchor\" "
      "href=\"#flash-backward\">flash backward: the tile walk</a></h2><p class=\"formula\">D = rowsum(dO ⊙ O), then "
      "per key tile j, per query tile i: &nbsp; P = exp(S − lse) &nbsp; dV_j += Pᵀ·dO_i</p><p class=\"formula\">dP = "
      "dO_i·V_jᵀ &nbsp; dS = P ⊙ (dP − D_i) &nbsp; dQ_i += scale·dS·K_j &nbsp; dK_j += scale·dSᵀ·Q_i</p>";
  if (!t_.flash_backward)
    return out +
           note(
               "This trace has no flash backward pass. <code>attn-trace report FILE --backward</code> runs both "
               "engines by default; a saved trace needs <code>run --backward --engine both --json</code> (or "
               "<code>flash</code>).") +
           "</section>\n";
  const FlashBackwardRecord& f = *t_.flash_backward;
  out += fmt::format(
      "<p class=\"meaning\">FlashAttention-2's backward pass (arXiv:2307.08691, Algorithm 2) in tiles of {} query "
      "row{} by {} key{}. It keeps no n × m matrix: each tile's weights P are made again from the forward's lse, one "
      "number per row, and D = rowsum(dO ⊙ O) equals rowsum(dA ⊙ A), so the softmax's backward needs no A. The "
      "outer loop runs over key tiles, so each key tile's dK_j and dV_j are summed in place while the query tiles "
      "pass by, and each dQ_i gathers one contribution per key tile. The rectangle on the matrix of dS is the "
      "current tile.</p>",
      f.tile_size.Br, f.tile_size.Br == 1 ? "" : "s", f.tile_size.Bc, f.tile_size.Bc == 1 ? "" : "s");
  std::string state = "The trace holds no backward tile that fits this page.";
  std::string tables;
  if (!plan_.backward_walk.empty() && !plan_.backward_walk.front().tiles.empty()) {
    const FlashBackwardTile& tile = *plan_.backward_walk.front().tiles.front();
    state = fmt::format("{}head {} · key tile {} (keys {}–{}) × query tile {} (rows {}–{}){}",
                        p_.batched ? fmt::format("batch {} · ", tile.batch) : "", tile.head, tile.j, tile.col_begin,
                        tile.col_end - 1, tile.i, tile.row_begin, tile.row_end - 1,
                        tile.skipped ? ": skipped, the mask rules out every pair" : "");
    if (!tile.skipped) tables = backward_tile_tables(tile);
  }
  return out + walk_end("backward-", "key tile", "tile-state", state, tables);
}

// P, dP, dS, the dQ_i contribution and the running dK_j, dV_j of one backward tile, as tables: its fields
// in the order of the trace's table (trace/trace.hpp).
std::string ReportSections::backward_tile_tables(const FlashBackwardTile& tile) const {
  const std::vector<std::string> rows = tile_labels(p_.tokens[tile.batch], tile.row_begin, tile.row_end);
  const std::vector<std::string> cols = tile_labels(p_.context_tokens[tile.batch], tile.col_begin, tile.col_end);
  std::string out;
  for (const TileField<FlashBackwardTile>& field : backward_tile_fields())
    out += field_matrix(tile.*field.member, field.rows, field.cols, field.caption, rows, cols);
  return out;
}

}  // namespace attn::report_detail
