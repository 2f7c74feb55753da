#pragma once
// The observer that records: a copy of every step a StepFilter lets through and, for the flash pass,
// every tile, in a Trace.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "observe/observer.hpp"
#include "trace/trace.hpp"

namespace attn {

// Keeps a copy of every step the filter lets through, and with `flash` set, every tile of the flash
// pass (of the filter's head) and its result.
class TraceCollector final : public Observer {
 public:
  TraceCollector(std::shared_ptr<const Problem> problem, DType dtype, StepFilter filter = {},
                 std::optional<TileSize> flash = std::nullopt);

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

  // The backward pass runs too; with `flash`, its tiles are kept (of the filter's head).
  void expect_backward(std::optional<TileSize> flash);
  bool wants_backward_tiles() const override { return trace_.flash_backward.has_value() && filter_.tiles; }
  void on_backward_rows(const Tensor<float>& D) override { keep_rows(cast<double>(D)); }
  void on_backward_rows(const Tensor<double>& D) override { keep_rows(D); }
  void on_backward_tile(const BackwardTileEvent<float>& e) override { keep_backward_tile(e); }
  void on_backward_tile(const BackwardTileEvent<double>& e) override { keep_backward_tile(e); }

  // The finished trace, with a warning per row that had nothing to attend.
  Trace finish(std::vector<EmptyRow> empty_rows) &&;

 private:
  void keep(Step step, Tensor<double> value);
  template <class T>
  void keep_tile(const TileEvent<T>& e);
  template <class T>
  void keep_final(const QueryTileDone<T>& e);
  void keep_lse(Tensor<double> lse);
  void keep_rows(Tensor<double> D);
  template <class T>
  void keep_backward_tile(const BackwardTileEvent<T>& e);
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
                                 copy(e.l_new), copy(e.O), copy(e.P_drop)});
}

template <class T>
void TraceCollector::keep_final(const QueryTileDone<T>& e) {
  if (trace_.head && e.head != *trace_.head) return;
  trace_.flash->finals.push_back(
      {e.batch, e.head, e.i, e.row_begin, e.row_end, cast<double>(*e.O), cast<double>(*e.lse)});
}

template <class T>
void TraceCollector::keep_backward_tile(const BackwardTileEvent<T>& e) {
  if (trace_.head && e.head != *trace_.head) return;
  const auto copy = [](const Tensor<T>* t) { return t ? cast<double>(*t) : Tensor<double>(); };
  trace_.flash_backward->tiles.push_back({e.batch, e.head, e.i, e.j, e.row_begin, e.row_end, e.col_begin, e.col_end,
                                          e.skipped, copy(e.P), copy(e.dP), copy(e.dS), copy(e.dQ_add), copy(e.dK_j),
                                          copy(e.dV_j)});
}

}  // namespace attn
