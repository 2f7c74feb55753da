#pragma once
// A recorded run: the problem it ran on and every step that was asked for, in double
// (exact for float32 values too) with the dtype they were computed in.

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/records.hpp"
#include "observe/steps.hpp"
#include "tensor/tensor.hpp"

namespace attn {

struct StepRecord {
  Step step;
  std::string formula;      // with this problem's details: "Q = X·W_q + b_q"
  std::string description;  // one sentence: what it means
  Tensor<double> value;     // the step's shape; a leading batch axis only for a batched input
};

// One tile of the flash pass, as docs/trace-format.md's `flash.tiles` lists it (no matrices when skipped).
struct FlashTile {
  std::size_t batch, head, i, j;
  std::size_t row_begin, row_end, col_begin, col_end;
  bool skipped = false;
  Tensor<double> S, m_prev, m_new, alpha, P, l_prev, l_new, O;
  Tensor<double> P_drop;  // P after dropout, what P·V read: empty without dropout
};

// The end of a query tile: O / l and lse for its rows.
struct FlashFinal {
  std::size_t batch, head, i;
  std::size_t row_begin, row_end;
  Tensor<double> O;    // (rows, d_v)
  Tensor<double> lse;  // (rows)
};

struct FlashRecord {
  TileSize tile_size;
  std::vector<FlashTile> tiles;    // in the order the engine ran them
  std::vector<FlashFinal> finals;  // one per query tile, after its last key tile
  Tensor<double> lse;              // (h, n), with a leading batch axis for a batched input
  Tensor<double> output;           // the shape of the output step
};

// One tile of the flash backward pass, as docs/trace-format.md's `flash_backward.tiles` lists it.
struct FlashBackwardTile {
  std::size_t batch, head, i, j;
  std::size_t row_begin, row_end, col_begin, col_end;
  bool skipped = false;
  Tensor<double> P, dP, dS, dQ_add, dK_j, dV_j;
};

// The fields of a flash tile, one row each, in the order the trace writes them (docs/trace-format.md):
// the trace's writer and reader, the terminal's tile walk and the report's page data read this table,
// and none lists the fields again. A field's rows are the tile's queries (or its keys), its columns the
// tile's keys, d_k or d_v, or none: one number per row.
enum class TileAxis { queries, keys, d_k, d_v, none };

template <class Tile>
struct TileField {
  std::string_view name;     // as the trace, the terminal and the report name it
  std::string_view caption;  // what its table is captioned with: its formula where that says more
  Tensor<double> Tile::*member;
  TileAxis rows, cols;
  bool dropout_only = false;  // only a tile of an input with dropout has it
  bool state = false;         // one number per query row of the running state (m, l, alpha)
};

// The forward tile's: S, the running state (m_prev, m_new, alpha, l_prev, l_new), P, O and P_drop.
const std::array<TileField<FlashTile>, 9>& tile_fields();
// The backward tile's: P, dP, dS and the parts of dQ, dK and dV.
const std::array<TileField<FlashBackwardTile>, 6>& backward_tile_fields();
// The shape of a field of a tile of `r` queries and `c` keys of `p`.
Shape tile_field_shape(TileAxis rows, TileAxis cols, std::size_t r, std::size_t c, const Problem& p);
// The running state of a tile's rows: its state fields side by side, row by row (rows × names), and their
// names in the table's order, as the terminal and the report show it.
struct TileState {
  std::vector<double> values;
  std::vector<std::string> names;
};
TileState tile_state(const FlashTile& tile);
// Whether the tiles of `p` have the field.
template <class Tile>
bool has_field(const TileField<Tile>& f, const Problem& p) {
  return !f.dropout_only || p.dropout.has_value();
}

// FlashAttention-2's backward pass: D = rowsum(dO ⊙ O) of every row, then the tiles, key tile by key tile.
struct FlashBackwardRecord {
  TileSize tile_size;
  Tensor<double> D;                      // (h, n), with a leading batch axis for a batched input
  std::vector<FlashBackwardTile> tiles;  // in the order the engine ran them
};

struct DecodeRecord;  // trace/decode.hpp

struct Trace {
  std::shared_ptr<const Problem> problem;
  DType dtype = DType::float32;
  std::vector<StepRecord> steps;  // in the order the engine ran them
  std::vector<EmptyRow> empty_rows;
  std::vector<std::string> warnings;  // for people: one sentence each
  Engine engine = Engine::naive;      // which computation made the steps
  // Set when only one query head was kept: every head axis then has extent 1 and holds this head
  // (a key/value head axis holds the head it reads).
  std::optional<std::size_t> head;
  std::optional<FlashRecord> flash;                   // when the flash pass ran
  bool backward = false;                              // the backward pass ran after the forward (run --backward)
  std::optional<FlashBackwardRecord> flash_backward;  // when the flash backward pass ran
  std::optional<CompareRecord> compare;               // when `compare` judged naive vs flash vs a reference
  std::shared_ptr<const DecodeRecord> decode;         // `decode`: the prefill and every decode step
};

// Which steps, and which head of them, to keep.
struct StepFilter {
  std::vector<Step> only;           // empty: every step, unless `none`
  bool none = false;                // keep no step at all (only tiles, say)
  std::optional<std::size_t> head;  // only this query head (and the key/value head it reads)
  bool tiles = true;                // keep the flash pass's tiles
  bool keeps(Step step) const;
};

// The shape `step` has in a trace of `p` (docs/trace-format.md): a leading batch axis only for a batched
// input, and head axes of extent 1 when only one head was kept (`one_head`).
Shape traced_shape(Step step, const Problem& p, bool one_head);

// `value` with only position `keep` left of its head axis `axis` (which keeps extent 1).
Tensor<double> select_head(const Tensor<double>& value, std::size_t axis, std::size_t keep);

// `trace` cut down to what `filter` keeps: its steps, one head on every head axis (when the trace
// still holds them all) and the tiles of that head, or no tiles. `attn-trace show --steps --head`.
Trace keep_only(Trace trace, const StepFilter& filter);

// The recorded value of `step`, or nullptr when the trace does not hold it.
const StepRecord* find_step(const Trace& trace, Step step);

// `value` with a batch axis of extent 1 in front when the trace dropped it (an input that is not
// batched), so that it has `rank` axes.
Tensor<double> with_batch_axis(const Tensor<double>& value, std::size_t rank);

// The head that position `index` of a head axis of `trace` stands for.
std::size_t head_at(const Trace& trace, bool kv_axis, std::size_t index);

}  // namespace attn
