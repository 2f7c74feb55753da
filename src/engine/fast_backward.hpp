#pragma once
// The unwatched backward pass: FlashAttention-2's backward (engine/backward.hpp, run_flash_backward) on
// the fast kernels. The flash forward keeps Q, K, V, the head outputs and lse; D = rowsum(dO ⊙ O) comes
// first; then per key tile j of a key/value head, a sweep over the query tiles of every query head that
// reads it, P recomputed from lse, by one kernel per tile pair (kernel::flash_backward_tile); dK_j and
// dV_j summed in the thread's scratch and written once; the projections' gradients as blocked products.
// ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 2.
//
// Threads take the key tiles, so dK and dV are each one thread's. dQ_i gets a share from every key tile,
// and those shares are added in the order of j whatever thread made them (a ticket per query tile says
// which j is next), so dQ is the same bits on any number of threads: the sum a single thread makes.
// A key tile handed out after tile j − 1 waits at most for that tile's share; the tiles are handed out
// in order, so the wait always ends.
//
// Memory, beyond the forward's Q, K, V, head outputs and lse: dY and dO, D, dQ, dK, dV, one ticket per
// query tile, and per thread a key tile packed three ways, its running dK_j and dV_j and two Br × Bc
// tiles (P, dS). Nothing of size n × m.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "engine/backward.hpp"
#include "engine/fast.hpp"
#include "engine/flash.hpp"

namespace attn {

namespace fast {

// The shape of the fast backward pass: its tiles no longer than the sequence, padded to the kernels'
// blocks.
struct BackwardShape {
  std::size_t Br = 1, Bc = 1, Tr = 0, Tc = 0;
  std::size_t rows_pad = 1, cols_pad = 1, dk_pad = 1, dv_pad = 1;
};

template <class T>
BackwardShape backward_shape(const Problem& p, TileSize tiles, kernel::Isa isa) {
  BackwardShape t;
  t.Br = std::min(tiles.Br, std::max<std::size_t>(p.n, 1));
  t.Bc = std::min(tiles.Bc, std::max<std::size_t>(p.m, 1));
  t.Tr = (p.n + t.Br - 1) / t.Br;
  t.Tc = (p.m + t.Bc - 1) / t.Bc;
  const kernel::Layout layout = kernel::layout_of(isa, T{});
  t.rows_pad = round_up(t.Br, layout.row_block);
  t.cols_pad = round_up(t.Bc, layout.col_block);
  t.dk_pad = round_up(std::max<std::size_t>(p.d_k, 1), layout.lanes);
  t.dv_pad = round_up(std::max<std::size_t>(p.d_v, 1), layout.lanes);
  return t;
}

// The gradients of the heads as the scores and the weighted sum read them, in the fast path's merged
// layout: dQ (B·n, h·d_k) of the turned queries with RoPE, dK (B·m, g·d_k) likewise, dV (B·m, g·d_v).
template <class T>
struct HeadGradientRows {
  std::vector<T> dQ, dK, dV;
  std::vector<T> d_sinks;  // (h) with sinks, else empty
};

// One thread's buffers (args.hpp, FlashBackwardTileArgs), made before the threads start.
template <class T>
struct BackwardScratch {
  std::vector<T> q, d_o, lse, D, kt, k, vt, p, ds, dq, dk, dv, keep, drop;
  std::vector<std::int64_t> lo, hi;

  BackwardScratch(const BackwardShape& t, std::size_t d_k, std::size_t d_v, bool gaps, bool dropout)
      : q(t.rows_pad * t.dk_pad),
        d_o(t.rows_pad * t.dv_pad),
        lse(t.rows_pad),
        D(t.rows_pad),
        kt(d_k * t.cols_pad),
        k(t.cols_pad * t.dk_pad),
        vt(d_v * t.cols_pad),
        p(t.rows_pad * t.cols_pad),
        ds(t.rows_pad * t.cols_pad),
        dq(t.rows_pad * t.dk_pad),
        dk(t.cols_pad * t.dk_pad),
        dv(t.cols_pad * t.dv_pad),
        keep(gaps ? t.Br * t.cols_pad : 0),
        drop(dropout ? t.Br * t.cols_pad : 0),
        lo(t.Br),
        hi(t.Br) {}
};

// What every tile pair of the pass reads: the forward's heads and lse, dO and D, and ALiBi's terms.
template <class T>
struct BackwardInputs {
  const Problem& p;
  const BackwardShape& t;
  const Projected<T>& x;     // Q (B·n, h·d_k), K (B·m, g·d_k), V (B·m, g·d_v)
  const Tensor<T>& lse;      // (B, h, n)
  const std::vector<T>& dO;  // (B·n, h·d_v)
  const std::vector<T>& D;   // (B·h·n)
  const ScoreChain<T> chain;
  const std::vector<T> pos_k;  // ALiBi's key positions per key tile, padded (Tc·cols_pad), or empty
  const bool gaps;
};

// Key tile j of key/value head kv of item b, packed three ways: kt (d_k, cols_pad) for S = Q·Kᵀ, k
// (cols_pad, dk_pad) for dQ = dS·K, vt (d_v, cols_pad) for dP = dO·Vᵀ; padding zero. dK_j, dV_j = 0.
template <class T>
void pack_key_tile(const BackwardInputs<T>& in, std::size_t b, std::size_t kv, std::size_t c0, std::size_t cols,
                   BackwardScratch<T>& w) {
  const Problem& p = in.p;
  const std::size_t g = p.g, m = p.m, d_k = p.d_k, d_v = p.d_v, cp = in.t.cols_pad, dk_pad = in.t.dk_pad;
  for (std::vector<T>* v : {&w.kt, &w.k, &w.vt, &w.dk, &w.dv}) std::fill(v->begin(), v->end(), T{0});
  for (std::size_t c = 0; c < cols; ++c) {
    const T* key = in.x.K.data() + ((b * m + c0 + c) * g + kv) * d_k;
    const T* value = in.x.V.data() + ((b * m + c0 + c) * g + kv) * d_v;
    for (std::size_t e = 0; e < d_k; ++e) w.kt[e * cp + c] = key[e];
    std::copy(key, key + d_k, w.k.data() + c * dk_pad);
    for (std::size_t e = 0; e < d_v; ++e) w.vt[e * cp + c] = value[e];
  }
}

// Query tile i of head hd (rows [r0, r0 + rows)): its queries, dO, lse and D into the scratch, padding zero.
template <class T>
void pack_query_tile(const BackwardInputs<T>& in, std::size_t b, std::size_t hd, std::size_t r0, std::size_t rows,
                     BackwardScratch<T>& w) {
  const Problem& p = in.p;
  const std::size_t h = p.h, n = p.n, d_k = p.d_k, d_v = p.d_v, dk_pad = in.t.dk_pad, dv_pad = in.t.dv_pad;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t row = b * n + r0 + r;
    const T* q = in.x.Q.data() + (row * h + hd) * d_k;
    const T* d_o = in.dO.data() + (row * h + hd) * d_v;
    std::copy(q, q + d_k, w.q.data() + r * dk_pad);
    std::copy(d_o, d_o + d_v, w.d_o.data() + r * dv_pad);
    w.lse[r] = in.lse(b, hd, r0 + r);
    w.D[r] = in.D[(b * h + hd) * n + r0 + r];
  }
  std::fill(w.q.begin() + static_cast<std::ptrdiff_t>(rows * dk_pad), w.q.end(), T{0});
  std::fill(w.d_o.begin() + static_cast<std::ptrdiff_t>(rows * dv_pad), w.d_o.end(), T{0});
}

// One tile pair (i, j): the mask's rows, then the kernel, unless the mask leaves the pair nothing.
// Returns whether it ran (and so whether w.dq holds a share of dQ_i).
template <class T>
bool backward_tile(const BackwardInputs<T>& in, std::size_t b, std::size_t hd, std::size_t r0, std::size_t rows,
                   std::size_t j, std::size_t c0, std::size_t cols, BackwardScratch<T>& w, kernel::Isa isa) {
  const Problem& p = in.p;
  const BackwardShape& t = in.t;
  bool any = false;
  for (std::size_t r = 0; r < rows; ++r) {
    T* keep = in.gaps ? w.keep.data() + r * t.cols_pad : nullptr;
    const RowMask<T> rm = row_mask<T>(p.mask, b, r0 + r, c0, cols, keep);
    w.lo[r] = rm.lo;
    w.hi[r] = rm.hi;
    any = any || rm.any;
  }
  if (!any) return false;  // fully masked: the tile adds nothing
  pack_query_tile(in, b, hd, r0, rows, w);
  kernel::FlashBackwardTileArgs<T> a;
  a.rows = rows;
  a.rows_pad = t.rows_pad;
  a.cols = cols;
  a.cols_pad = t.cols_pad;
  a.d_k = p.d_k;
  a.dk_pad = t.dk_pad;
  a.d_v = p.d_v;
  a.dv_pad = t.dv_pad;
  a.q = w.q.data();
  a.d_o = w.d_o.data();
  a.lse = w.lse.data();
  a.D = w.D.data();
  a.kt = w.kt.data();
  a.k = w.k.data();
  a.vt = w.vt.data();
  if (in.chain.has(Stage::dropout))  // the forward's keep mask, drawn again from the seed
    draw_dropout(in.chain, b, hd, r0, rows, c0, cols, t.cols_pad, w.drop.data());
  in.chain.fill(a.score, {.hd = hd,
                          .r0 = r0,
                          .pos_k = at_offset(in.pos_k, j * t.cols_pad),
                          .lo = w.lo.data(),
                          .hi = w.hi.data(),
                          .keep = in.gaps ? w.keep.data() : nullptr,
                          .drop = w.drop.data()});
  a.p = w.p.data();
  a.ds = w.ds.data();
  a.dq = w.dq.data();
  a.dk = w.dk.data();
  a.dv = w.dv.data();
  kernel::flash_backward_tile(isa, a);
  return true;
}

// D = rowsum(dO ⊙ O): equal to rowsum(dA ⊙ A), the softmax backward's D, with no A at hand.
// D[(b·h + hd)·n + i] = Σ_e dO[b·n + i][hd·d_v + e] · O[b·n + i][hd·d_v + e]            (B·h·n)
template <class T>
std::vector<T> row_dots(const Problem& p, const std::vector<T>& dO, std::span<const T> O) {
  std::vector<T> D(p.B * p.h * p.n);
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i)
      for (std::size_t hd = 0; hd < p.h; ++hd) {
        const std::size_t at = ((b * p.n + i) * p.h + hd) * p.d_v;
        T sum = 0;
        for (std::size_t e = 0; e < p.d_v; ++e) sum += dO[at + e] * O[at + e];
        D[(b * p.h + hd) * p.n + i] = sum;
      }
  return D;
}

// Passes 6 to 8 of FlashAttention-2's backward, unwatched: per key tile of a key/value head (one thread
// each), a sweep over the query tiles of every query head that reads it; dK_j, dV_j written once, dQ_i's
// shares added in the order of j. x: the forward's heads; O (B·n, h·d_v) and lse (B, h, n) its output;
// dO (B·n, h·d_v). Returns dQ, dK, dV in the merged layout.
template <class T>
HeadGradientRows<T> attend_flash_backward(const Problem& p, const Projected<T>& x, std::span<const T> O,
                                          const Tensor<T>& lse, const std::vector<T>& dO, const FastOptions& o) {
  const BackwardShape t = backward_shape<T>(p, o.backward_tiles, o.isa);
  const std::size_t B = p.B, h = p.h, g = p.g, n = p.n, m = p.m, d_k = p.d_k, group = h / std::max<std::size_t>(g, 1);

  // pass 1: D = rowsum(dO ⊙ O), one number per query row; the sinks' gradients from it and lse alone,
  // dsink = -Σ exp(sink - lse) · D
  const std::vector<T> D = row_dots(p, dO, O);
  std::vector<T> d_sinks;
  if (!p.sinks.empty()) d_sinks = d_sinks_from_rows<T>(ScoreChain<T>(p, unrounded<T>()).sinks(), lse.values(), D, n);
  const BackwardInputs<T> in{p,
                             t,
                             x,
                             lse,
                             dO,
                             D,
                             ScoreChain<T>(p, unrounded<T>()),
                             tiled_key_positions<T>(p, t.Tc, t.Bc, t.cols_pad),
                             mask_has_gaps(p.mask)};

  // pass 2: per key tile j of each key/value head, the sweep over the query tiles of its query heads
  HeadGradientRows<T> out{std::vector<T>(B * n * h * d_k), std::vector<T>(B * m * g * d_k),
                          std::vector<T>(B * m * g * p.d_v), std::move(d_sinks)};
  const std::size_t items = B * g * t.Tc;
  const double work = double(B) * double(h) * double(n) * double(m) * double(d_k + p.d_v);
  const std::size_t threads = std::min(kernel::threads_for(work, o.threads), std::max<std::size_t>(1, items));
  std::vector<BackwardScratch<T>> scratch;
  scratch.reserve(threads);
  for (std::size_t k = 0; k < threads; ++k) scratch.emplace_back(t, d_k, p.d_v, in.gaps, p.dropout.has_value());
  // next[(b·h + hd)·Tr + i]: the key tile whose share of dQ_i is to be added next
  std::vector<std::atomic<std::size_t>> next(B * h * t.Tr);
  kernel::parallel_for(items, threads, [&](std::size_t item, std::size_t worker) {
    BackwardScratch<T>& w = scratch[worker];
    const std::size_t b = item / (g * t.Tc), kv = item / t.Tc % g, j = item % t.Tc;
    const std::size_t c0 = j * t.Bc, cols = std::min(t.Bc, m - c0);
    pack_key_tile(in, b, kv, c0, cols, w);
    for (std::size_t hd = kv * group; hd < (kv + 1) * group; ++hd)
      for (std::size_t i = 0; i < t.Tr; ++i) {
        const std::size_t r0 = i * t.Br, rows = std::min(t.Br, n - r0);
        const bool ran = backward_tile(in, b, hd, r0, rows, j, c0, cols, w, o.isa);
        // dQ_i += this tile's share, after key tile j - 1's: the same order on any number of threads
        std::atomic<std::size_t>& turn = next[(b * h + hd) * t.Tr + i];
        while (turn.load(std::memory_order_acquire) != j) std::this_thread::yield();
        if (ran)
          for (std::size_t r = 0; r < rows; ++r) {
            T* dq = out.dQ.data() + ((b * n + r0 + r) * h + hd) * d_k;
            const T* share = w.dq.data() + r * t.dk_pad;
            for (std::size_t e = 0; e < d_k; ++e) dq[e] += share[e];
          }
        turn.store(j + 1, std::memory_order_release);
      }
    // the key tile is done: its gradients, summed over the query heads that share it, written once
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t row = (b * m + c0 + c) * g + kv;
      std::copy_n(w.dk.data() + c * t.dk_pad, d_k, out.dK.data() + row * d_k);
      std::copy_n(w.dv.data() + c * t.dv_pad, p.d_v, out.dV.data() + row * p.d_v);
    }
  });
  return out;
}

// dO = dY·W_oᵀ, or dY itself without W_o: dY (B·n, d_out) -> (B·n, h·d_v)
// dO[r][c] = Σ_e dY[r][e] · W_o[c][e]
template <class T>
std::vector<T> d_head_outputs(const Problem& p, const Tensor<T>& dY, const FastOptions& o) {
  if (!p.has_output_projection()) return {dY.values().begin(), dY.values().end()};
  const std::vector<T> W_o = in_type<T>(p.W_o.values());  // (h·d_v, d_out)
  const std::size_t rows = p.B * p.n, hd_v = p.h * p.d_v, d_out = p.d_out;
  std::vector<T> dO(rows * hd_v);
  const auto out = static_cast<std::ptrdiff_t>(d_out), inner = static_cast<std::ptrdiff_t>(hd_v);
  kernel::gemm(o.isa,
               kernel::product(rows, hd_v, d_out, dY.values().data(), out, 1, W_o.data(), 1, out, dO.data(), inner),
               o.threads);
  return dO;
}

// The gradient of Y = X·W + b with respect to W: Xᵀ·dY (d_in, d_out), in the input file's layout.
// dW[a][c] = Σ_r X[r][a] · dY[r][c]
template <class T>
Tensor<T> d_weight_rows(const Problem& p, std::span<const T> X, std::size_t rows, std::size_t d_in,
                        const std::vector<T>& dY, std::size_t d_out, const FastOptions& o) {
  std::vector<T> dW(d_in * d_out);
  const auto in = static_cast<std::ptrdiff_t>(d_in), out = static_cast<std::ptrdiff_t>(d_out);
  kernel::gemm(o.isa, kernel::product(d_in, d_out, rows, X.data(), 1, in, dY.data(), out, 1, dW.data(), out),
               o.threads);
  return rows::in_file_layout(p, Tensor<T>({d_in, d_out}, std::move(dW)));
}

// dX (+)= dY·Wᵀ: dY (rows, d_out), W (d_in, d_out) -> dX (rows, d_in)
// dX[r][a] (+)= Σ_c dY[r][c] · W[a][c]
template <class T>
void d_input_rows(std::vector<T>& dX, std::size_t rows, std::size_t d_in, const std::vector<T>& dY, std::size_t d_out,
                  const std::vector<T>& W, bool add, const FastOptions& o) {
  const auto in = static_cast<std::ptrdiff_t>(d_in), out = static_cast<std::ptrdiff_t>(d_out);
  kernel::GemmArgs<T> a = kernel::product(rows, d_in, d_out, dY.data(), out, 1, W.data(), 1, out, dX.data(), in);
  a.accumulate = add;
  kernel::gemm(o.isa, a, o.threads);
}

// The bias's gradient: the column sums of dY (rows, d).
template <class T>
Tensor<T> d_bias_rows(const std::vector<T>& dY, std::size_t rows, std::size_t d) {
  Tensor<T> db({d}, T{0});
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < d; ++c) db.values()[c] += dY[r * d + c];
  return db;
}

}  // namespace fast

// The gradients of the fast backward pass, by the step names of the traced one (observe/steps.hpp), in
// the shapes it reports them: the inputs' and the parameters', and d_q, d_k, d_v (the heads' gradients
// merged); with the forward's result.
template <class T>
struct FastBackward {
  AttentionResult<T> forward;
  std::vector<std::pair<Step, Tensor<T>>> gradients;
};

// The flash forward keeping what its backward reads, on the fast path: the projections, the attention
// (Q, K and V kept), the output.
template <class T>
struct FastForwardKept {
  fast::Projected<T> x;
  fast::Attended<T> attended;  // the head outputs (B·n, h·d_v) and lse
};

// Passes 9 and 10 of the backward on the fast path: through RoPE (its transpose), the split into heads
// and the projections, to the inputs and the parameters. `concat` is the forward's merged head outputs.
// The heads' gradients are kept merged (d_q, d_k, d_v, their own vectors moved in), not copied split.
template <class T>
void fast_backward_projections(const Problem& p, fast::HeadGradientRows<T> g, std::span<const T> concat,
                               const Tensor<T>& dY, const FastOptions& o, FastBackward<T>& out) {
  using fast::in_type;
  const std::size_t B = p.B, n = p.n, m = p.m, h = p.h, kvh = p.g, d_k = p.d_k, d_v = p.d_v;
  const auto keep = [&out](Step s, Tensor<T> v) { out.gradients.emplace_back(s, std::move(v)); };
  if (p.rope) {  // the rotation's transpose turns the gradients back
    fast::rotate_rows<T>(g.dQ, B, n, h, d_k, p.rope->cos_q, p.rope->sin_q, p.rope->style, true);
    fast::rotate_rows<T>(g.dK, B, m, kvh, d_k, p.rope->cos_k, p.rope->sin_k, p.rope->style, true);
  }

  // X reaches L as a query, a key and a value in self-attention: its gradient is the sum of the three
  {
    const std::vector<T> X = in_type<T>(p.X.values());
    std::vector<T> C_own;
    if (p.cross) C_own = in_type<T>(p.C.values());
    const std::vector<T>& C = p.cross ? C_own : X;
    std::vector<T> dX(B * n * p.d_model), dC(p.cross ? B * m * p.d_context : 0);
    fast::d_input_rows(dX, B * n, p.d_model, g.dQ, h * d_k, in_type<T>(p.W_q.values()), false, o);
    std::vector<T>& dKV = p.cross ? dC : dX;  // the key and value paths: C's, which is X in self-attention
    fast::d_input_rows(dKV, B * m, p.d_context, g.dK, kvh * d_k, in_type<T>(p.W_k.values()), !p.cross, o);
    fast::d_input_rows(dKV, B * m, p.d_context, g.dV, kvh * d_v, in_type<T>(p.W_v.values()), true, o);
    keep(Step::d_X, Tensor<T>({B, n, p.d_model}, std::move(dX)));
    if (p.cross) keep(Step::d_context, Tensor<T>({B, m, p.d_context}, std::move(dC)));
    keep(Step::d_W_q, fast::d_weight_rows<T>(p, X, B * n, p.d_model, g.dQ, h * d_k, o));
    keep(Step::d_W_k, fast::d_weight_rows<T>(p, C, B * m, p.d_context, g.dK, kvh * d_k, o));
    keep(Step::d_W_v, fast::d_weight_rows<T>(p, C, B * m, p.d_context, g.dV, kvh * d_v, o));
  }
  const std::vector<T> dY_rows(dY.values().begin(), dY.values().end());
  if (p.has_output_projection())
    keep(Step::d_W_o, fast::d_weight_rows<T>(p, concat, B * n, h * d_v, dY_rows, p.d_out, o));
  if (!p.b_q.empty()) keep(Step::d_b_q, fast::d_bias_rows(g.dQ, B * n, h * d_k));
  if (!p.b_k.empty()) keep(Step::d_b_k, fast::d_bias_rows(g.dK, B * m, kvh * d_k));
  if (!p.b_v.empty()) keep(Step::d_b_v, fast::d_bias_rows(g.dV, B * m, kvh * d_v));
  if (!p.b_o.empty()) keep(Step::d_b_o, fast::d_bias_rows(dY_rows, B * n, p.d_out));
  keep(Step::d_q, Tensor<T>({B, n, h * d_k}, std::move(g.dQ)));
  keep(Step::d_k, Tensor<T>({B, m, kvh * d_k}, std::move(g.dK)));
  keep(Step::d_v, Tensor<T>({B, m, kvh * d_v}, std::move(g.dV)));
  if (!p.sinks.empty()) keep(Step::d_sinks, Tensor<T>({h}, std::move(g.d_sinks)));
}

// run_fast_backward in its stages, for whoever times them apart (bench): the forward keeping its heads,
// dO from dY, the attention's backward, the projections' backward.
template <class T>
FastForwardKept<T> fast_forward_keeping(const Problem& p, FastOptions o) {
  o = fast::checked(o, "fast_forward_keeping");
  FastForwardKept<T> f{fast_project<T>(p, o), {}};
  f.attended = fast::attend_flash_keeping<T>(p, f.x, o);
  return f;
}

template <class T>
fast::HeadGradientRows<T> fast_attend_backward(const Problem& p, const FastForwardKept<T>& f, const std::vector<T>& dO,
                                               FastOptions o) {
  o = fast::checked(o, "fast_attend_backward");
  if (o.backward_tiles.Br == 0 || o.backward_tiles.Bc == 0)
    throw std::invalid_argument(fmt::format("fast_attend_backward: tiles of {} × {}: both sides must be >= 1",
                                            o.backward_tiles.Br, o.backward_tiles.Bc));
  return fast::attend_flash_backward<T>(p, f.x, f.attended.concat, f.attended.lse, dO, o);
}

// The flash forward and FlashAttention-2's backward on the fast path, unwatched, in T (float or double),
// from dY (the problem's, or 1 everywhere: upstream_gradient): the gradients of FastBackward.
template <class T>
FastBackward<T> run_fast_backward(const Problem& p, FastOptions o) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "the fast kernels are float and double");
  o = fast::checked(o, "run_fast_backward");
  FastForwardKept<T> f = fast_forward_keeping<T>(p, o);
  const Tensor<T> dY = upstream_gradient<T>(p, std::is_same_v<T, float> ? DType::float32 : DType::float64);
  const std::vector<T> dO = fast::d_head_outputs(p, dY, o);
  fast::HeadGradientRows<T> g = fast_attend_backward<T>(p, f, dO, o);
  f.x = fast::Projected<T>();  // Q, K and V are read no more
  FastBackward<T> out;
  fast_backward_projections<T>(p, std::move(g), f.attended.concat, dY, o, out);
  fast::Attended<T> a = std::move(f.attended);
  out.forward = fast_finish<T>(p, std::move(a), o);
  return out;
}

// The bytes run_fast_backward holds at its peak, from the sizes alone (bench refuses a run over its limit
// by it): the flash forward's (fast_engine_bytes), with K and V kept beside their packed tiles, then dY,
// dO, D, the heads' gradients, dX and dC, the weights' gradients, and per thread a key tile packed three
// ways, its dK_j and dV_j, and a query tile's Q, dO, P, dS and dQ share. An upper bound up to the padding.
inline Count fast_backward_bytes(const Problem& p, std::size_t scalar, std::size_t threads) {
  const std::size_t B = p.B, n = p.n, m = p.m, h = p.h, g = p.g, d_k = p.d_k, d_v = p.d_v;
  Count v = fast_engine_bytes(p, Engine::flash, scalar, threads) / scalar;
  v = checked_add(v, product(B, m, g, checked_add(d_k, d_v)));               // K and V kept
  v = checked_add(v, product(B, n, checked_add(p.d_out, product(h, d_v))));  // dY, dO
  v = checked_add(v, product(B, h, n));                                      // D
  v = checked_add(v, product(B, checked_add(product(n, h, d_k), product(m, g, checked_add(d_k, d_v)))));
  v = checked_add(v, product(B, checked_add(product(n, p.d_model), product(m, p.d_context))));  // dX, dC
  v = checked_add(v, product(p.d_model, h, d_k));
  v = checked_add(v, product(p.d_context, g, checked_add(d_k, d_v)));
  v = checked_add(v, product(h, d_v, p.d_out));
  const std::size_t Br = std::min(fast_backward_tiles().Br, std::max<std::size_t>(n, 1)) + 48;
  const std::size_t Bc = std::min(fast_backward_tiles().Bc, std::max<std::size_t>(m, 1)) + 48;
  const Count wide = checked_add(checked_add(d_k, d_v), 16);
  const Count per_thread =
      checked_add(product(Bc, 3, wide), product(Br, checked_add(product(2, Bc), product(2, wide))));
  v = checked_add(v, product(std::max<std::size_t>(threads, 1), per_thread));
  return checked_mul(v, scalar);
}

}  // namespace attn
