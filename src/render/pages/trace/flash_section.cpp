// The flash pass in the terminal: every tile, every finished query tile, and how far flash is from naive.

#include "render/pages/trace/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "text/number.hpp"
#include "text/visible.hpp"

namespace attn::render_detail {

void Renderer::flash_section() {
  const FlashRecord& f = *t_.flash;
  line("");
  heading("flash");
  for (const std::string_view formula :
       {"m_new = max(m_prev, rowmax S)   alpha = exp(m_prev − m_new)   P = exp(S − m_new)",
        "l_new = alpha·l_prev + rowsum P   O = alpha·O_prev + P·V   then once: O / l, lse = m + log l"})
    for (const std::string& part : wrap(text(formula), o_.width, "  ")) line("{}", style_.formula(part));
  para(fmt::format(
           "FlashAttention-2's forward pass (arXiv:2307.08691, Algorithm 1): the same attention in tiles of {} query "
           "row{} by {} key{} (the last ones smaller where the lengths do not divide), never holding all n × m scores",
           f.tile_size.Br, f.tile_size.Br == 1 ? "" : "s", f.tile_size.Bc, f.tile_size.Bc == 1 ? "" : "s"),
       "");
  para("On a row's first key tile m_prev is -inf and alpha is 0: there is nothing yet to rescale.", "", /*faint=*/true);
  const bool summary = !o_.all_tiles && f.tiles.size() > summary_past;
  if (summary) flash_walk(f);
  // Every tile in the order of the walk, each query tile's result after its last tile; in a summary, only
  // the first and last few, with one line for those between.
  const auto shown = [&](std::size_t k) { return !summary || k < summary_ends || k + summary_ends >= f.tiles.size(); };
  std::size_t next = 0;
  bool gap = false;
  const auto tile = [&](std::size_t k) {
    if (shown(k)) return flash_tile(f.tiles[k]);
    if (!std::exchange(gap, true)) {
      line("");
      para(style_.faint(fmt::format("── ... {} tiles not shown ...", f.tiles.size() - 2 * summary_ends)), "   ");
    }
  };
  for (const FlashFinal& done : f.finals) {
    for (; next < f.tiles.size(); ++next) {
      const FlashTile& t = f.tiles[next];
      if (t.batch != done.batch || t.head != done.head || t.i != done.i) break;
      tile(next);
    }
    if (next > 0 && shown(next - 1)) flash_final(done);
  }
  for (; next < f.tiles.size(); ++next) tile(next);
  if (summary) {
    line("");
    para(fmt::format("{} of {} tiles shown: --steps tiles shows every one{}; --json OUT keeps them all",
                     2 * summary_ends, f.tiles.size(), p_.h > 1 && !t_.head ? " (with --head H, one head's)" : ""),
         "");
  }
}

// The shape of the walk, for a summary: how many tiles, in how many query tiles by key tiles, over
// which heads and batch items, and how many the mask skipped.
void Renderer::flash_walk(const FlashRecord& f) {
  const std::size_t Tr = (p_.n + f.tile_size.Br - 1) / f.tile_size.Br;
  const std::size_t Tc = (p_.m + f.tile_size.Bc - 1) / f.tile_size.Bc;
  const std::size_t heads = t_.head ? 1 : p_.h;
  const auto skipped = static_cast<std::size_t>(
      std::count_if(f.tiles.begin(), f.tiles.end(), [](const FlashTile& t) { return t.skipped; }));
  std::string over = heads == 1 ? fmt::format("head {}", t_.head.value_or(0)) : fmt::format("each of {} heads", heads);
  if (p_.batched) over += fmt::format(" of each of {} batch items", p_.B);
  line("");
  para(fmt::format("{} tiles, too many to print: {} query tile{} × {} key tile{} for {}, {} of them skipped by the "
                   "mask. The first {} and the last {}, each query tile's result after its last tile:",
                   f.tiles.size(), Tr, Tr == 1 ? "" : "s", Tc, Tc == 1 ? "" : "s", over, skipped, summary_ends,
                   summary_ends),
       "");
}

std::string Renderer::tile_place(std::size_t b, std::size_t head) const {
  std::string place = p_.batched ? fmt::format("batch {}, head {}", b, head) : fmt::format("head {}", head);
  return place;
}

void Renderer::field_table(const Tensor<double>& t, TileAxis rows, TileAxis cols, std::string_view caption,
                           const std::vector<std::string>& queries, const std::vector<std::string>& keys) {
  const std::vector<std::string>& row_labels = rows == TileAxis::keys ? keys : queries;
  const std::size_t r = row_labels.size(), c = t.size() / std::max<std::size_t>(1, r);
  table({t.values(), r, c, row_labels, cols == TileAxis::keys ? keys : numbered(c), std::string(caption)});
}

void Renderer::flash_tile(const FlashTile& tile) {
  const auto rows = token_range(p_.tokens[tile.batch], tile.row_begin, tile.row_end);
  const auto cols = token_range(p_.context_tokens[tile.batch], tile.col_begin, tile.col_end);
  line("");
  para(style_.label(fmt::format("── {} · query tile {} ({}) × key tile {} ({})", tile_place(tile.batch, tile.head),
                                tile.i, fmt::join(rows, ", "), tile.j, fmt::join(cols, ", "))),
       "   ");
  if (tile.skipped) {
    para("  skipped: the mask rules out every query-key pair of this tile", "  ", /*faint=*/true);
    return;
  }
  // the tile's fields in the table's order (trace/trace.hpp), the running state as one table where it starts
  bool state_shown = false;
  for (const TileField<FlashTile>& field : tile_fields()) {
    if (field.dropout_only) continue;  // P_drop: the trace holds it; the walk shows P
    if (field.state) {
      if (std::exchange(state_shown, true)) continue;
      const TileState state = tile_state(tile);
      table({state.values, rows.size(), state.names.size(), rows, state.names, "state"});
      continue;
    }
    field_table(tile.*field.member, field.rows, field.cols, field.caption, rows, cols);
  }
}

void Renderer::flash_final(const FlashFinal& done) {
  const auto rows = token_range(p_.tokens[done.batch], done.row_begin, done.row_end);
  const std::size_t r = rows.size(), d = done.O.dim(1);
  std::vector<double> values;
  for (std::size_t k = 0; k < r; ++k) {
    for (std::size_t c = 0; c < d; ++c) values.push_back(done.O(k, c));
    values.push_back(done.lse(k));
  }
  std::vector<std::string> cols = numbered(d);
  cols.emplace_back("lse");
  line("");
  para(style_.label(fmt::format("── {} · query tile {} ({}) done: O / l, lse = m + log l",
                                tile_place(done.batch, done.head), done.i, fmt::join(rows, ", "))),
       "   ");
  table({values, r, d + 1, rows, cols, "O / l"});
}

// FlashAttention-2's backward: D, then every tile in the order of the walk (key tile by key tile), or
// the first and last few past summary_past.
void Renderer::flash_backward_section() {
  const FlashBackwardRecord& f = *t_.flash_backward;
  line("");
  heading("flash backward");
  for (const std::string_view formula :
       {"D = rowsum(dO ⊙ O)   then per key tile j, per query tile i:   P = exp(S − lse)   dV_j += Pᵀ·dO_i",
        "dP = dO_i·V_jᵀ   dS = P ⊙ (dP − D_i)   dQ_i += scale·dS·K_j   dK_j += scale·dSᵀ·Q_i"})
    for (const std::string& part : wrap(text(formula), o_.width, "  ")) line("{}", style_.formula(part));
  para(fmt::format("FlashAttention-2's backward pass (arXiv:2307.08691, Algorithm 2) in tiles of {} × {}: the "
                   "weights recomputed from the forward's lse, one number per row, instead of an n × m matrix "
                   "kept; D = rowsum(dO ⊙ O) equals rowsum(dA ⊙ A), so the softmax's backward needs no A. The outer "
                   "loop runs over key tiles, so dK_j and dV_j are summed in place and dQ_i across them.",
                   f.tile_size.Br, f.tile_size.Bc),
       "");
  // D of every row, per head
  const Tensor<double> D = with_batch_axis(f.D, 3);  // (B, h, n)
  for (std::size_t b = 0; b < D.dim(0); ++b)
    for (std::size_t hd = 0; hd < D.dim(1); ++hd) {
      const std::size_t head = head_at(t_, false, hd);
      line("");
      para(style_.label(fmt::format("── {} · D = rowsum(dO ⊙ O)", tile_place(b, head))), "   ");
      const std::vector<std::string> rows = token_range(p_.tokens[b], 0, p_.n);
      table({std::span<const double>(&D(b, hd, 0), p_.n), p_.n, 1, rows, {"D"}, ""});
    }
  const bool summary = !o_.all_tiles && f.tiles.size() > summary_past;
  bool gap = false;
  for (std::size_t k = 0; k < f.tiles.size(); ++k) {
    if (!summary || k < summary_ends || k + summary_ends >= f.tiles.size()) {
      flash_backward_tile(f.tiles[k]);
    } else if (!std::exchange(gap, true)) {
      line("");
      para(style_.faint(fmt::format("── ... {} tiles not shown ...", f.tiles.size() - 2 * summary_ends)), "   ");
    }
  }
  if (summary) {
    line("");
    para(fmt::format("{} of {} backward tiles shown: --steps tiles shows every one; --json OUT keeps them all",
                     2 * summary_ends, f.tiles.size()),
         "");
  }
}

void Renderer::flash_backward_tile(const FlashBackwardTile& tile) {
  const auto rows = token_range(p_.tokens[tile.batch], tile.row_begin, tile.row_end);
  const auto cols = token_range(p_.context_tokens[tile.batch], tile.col_begin, tile.col_end);
  line("");
  para(style_.label(fmt::format("── {} · key tile {} ({}) × query tile {} ({})", tile_place(tile.batch, tile.head),
                                tile.j, fmt::join(cols, ", "), tile.i, fmt::join(rows, ", "))),
       "   ");
  if (tile.skipped) {
    para("  skipped: the mask rules out every query-key pair of this tile", "  ", /*faint=*/true);
    return;
  }
  for (const TileField<FlashBackwardTile>& field : backward_tile_fields())
    field_table(tile.*field.member, field.rows, field.cols, field.caption, rows, cols);
}

// When both engines ran: how far the flash output is from the naive one.
void Renderer::comparison() {
  if (!t_.flash || t_.engine != Engine::both) return;
  const StepRecord* naive = nullptr;
  for (const StepRecord& rec : t_.steps)
    if (rec.step == Step::output) naive = &rec;
  if (naive == nullptr || naive->value.shape() != t_.flash->output.shape()) return;
  double worst = 0;
  const auto a = naive->value.values(), b = t_.flash->output.values();
  for (std::size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::fabs(a[k] - b[k]));
  line("");
  heading("naive vs flash");
  para(fmt::format(
           "max |flash output − naive output| = {:.3g} over {} values ({}); attn-trace compare judges both against a "
           "wider reference",
           worst, a.size(), name_of(t_.dtype)),
       "");
}

}  // namespace attn::render_detail
