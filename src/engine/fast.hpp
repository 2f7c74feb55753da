#pragma once
// The unwatched path: naive's and flash's algorithms with nothing reported, on the fast kernels
// (kernel/): the projections and naive's two products as blocked matrix products, flash's tiles folded
// by register-blocked kernels with a vectorised exp, tiles the mask rules out skipped, partly masked
// ones masked where needed, and the query tiles × heads spread over threads. The steps are those of
// naive.hpp and flash.hpp in the same order; only the grouping of sums differs (and exp is the kernels'
// own), so the two paths agree within compare's rule (tests/unit/fast_test.cpp proves it).
// Who asks: `attn-trace bench`, and whoever wants the output alone. A trace is always the traced path.
//
// Memory: the inputs in T (the context only for cross-attention), Q, K and V, K and V repacked in
// tiles (K and V themselves released once packed), the merged head outputs and the output. Naive
// also holds its one (B, h, n, m) buffer of scores, turned into weights in place; flash holds one
// (Br, Bc) tile of scores per thread.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/common.hpp"
#include "engine/fast_common.hpp"
#include "engine/estimate.hpp"
#include "kernel/kernels.hpp"
#include "model/run.hpp"
#include "model/dropout.hpp"

namespace attn {

namespace fast {

// Naive's attention, unwatched: S = Q·Kᵀ whole per head, then scale, bias, mask and softmax row by row
// in place, then O = P·V per head into the merged layout.
template <class T>
Attended<T> attend_naive(const Problem& p, Projected<T> x, const FastOptions& o) {
  const std::size_t B = p.B, h = p.h, g = p.g, n = p.n, m = p.m, d_k = p.d_k, d_v = p.d_v;
  const ScoreChain<T> chain(p, unrounded<T>());

  // S = Q·Kᵀ per head, all of it: (B, h, n, m)
  // S[b][hd][i][j] = Σ_e Q[b·n + i][hd·d_k + e] · K[b·m + j][kv·d_k + e]
  // Left uninitialised, on huge pages where the system grants them (kernel::big_array): the product
  // overwrites every score (filling 512 MiB with zeros first took a tenth of naive's time at n = 4096, h = 8).
  const std::size_t s_size = B * h * n * m;
  const kernel::BigArray<T> S_buffer = kernel::big_array<T>(s_size);
  const std::span<T> S(S_buffer.get(), s_size);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      const kernel::GemmArgs<T> gs =
          kernel::product(n, m, d_k, x.Q.data() + (b * n * h + hd) * d_k, static_cast<std::ptrdiff_t>(h * d_k), 1,
                          x.K.data() + (b * m * g + kv) * d_k, 1, static_cast<std::ptrdiff_t>(g * d_k),
                          S.data() + (b * h + hd) * n * m, static_cast<std::ptrdiff_t>(m));
      kernel::gemm(o.isa, gs, o.threads);
    }

  // P = softmax(S·scale + bias, masked) along each row, in place, blocks of rows over threads
  constexpr std::size_t rows_per_item = 64;
  const std::size_t blocks = (n + rows_per_item - 1) / rows_per_item;
  const bool gaps = mask_has_gaps(p.mask);
  const double scores = double(B) * double(h) * double(n) * double(m);
  kernel::parallel_for(B * h * blocks, kernel::threads_for(scores * 8, o.threads), [&](std::size_t item, std::size_t) {
    const std::size_t bh = item / blocks, b = bh / h, hd = bh % h;
    const std::size_t i0 = item % blocks * rows_per_item, rows = std::min(rows_per_item, n - i0);
    std::vector<std::int64_t> lo(rows), hi(rows);
    std::vector<T> keep(gaps ? rows * m : 0);
    for (std::size_t r = 0; r < rows; ++r) {
      const RowMask<T> rm = row_mask<T>(p.mask, b, i0 + r, 0, m, gaps ? keep.data() + r * m : nullptr);
      lo[r] = rm.lo;
      hi[r] = rm.hi;
    }
    kernel::SoftmaxRowsArgs<T> a;
    a.rows = rows;
    a.cols = m;
    a.s = S.data() + ((b * h + hd) * n + i0) * m;
    a.row_stride = m;
    chain.fill(a.score, {.hd = hd,
                         .r0 = i0,
                         .pos_k = chain.key_positions().data(),
                         .lo = lo.data(),
                         .hi = hi.data(),
                         .keep = gaps ? keep.data() : nullptr});
    kernel::softmax_rows(o.isa, a);
    if (chain.has(Stage::dropout)) {  // the weights after dropout, in place: kept ones times 1/(1 - p), the rest 0
      for (std::size_t r = 0; r < rows; ++r) {
        T* row = a.s + r * m;
        for (std::size_t j = 0; j < m; ++j) row[j] *= chain.factor({b, hd, i0 + r, j});
      }
    }
  });

  // O = P·V per head, into the merged layout (B·n, h·d_v)
  // O[b·n + i][hd·d_v + c] = Σ_j P[b][hd][i][j] · V[b·m + j][kv·d_v + c]
  kernel::Buffer<T> concat(B * n * h * d_v);  // every element written by the products below
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      const kernel::GemmArgs<T> gv =
          kernel::product(n, d_v, m, S.data() + (b * h + hd) * n * m, static_cast<std::ptrdiff_t>(m), 1,
                          x.V.data() + (b * m * g + kv) * d_v, static_cast<std::ptrdiff_t>(g * d_v), 1,
                          concat.data() + (b * n * h + hd) * d_v, static_cast<std::ptrdiff_t>(h * d_v));
      kernel::gemm(o.isa, gv, o.threads);
    }
  return {std::move(concat), S.size() * sizeof(T), Tensor<T>()};
}

// The shape of the fast flash pass: its tiles, no longer than the sequence (the same tiles, without
// buffers for rows and keys that are not there), padded to the kernels' row blocks and lanes.
struct FlashShape {
  std::size_t Br = 1, Bc = 1, Tr = 0, Tc = 0;  // the tiles and their counts over n and m
  std::size_t rows_pad = 1, cols_pad = 1;      // Br and Bc padded
  std::size_t dv_pad = 1;                      // d_v padded
  std::size_t lanes = 1;                       // the kernels' vector, in T
  std::size_t kt_size = 0, v_size = 0;         // one packed key tile, one packed value tile
};

template <class T>
FlashShape flash_shape(const Problem& p, const FastOptions& o) {
  FlashShape t;
  t.Br = std::min(o.tiles.Br, std::max<std::size_t>(p.n, 1));
  t.Bc = std::min(o.tiles.Bc, std::max<std::size_t>(p.m, 1));
  t.Tr = (p.n + t.Br - 1) / t.Br;
  t.Tc = (p.m + t.Bc - 1) / t.Bc;
  const kernel::Layout layout = kernel::layout_of(o.isa, T{});
  t.rows_pad = round_up(t.Br, layout.row_block);
  t.cols_pad = round_up(t.Bc, layout.lanes);
  t.dv_pad = round_up(std::max<std::size_t>(p.d_v, 1), layout.lanes);
  t.lanes = layout.lanes;
  t.kt_size = p.d_k * t.cols_pad;
  t.v_size = t.cols_pad * t.dv_pad;
  return t;
}

// Every key tile transposed and every value tile padded, per (b, kv head, j): tile (b·g + kv)·Tc + j.
template <class T>
struct PackedTiles {
  std::vector<T> Kt;  // (B·g·Tc, d_k, cols_pad)
  std::vector<T> Vp;  // (B·g·Tc, cols_pad, dv_pad)
};

// Packs K and V into tiles.
template <class T>
PackedTiles<T> pack_tiles(const Problem& p, const FlashShape& t, const Projected<T>& x, const FastOptions& o) {
  const std::size_t B = p.B, g = p.g, m = p.m, d_k = p.d_k, d_v = p.d_v, Bc = t.Bc, Tc = t.Tc;
  PackedTiles<T> out{std::vector<T>(B * g * Tc * t.kt_size), std::vector<T>(B * g * Tc * t.v_size)};
  kernel::parallel_for(B * g * Tc, kernel::threads_for(double(B * m * g) * double(d_k + d_v), o.threads),
                       [&](std::size_t item, std::size_t) {
                         const std::size_t b = item / (g * Tc), kv = item / Tc % g, j = item % Tc;
                         const std::size_t c0 = j * Bc, cols = std::min(Bc, m - c0);
                         T* kt = out.Kt.data() + item * t.kt_size;
                         T* vp = out.Vp.data() + item * t.v_size;
                         for (std::size_t c = 0; c < cols; ++c) {
                           const T* k = x.K.data() + ((b * m + c0 + c) * g + kv) * d_k;
                           for (std::size_t e = 0; e < d_k; ++e) kt[e * t.cols_pad + c] = k[e];
                           const T* v = x.V.data() + ((b * m + c0 + c) * g + kv) * d_v;
                           std::copy(v, v + d_v, vp + c * t.dv_pad);
                         }
                       });
  return out;
}

// ALiBi's key positions in T, per key tile of Bc and padded to cols_pad: key c at (c / Bc)·cols_pad + c mod Bc;
// empty without ALiBi.
template <class T>
std::vector<T> tiled_key_positions(const Problem& p, std::size_t Tc, std::size_t Bc, std::size_t cols_pad) {
  std::vector<T> pos_k(p.alibi ? Tc * cols_pad : 0);
  if (p.alibi)
    for (std::size_t c = 0; c < p.m; ++c) pos_k[c / Bc * cols_pad + c % Bc] = static_cast<T>(p.alibi->key_positions[c]);
  return pos_k;
}

// What every query tile of the pass reads: the queries, K and V packed in tiles (made here), the score chain
// in T with ALiBi's key positions per key tile, padded, and whether the mask has gaps.
template <class T>
struct FlashInputs {
  const Problem& p;
  const FlashShape& t;
  std::span<const T> Q;  // (B·n, h·d_k)
  const PackedTiles<T> packed;
  const ScoreChain<T> chain;
  const std::vector<T> pos_k;  // (Tc·cols_pad), or empty
  const bool gaps;

  FlashInputs(const Problem& problem, const FlashShape& shape, const Projected<T>& x, const FastOptions& o)
      : p(problem),
        t(shape),
        Q(x.Q),
        packed(pack_tiles(problem, shape, x, o)),
        chain(problem, unrounded<T>()),
        pos_k(tiled_key_positions<T>(problem, shape.Tc, shape.Bc, shape.cols_pad)),
        gaps(mask_has_gaps(problem.mask)) {}
};

// One thread's buffers for a query tile, made at its first tile and reused for the rest.
template <class T>
struct FlashScratch {
  std::vector<T> q, s, o, m, l, alpha, keep, drop, row_max;
  std::vector<std::int64_t> lo, hi;

  void make(const FlashShape& t, std::size_t d_k, bool gaps, bool dropout = false) {
    if (!q.empty()) return;
    q.resize(t.rows_pad * d_k);
    row_max.resize(t.rows_pad * t.lanes);
    s.resize(t.rows_pad * t.cols_pad);
    o.resize(t.rows_pad * t.dv_pad);
    m.resize(t.rows_pad);
    l.resize(t.rows_pad);
    alpha.resize(t.rows_pad);
    keep.resize(gaps ? t.Br * t.cols_pad : 0);
    drop.resize(dropout ? t.Br * t.cols_pad : 0);
    lo.resize(t.Br);
    hi.resize(t.Br);
  }
};

// Which query tile a work item is: query tile i of head hd of item b, rows [r0, r0 + rows).
struct QueryTile {
  std::size_t b = 0, hd = 0, kv = 0, i = 0, r0 = 0, rows = 0;
};

inline QueryTile query_tile_of(const Problem& p, const FlashShape& t, std::size_t item) {
  // the last query tiles first: under a causal mask they hold the most keys, and the threads that take
  // the light ones at the end come out even
  QueryTile q;
  q.b = item / (p.h * t.Tr);
  q.hd = item / t.Tr % p.h;
  q.i = t.Tr - 1 - item % t.Tr;
  q.kv = kv_head_of(q.hd, p.h, p.g);
  q.r0 = q.i * t.Br;
  q.rows = std::min(t.Br, p.n - q.r0);
  return q;
}

// The query tile's rows into the scratch (padding rows zero), and its running state m = -inf, l = 0, O = 0,
// or with the head's sink folded in, m = sink, l = 1 (engine/flash.hpp says why first is enough).
template <class T>
void start_query_tile(const FlashInputs<T>& in, const QueryTile& qt, FlashScratch<T>& w) {
  const std::size_t h = in.p.h, n = in.p.n, d_k = in.p.d_k;
  std::fill(w.q.begin(), w.q.end(), T{0});
  for (std::size_t r = 0; r < qt.rows; ++r) {
    const T* q = in.Q.data() + ((qt.b * n + qt.r0 + r) * h + qt.hd) * d_k;
    std::copy(q, q + d_k, w.q.data() + r * d_k);
  }
  const bool sink = in.chain.has(Stage::sinks);
  std::fill(w.m.begin(), w.m.end(), sink ? in.chain.sink(qt.hd) : -std::numeric_limits<T>::infinity());
  std::fill(w.l.begin(), w.l.end(), sink ? T{1} : T{0});
  std::fill(w.o.begin(), w.o.end(), T{0});
}

// Folds key tile j into the query tile's running state (kernel::flash_tile), unless the mask rules the
// whole tile out: then there is nothing to fold in.
template <class T>
void fold_key_tile(const FlashInputs<T>& in, const QueryTile& qt, std::size_t j, FlashScratch<T>& w,
                   const FastOptions& o) {
  const Problem& p = in.p;
  const FlashShape& t = in.t;
  const std::size_t c0 = j * t.Bc, cols = std::min(t.Bc, p.m - c0);
  bool any = false;
  for (std::size_t r = 0; r < qt.rows; ++r) {
    T* keep = in.gaps ? w.keep.data() + r * t.cols_pad : nullptr;
    const RowMask<T> rm = row_mask<T>(p.mask, qt.b, qt.r0 + r, c0, cols, keep);
    w.lo[r] = rm.lo;
    w.hi[r] = rm.hi;
    any = any || rm.any;
  }
  if (!any) return;
  kernel::FlashTileArgs<T> a;
  a.rows = qt.rows;
  a.rows_pad = t.rows_pad;
  a.cols = cols;
  a.cols_pad = t.cols_pad;
  a.d_k = p.d_k;
  a.d_v = p.d_v;
  a.dv_pad = t.dv_pad;
  a.q = w.q.data();
  const std::size_t tile = (qt.b * p.g + qt.kv) * t.Tc + j;
  a.kt = in.packed.Kt.data() + tile * t.kt_size;
  a.v = in.packed.Vp.data() + tile * t.v_size;
  if (in.chain.has(Stage::dropout))  // the keep mask of these entries, drawn from the seed: the numbers naive draws
    draw_dropout(in.chain, qt.b, qt.hd, qt.r0, qt.rows, c0, cols, t.cols_pad, w.drop.data());
  in.chain.fill(a.score, {.hd = qt.hd,
                          .r0 = qt.r0,
                          .pos_k = at_offset(in.pos_k, j * t.cols_pad),
                          .lo = w.lo.data(),
                          .hi = w.hi.data(),
                          .keep = in.gaps ? w.keep.data() : nullptr,
                          .drop = w.drop.data()});
  a.s = w.s.data();
  a.m = w.m.data();
  a.l = w.l.data();
  a.alpha = w.alpha.data();
  a.o = w.o.data();
  a.row_max = w.row_max.data();
  kernel::flash_tile(o.isa, a);
}

// O_i / l_i once at the end, into the merged layout (B·n, h·d_v), and lse = m + log l; l == 0: nothing to
// attend, zero output, lse -inf.
template <class T>
void finish_query_tile(const FlashInputs<T>& in, const QueryTile& qt, const FlashScratch<T>& w, std::span<T> concat,
                       Tensor<T>& lse) {
  const std::size_t h = in.p.h, n = in.p.n, d_v = in.p.d_v;
  for (std::size_t r = 0; r < qt.rows; ++r) {
    T* out = concat.data() + ((qt.b * n + qt.r0 + r) * h + qt.hd) * d_v;
    const T* acc = w.o.data() + r * in.t.dv_pad;
    if (w.l[r] == 0) {
      std::fill(out, out + d_v, T{0});
      lse(qt.b, qt.hd, qt.r0 + r) = -std::numeric_limits<T>::infinity();
      continue;
    }
    for (std::size_t c = 0; c < d_v; ++c) out[c] = acc[c] / w.l[r];
    lse(qt.b, qt.hd, qt.r0 + r) = w.m[r] + std::log(w.l[r]);
  }
}

// Flash's attention, unwatched: K and V repacked once into tiles (K transposed), then per query tile of
// a head the sweep over key tiles with the online softmax (kernel::flash_tile), O / l once at the end.
// `x` is left as it was (the backward pass reads it); attend_flash lets its K and V go once packed.
// ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 1.
template <class T>
Attended<T> attend_flash_keeping(const Problem& p, const Projected<T>& x, const FastOptions& o,
                                 Projected<T>* release = nullptr) {
  const FlashShape t = flash_shape<T>(p, o);

  // pass 1: pack every key tile transposed and every value tile padded (and let K and V go: the pass
  // holds the packed copies in their place)
  const FlashInputs<T> in(p, t, x, o);
  if (release != nullptr) {
    release->K = kernel::Buffer<T>();
    release->V = kernel::Buffer<T>();
  }

  // pass 2: per query tile of each head, sweep the key tiles with the online softmax, then O / l
  const double work = double(p.B) * double(p.h) * double(p.n) * double(p.m) * double(p.d_k + p.d_v);
  const std::size_t threads =
      std::min(kernel::threads_for(work, o.threads), std::max<std::size_t>(1, p.B * p.h * t.Tr));
  std::vector<FlashScratch<T>> scratch(threads);
  kernel::Buffer<T> concat(p.B * p.n * p.h * p.d_v);  // every element written by finish_query_tile
  Tensor<T> lse({p.B, p.h, p.n});
  kernel::parallel_for(p.B * p.h * t.Tr, threads, [&](std::size_t item, std::size_t worker) {
    FlashScratch<T>& w = scratch[worker];
    w.make(t, p.d_k, in.gaps, p.dropout.has_value());
    const QueryTile qt = query_tile_of(p, t, item);
    start_query_tile(in, qt, w);
    for (std::size_t j = 0; j < t.Tc; ++j) fold_key_tile(in, qt, j, w, o);
    finish_query_tile<T>(in, qt, w, concat, lse);
  });
  const std::size_t score_bytes = threads * t.rows_pad * t.cols_pad * sizeof(T);  // S and P share a tile
  return {std::move(concat), score_bytes, std::move(lse)};
}

template <class T>
Attended<T> attend_flash(const Problem& p, Projected<T> x, const FastOptions& o) {
  return attend_flash_keeping(p, x, o, &x);
}

inline FastOptions checked(FastOptions o, std::string_view who) {
  if (o.tiles.Br == 0 || o.tiles.Bc == 0)
    throw std::invalid_argument(
        fmt::format("{}: tiles of {} × {}: both sides must be >= 1", who, o.tiles.Br, o.tiles.Bc));
  if (o.threads == 0) o.threads = kernel::all_cores();
  return o;
}

}  // namespace fast

// The bytes a fast run of `engine` holds at its peak, from the sizes alone (bench refuses a run over
// its limit by it): the inputs in T (the context only for cross-attention) and the weights, Q, K and V,
// the merged head outputs and the output; naive's one (B, h, n, m) buffer, or flash's packed K and V
// tiles (in place of K and V) and one scratch tile per thread. An upper bound up to the padding.
inline Count fast_engine_bytes(const Problem& p, Engine engine, std::size_t scalar, std::size_t threads) {
  const std::size_t B = p.B, n = p.n, m = p.m;
  Count v = product(B, n, p.d_model);
  if (p.cross) v = checked_add(v, product(B, m, p.d_context));
  v = checked_add(v, product(p.d_model, p.h, p.d_k));
  v = checked_add(v, product(p.d_context, p.g, checked_add(p.d_k, p.d_v)));
  v = checked_add(v, product(p.h, p.d_v, p.d_out));
  v = checked_add(v, product(B, n, p.h, p.d_k));                                 // Q
  v = checked_add(v, product(2, B, m, p.g, checked_add(p.d_k, p.d_v)));          // K, V, and their packed tiles
  v = checked_add(v, product(B, n, checked_add(product(p.h, p.d_v), p.d_out)));  // concat, output
  if (engine == Engine::naive) {
    v = checked_add(v, product(B, p.h, n, m));
  } else {
    // the tile no longer than the sequence (run_flash_fast), its rows and columns padded by at most 16;
    // per row: q, s, o, m, l, alpha and the row's maxima (16 lanes at most)
    const std::size_t Br = std::min(fast_tiles().Br, std::max<std::size_t>(n, 1)) + 16;
    const std::size_t Bc = std::min(fast_tiles().Bc, std::max<std::size_t>(m, 1)) + 16;
    v = checked_add(
        v, product(std::max<std::size_t>(threads, 1), Br, checked_add(checked_add(p.d_k, Bc), p.d_v + 16 + 3 + 16)));
  }
  return checked_mul(v, scalar);
}

// run_fast in its three stages, for whoever times them apart (bench): the projections (pass 1), one
// engine's attention (pass 2), the output projection (pass 3). run_fast is the three in a row.
template <class T>
fast::Projected<T> fast_project(const Problem& p, FastOptions o) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "the fast kernels are float and double");
  return fast::project_all<T>(p, fast::checked(o, "fast_project"));
}

template <class T>
fast::Attended<T> fast_attend(const Problem& p, Engine engine, fast::Projected<T> x, FastOptions o) {
  if (engine == Engine::both) throw std::invalid_argument("fast_attend: one engine at a time, naive or flash");
  o = fast::checked(o, "fast_attend");
  return engine == Engine::naive ? fast::attend_naive<T>(p, std::move(x), o)
                                 : fast::attend_flash<T>(p, std::move(x), o);
}

template <class T>
AttentionResult<T> fast_finish(const Problem& p, fast::Attended<T> a, FastOptions o) {
  o = fast::checked(o, "fast_finish");
  return {fast::output_of(p, a.concat, o), find_empty_rows(p), a.score_bytes, std::move(a.lse)};
}

// Runs `engine` (naive or flash) on the fast path, unwatched, in T (float or double). The engine and the
// tiles are checked before anything is computed.
template <class T>
AttentionResult<T> run_fast(const Problem& p, Engine engine, FastOptions o) {
  if (engine == Engine::both) throw std::invalid_argument("run_fast: one engine at a time, naive or flash");
  o = fast::checked(o, "run_fast");
  return fast_finish<T>(p, fast_attend<T>(p, engine, fast_project<T>(p, o), o), o);
}

}  // namespace attn
