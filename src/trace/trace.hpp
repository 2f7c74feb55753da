#pragma once
// A recorded run: the problem it ran on and every step that was asked for, in double
// (exact for float32 values too) with the dtype they were computed in.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/compare.hpp"
#include "engine/naive.hpp"
#include "model/problem.hpp"
#include "tensor/tensor.hpp"
#include "trace/observer.hpp"
#include "trace/steps.hpp"

namespace attn {

struct StepRecord {
  Step step;
  std::string formula;      // with this problem's details: "Q = X·W_q + b_q"
  std::string description;  // one sentence: what it means
  Tensor<double> value;   // the step's shape; a leading batch axis only for a batched input
};

// One tile of the flash pass, as trace-format.md's `flash.tiles` lists it (no matrices when skipped).
struct FlashTile {
  std::size_t batch, head, i, j;
  std::size_t row_begin, row_end, col_begin, col_end;
  bool skipped = false;
  Tensor<double> S, m_prev, m_new, alpha, P, l_prev, l_new, O;
};

// The end of a query tile: O / l and lse for its rows.
struct FlashFinal {
  std::size_t batch, head, i;
  std::size_t row_begin, row_end;
  Tensor<double> O;    // (rows, d_v)
  Tensor<double> lse;  // (rows)
};

struct FlashRecord {
  std::size_t block_q = 0, block_k = 0;
  std::vector<FlashTile> tiles;     // in the order the engine ran them
  std::vector<FlashFinal> finals;   // one per query tile, after its last key tile
  Tensor<double> lse;               // (h, n), with a leading batch axis for a batched input
  Tensor<double> output;            // the shape of the output step
};

struct Trace {
  std::shared_ptr<const Problem> problem;
  std::string dtype;                  // "float32" or "float64"
  std::vector<StepRecord> steps;      // in the order the engine ran them
  std::vector<EmptyRow> empty_rows;
  std::vector<std::string> warnings;  // for people: one sentence each
  std::string engine = "naive";       // which computation made the steps
  // Set when only one query head was kept: every head axis then has extent 1 and holds this head
  // (a key/value head axis holds the head it reads).
  std::optional<std::size_t> head;
  std::optional<FlashRecord> flash;   // when the flash pass ran
  std::optional<CompareRecord> compare;  // when `compare` judged naive vs flash vs a reference
};

// The formula of `step` as it applies to `p` (bias terms only when present, and so on).
std::string step_formula(Step step, const Problem& p);
// Its one-sentence meaning for `p`.
std::string step_description(Step step, const Problem& p);

// Which steps, and which head of them, to keep.
struct StepFilter {
  std::vector<Step> only;            // empty: every step, unless `none`
  bool none = false;                 // keep no step at all (only tiles, say)
  std::optional<std::size_t> head;   // only this query head (and the key/value head it reads)
  bool tiles = true;                 // keep the flash pass's tiles
  bool keeps(Step step) const;
};

// The shape `step` has in a trace of `p` (trace-format.md): a leading batch axis only for a batched
// input, and head axes of extent 1 when only one head was kept (`one_head`).
Shape traced_shape(Step step, const Problem& p, bool one_head);

// The head that position `index` of a head axis of `trace` stands for.
std::size_t head_at(const Trace& trace, bool kv_axis, std::size_t index);

// Keeps a copy of every step the filter lets through, and with `flash` set, every tile of the flash
// pass (of the filter's head) and its result.
struct FlashBlocks {
  std::size_t block_q, block_k;
};

class TraceCollector final : public Observer {
 public:
  TraceCollector(std::shared_ptr<const Problem> problem, std::string dtype, StepFilter filter = {},
                 std::optional<FlashBlocks> flash = std::nullopt);

  bool wants(Step step) const override { return filter_.keeps(step) || (trace_.flash && step == Step::output); }
  void on(Step step, const Tensor<float>& value) override { keep(step, cast<double>(value)); }
  void on(Step step, const Tensor<double>& value) override { keep(step, value); }

  bool wants_tiles() const override { return trace_.flash.has_value() && filter_.tiles; }
  void on_tile(const TileEvent<float>& e) override { keep_tile(e); }
  void on_tile(const TileEvent<double>& e) override { keep_tile(e); }
  void on_query_tile_done(const QueryTileDone<float>& e) override { keep_final(e); }
  void on_query_tile_done(const QueryTileDone<double>& e) override { keep_final(e); }
  void on_lse(const Tensor<float>& lse) override { keep_lse(cast<double>(lse)); }
  void on_lse(const Tensor<double>& lse) override { keep_lse(lse); }

  // The finished trace, with a warning per row that had nothing to attend.
  Trace finish(std::vector<EmptyRow> empty_rows) &&;

 private:
  void keep(Step step, Tensor<double> value);
  template <class T>
  void keep_tile(const TileEvent<T>& e);
  template <class T>
  void keep_final(const QueryTileDone<T>& e);
  void keep_lse(Tensor<double> lse);
  // `value` with only the filter's head kept on a head axis at `axis`, and without the batch axis
  // for a 2-D input.
  Tensor<double> as_traced(Tensor<double> value, bool has_head_axis, bool kv_axis) const;
  void warn_non_finite();

  Trace trace_;
  StepFilter filter_;
};

template <class T>
void TraceCollector::keep_tile(const TileEvent<T>& e) {
  if (trace_.head && e.head != *trace_.head) return;
  const auto copy = [](const Tensor<T>* t) { return t ? cast<double>(*t) : Tensor<double>(); };
  trace_.flash->tiles.push_back({e.batch, e.head, e.i, e.j, e.row_begin, e.row_end, e.col_begin, e.col_end, e.skipped,
                                 copy(e.S), copy(e.m_prev), copy(e.m_new), copy(e.alpha), copy(e.P), copy(e.l_prev),
                                 copy(e.l_new), copy(e.O)});
}

template <class T>
void TraceCollector::keep_final(const QueryTileDone<T>& e) {
  if (trace_.head && e.head != *trace_.head) return;
  trace_.flash->finals.push_back({e.batch, e.head, e.i, e.row_begin, e.row_end, cast<double>(*e.O), cast<double>(*e.lse)});
}

}  // namespace attn
