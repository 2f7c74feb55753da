#pragma once
// How an engine reports what it computes without knowing who watches. The engine asks first
// (wants), so a step nobody asked for costs nothing; then it tells (on) with a view of its own tensor.

#include "tensor/tensor.hpp"
#include "observe/steps.hpp"

namespace attn {

// One tile of the flash pass: query tile i (rows [row_begin, row_end)) against key tile j (columns
// [col_begin, col_end)) of one head of one batch item. A skipped tile (the mask rules it out
// entirely) has no matrices.
template <class T>
struct TileEvent {
  std::size_t batch, head, i, j;
  std::size_t row_begin, row_end, col_begin, col_end;
  bool skipped = false;
  const Tensor<T>* S = nullptr;       // (Br, Bc) scaled and masked scores
  const Tensor<T>* m_prev = nullptr;  // (Br) running max before the tile
  const Tensor<T>* m_new = nullptr;   // (Br) and after it
  const Tensor<T>* alpha = nullptr;   // (Br) exp(m_prev - m_new)
  const Tensor<T>* P = nullptr;       // (Br, Bc) exp(S - m_new)
  const Tensor<T>* l_prev = nullptr;  // (Br) running sum before the tile
  const Tensor<T>* l_new = nullptr;   // (Br) and after it
  const Tensor<T>* O = nullptr;       // (Br, d_v) unnormalised output after the tile
  const Tensor<T>* P_drop = nullptr;  // (Br, Bc) P after dropout, what P·V read: with dropout only
};

// The end of one query tile: its rows divided by their sums, and their log-sum-exp.
template <class T>
struct QueryTileDone {
  std::size_t batch, head, i;
  std::size_t row_begin, row_end;
  const Tensor<T>* O = nullptr;    // (Br, d_v) O / l: the head output of these rows
  const Tensor<T>* lse = nullptr;  // (Br) m + log l
};

// One tile of the flash backward pass: key tile j (columns [col_begin, col_end)) against query tile i
// (rows [row_begin, row_end)) of one head. ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 2.
// A skipped tile (the mask rules it out entirely) has no matrices.
template <class T>
struct BackwardTileEvent {
  std::size_t batch, head, i, j;
  std::size_t row_begin, row_end, col_begin, col_end;
  bool skipped = false;
  const Tensor<T>* P = nullptr;       // (Br, Bc) exp(S - lse): the weights, recomputed from the saved lse
  const Tensor<T>* dP = nullptr;      // (Br, Bc) dO_i·V_jᵀ: this tile of d_weights
  const Tensor<T>* dS = nullptr;      // (Br, Bc) P ⊙ (dP - D_i): this tile of d_masked
  const Tensor<T>* dQ_add = nullptr;  // (Br, d_k) what this tile adds to dQ_i: scale · dS·K_j
  const Tensor<T>* dK_j = nullptr;    // (Bc, d_k) the key tile's running dK_j, after this tile
  const Tensor<T>* dV_j = nullptr;    // (Bc, d_v) and its running dV_j
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual bool wants(Step step) const = 0;
  // Every tensor here has the batch axis first, as the engine holds it. Only valid during the call.
  virtual void on(Step step, const Tensor<float>& value) = 0;
  virtual void on(Step step, const Tensor<double>& value) = 0;
  // The extended-precision reference of `compare --dtype float64` is computed, never traced.
  virtual void on(Step, const Tensor<long double>&) {}

  // The flash pass: every tile, then the log-sum-exp of every row (B, h, n).
  virtual bool wants_tiles() const { return false; }
  virtual void on_tile(const TileEvent<float>&) {}
  virtual void on_tile(const TileEvent<double>&) {}
  virtual void on_query_tile_done(const QueryTileDone<float>&) {}
  virtual void on_query_tile_done(const QueryTileDone<double>&) {}
  virtual void on_lse(const Tensor<float>&) {}
  virtual void on_lse(const Tensor<double>&) {}

  // The flash backward pass: D = rowsum(dO ⊙ O) of every row (B, h, n) first, then every tile.
  virtual bool wants_backward_tiles() const { return false; }
  virtual void on_backward_rows(const Tensor<float>&) {}
  virtual void on_backward_rows(const Tensor<double>&) {}
  virtual void on_backward_tile(const BackwardTileEvent<float>&) {}
  virtual void on_backward_tile(const BackwardTileEvent<double>&) {}
};

// Watches nothing, keeps nothing: the engines' fast path.
class NullObserver final : public Observer {
 public:
  bool wants(Step) const override { return false; }
  void on(Step, const Tensor<float>&) override {}
  void on(Step, const Tensor<double>&) override {}
};

// Ask, then tell: the one way engines report a step.
template <class T>
void report(Observer& observer, Step step, const Tensor<T>& value) {
  if (observer.wants(step)) observer.on(step, value);
}

}  // namespace attn
