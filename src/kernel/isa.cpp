// The fast path's arithmetic, compiled once per instruction set (CMakeLists.txt): ATTN_ISA names the
// namespace and ATTN_VBYTES the vector width, 16 bytes for the baseline, 32 for AVX2 + FMA, 64 for
// AVX-512. Explicit SIMD through GCC's vector extensions (also clang's): a Vec holds ATTN_VBYTES of T,
// and each operator on it is one instruction of the target, or two for a width the target splits.
//
// Why this file uses no template or inline function of any library: a copy instantiated here would
// be compiled for this file's instruction set, and the linker may keep that copy for the whole
// program, which then runs it on a processor without those instructions. So everything here is its
// own, in an anonymous namespace, on raw pointers that kernels.cpp hands over.

#include <cstddef>
#include <cstdint>

#include "kernel/args.hpp"
#include "kernel/simd.hpp"

namespace attn::kernel::ATTN_ISA {

namespace {

// ------------------------------------------------------------------------------------------------- gemm
// Compiled in the baseline's copy alone, and only where BLIS does not do the products (ATTN_OWN_GEMM,
// CMakeLists.txt): the explorer's WebAssembly core, or a build with -DATTN_BLIS=OFF.
#if defined(ATTN_OWN_GEMM)

// Packs `count` lines of a strided matrix, kc steps along each, into panels of `width` lines, k-major:
// out[panel][k][l] = src[(panel·width + l)·line + k·step], zero past the last line. A's rows make panels
// of MR, B's columns panels of NR.
template <class T>
void pack_panels(const T* src, std::ptrdiff_t line, std::ptrdiff_t step, std::size_t count, std::size_t kc,
                 std::size_t width, T* out) {
  for (std::size_t p0 = 0; p0 < count; p0 += width) {
    const std::size_t lines = least(width, count - p0);
    for (std::size_t k = 0; k < kc; ++k) {
      const T* from = src + static_cast<std::ptrdiff_t>(p0) * line + static_cast<std::ptrdiff_t>(k) * step;
      for (std::size_t l = 0; l < lines; ++l) out[k * width + l] = from[static_cast<std::ptrdiff_t>(l) * line];
      for (std::size_t l = lines; l < width; ++l) out[k * width + l] = 0;
    }
    out += kc * width;
  }
}

// A's rows [i0, i0 + mc) and columns [k0, k0 + kc), in panels of MR rows.
template <class T>
void pack_a(const GemmArgs<T>& g, std::size_t i0, std::size_t mc, std::size_t k0, std::size_t kc, T* ap) {
  const T* at = g.a + static_cast<std::ptrdiff_t>(i0) * g.a_row + static_cast<std::ptrdiff_t>(k0) * g.a_col;
  pack_panels(at, g.a_row, g.a_col, mc, kc, static_cast<std::size_t>(MR), ap);
}

// B's rows [k0, k0 + kc) and columns [j0, j0 + nc), in panels of NR = NV·W columns.
template <class T>
void pack_b(const GemmArgs<T>& g, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t nc, T* bp) {
  const T* at = g.b + static_cast<std::ptrdiff_t>(k0) * g.b_row + static_cast<std::ptrdiff_t>(j0) * g.b_col;
  pack_panels(at, g.b_col, g.b_row, nc, kc, std::size_t{NV * W<T>}, bp);
}

// C_tile = (C_tile +) A_panel · B_panel: MR × NR accumulators held in registers over kc.
template <class T>
void gemm_micro(std::size_t kc, const T* ap, const T* bp, T* c, std::ptrdiff_t c_row, std::size_t rows,
                std::size_t cols, bool add) {
  using V = Vec<T>;
  constexpr std::size_t NR = NV * W<T>;
  V acc[MR][NV] = {};
  fma_block<T, MR, NV>(acc, kc, ap, 1, MR, bp, NR);
  if (rows == static_cast<std::size_t>(MR) && cols == NR) {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) {
        T* dst = c + r * c_row + v * W<T>;
        store(dst, add ? load(dst) + acc[r][v] : acc[r][v]);
      }
    return;
  }
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) {
      T* dst = c + static_cast<std::ptrdiff_t>(r) * c_row + static_cast<std::ptrdiff_t>(j);
      const T x = acc[r][j / W<T>][j % W<T>];
      *dst = add ? *dst + x : x;
    }
}

// GotoBLAS's loops: per NC columns of B and KC of the inner axis, pack B once; per MC rows of A, pack A
// once; then every MR × NR tile of C from the two packed panels.
template <class T>
void gemm_impl(const GemmArgs<T>& g) {
  constexpr std::size_t NR = NV * W<T>;
  T* ap = g.a_pack;
  T* bp = g.b_pack;
  for (std::size_t j0 = 0; j0 < g.N; j0 += NC) {
    const std::size_t nc = least(NC, g.N - j0);
    for (std::size_t k0 = 0; k0 < g.K || k0 == 0; k0 += KC) {
      const std::size_t kc = least(KC, g.K - k0);
      const bool add = g.accumulate || k0 > 0;
      pack_b(g, k0, kc, j0, nc, bp);
      for (std::size_t i0 = 0; i0 < g.M; i0 += MC) {
        const std::size_t mc = least(MC, g.M - i0);
        pack_a(g, i0, mc, k0, kc, ap);
        for (std::size_t jr = 0; jr < nc; jr += NR)
          for (std::size_t ir = 0; ir < mc; ir += MR)
            gemm_micro(kc, ap + ir * kc, bp + jr * kc, g.c + static_cast<std::ptrdiff_t>(i0 + ir) * g.c_row + (j0 + jr),
                       g.c_row, least(MR, mc - ir), least(NR, nc - jr), add);
      }
      if (g.K == 0) break;
    }
  }
  if (g.bias != nullptr)
    for (std::size_t i = 0; i < g.M; ++i) {
      T* row = g.c + static_cast<std::ptrdiff_t>(i) * g.c_row;
      for (std::size_t j = 0; j < g.N; ++j) row[j] += g.bias[j];
    }
}
#endif  // ATTN_OWN_GEMM

// ------------------------------------------------------------------------------------------------ flash

// S[r][c..] = Q[r]·Kt[.][c..] for R rows and NVC vectors of columns, and row_max[r] = the lanes' maxima
// of it and of what row_max[r] held.
// S[r][c] = Σ_e Q[r][e] · Kt[e][c]
// Out of line, as pv_block: inlined into flash_tile_impl, pass 1 took 8% longer (Intel Xeon, AVX-512).
template <class T, int R, int NVC>
__attribute__((noinline)) void score_block(std::size_t d_k, const T* q, const T* kt, std::size_t cols_pad, T* s,
                                           T* row_max) {
  // every loop over the accumulators unrolled whole, so that they live in registers alone (rolled, GCC
  // kept the array on the stack: zeroed there first, then copied out through it)
  Vec<T> acc[R][NVC];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NVC; ++v) acc[r][v] = Vec<T>{};
  fma_block<T, R, NVC>(acc, d_k, q, d_k, 1, kt, cols_pad);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NVC; ++v)
      store(s + static_cast<std::size_t>(r) * cols_pad + static_cast<std::size_t>(v * W<T>), acc[r][v]);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    Vec<T> most = load(row_max + static_cast<std::size_t>(r) * W<T>);
#pragma GCC unroll 4
    for (int v = 0; v < NVC; ++v) most = most > acc[r][v] ? most : acc[r][v];
    store(row_max + static_cast<std::size_t>(r) * W<T>, most);
  }
}

// O[r][c..] = alpha[r]·O[r][c..] + Σ_j P[r][j]·V[j][c..] for R rows and NVC vectors of O's columns, over
// `cols` keys; without alpha, O[r][c..] + Σ_j ... (a later span of the same keys).
template <class T, int R, int NVC>
__attribute__((noinline)) void pv_block(std::size_t cols, const T* p, std::size_t cols_pad, const T* v,
                                        std::size_t dv_pad, const T* alpha, T* o) {
  Vec<T> acc[R][NVC];  // unrolled whole, as in score_block
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < NVC; ++x) {
      acc[r][x] = load(o + static_cast<std::size_t>(r) * dv_pad + static_cast<std::size_t>(x * W<T>));
      if (alpha != nullptr) acc[r][x] = acc[r][x] * alpha[r];
    }
  fma_block<T, R, NVC>(acc, cols, p, cols_pad, 1, v, dv_pad);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < NVC; ++x)
      store(o + static_cast<std::size_t>(r) * dv_pad + static_cast<std::size_t>(x * W<T>), acc[r][x]);
}

// Pass 2 of a tile for row r: the online softmax (online_softmax.hpp), P in place of S over the columns
// [0, used_pad). Returns the row's new max m_new, and P's row sum in `row_sum`; -inf and 0 for a row with
// nothing to attend yet (P = 0) and for a padded one. fold_rows then updates m, l and alpha.
template <class T>
T online_softmax_row(const FlashTileArgs<T>& a, std::size_t r, std::size_t used_pad, T& row_sum) {
  using V = Vec<T>;
  constexpr std::size_t w = W<T>;
  T* row = a.s + r * a.cols_pad;
  row_sum = 0;
  if (r >= a.rows) {  // a padded row: P = 0 leaves its O at 0
    for (std::size_t c = 0; c < used_pad; c += w) store(row + c, V{});
    return minus_inf<T>();
  }
  const T* keep = a.score.keep != nullptr ? a.score.keep + r * a.cols_pad : nullptr;
  // S = Q·Kᵀ through the score chain's stages, -inf where the mask forbids; with the scale alone (a row
  // that keeps every column of the tile, nothing added, the common case) and a positive scale, the scaling
  // waits for the exp below: max(S·scale) = max(S)·scale, from the maxima pass 1 took as it computed S
  const bool plain = scale_only(a.score, r, used_pad, keep) && a.score.scale > 0;
  const V running = plain ? load(a.row_max + r * w) * a.score.scale : score_lanes<T>(row, used_pad, a.score, r, keep);
  const T m_prev = a.m[r];
  const T row_max = lane_max<T>(running);
  const T m_new = row_max > m_prev ? row_max : m_prev;
  if (m_new == minus_inf<T>()) {  // nothing to attend yet: the state stays (0, 0)
    for (std::size_t c = 0; c < used_pad; c += w) store(row + c, V{});
    return m_new;
  }
  V sum{};
  if (plain) {  // exp(S·scale - m_new), the scaling and the subtraction one multiply-add
    V sum2{};
    std::size_t c = 0;
    for (; c + 2 * w <= used_pad; c += 2 * w) {
      const V p0 = exp_nonpositive<T>(load(row + c) * a.score.scale - m_new);
      const V p1 = exp_nonpositive<T>(load(row + c + w) * a.score.scale - m_new);
      store(row + c, p0);
      store(row + c + w, p1);
      sum += p0;
      sum2 += p1;
    }
    for (; c < used_pad; c += w) {
      const V p = exp_nonpositive<T>(load(row + c) * a.score.scale - m_new);
      store(row + c, p);
      sum += p;
    }
    sum += sum2;
  } else {
    for (std::size_t c = 0; c < used_pad; c += w) {
      const V p = exp_nonpositive<T>(load(row + c) - m_new);  // subtracting the max is so exp never overflows
      store(row + c, p);
      sum += p;
    }
  }
  row_sum = lane_sum<T>(sum);
  return m_new;
}

// The running state of rows [r0, r0 + count) (all below a.rows) from their new maxima and P's row sums,
// a vector of rows at a time, off the rows' own critical path: alpha = exp(m_prev - m_new), the factor
// for what earlier tiles summed against a smaller max (0 from m_prev = -inf, 1 while m_new is still
// -inf); l = alpha·l + sum; m = m_new.
template <class T>
void fold_rows(const FlashTileArgs<T>& a, std::size_t r0, std::size_t count, const T* m_new, const T* sums) {
  using V = Vec<T>;
  constexpr std::size_t w = W<T>;
  struct Folded {
    V alpha, l;
  };
  const auto fold = [](V m_prev, V m, V l, V sum) {
    const V alpha = m == minus_inf<T>() ? splat(T{1}) : exp_nonpositive<T>(m_prev - m);
    return Folded{alpha, alpha * l + sum};
  };
  std::size_t i = 0;
  for (; i + w <= count; i += w) {
    const std::size_t r = r0 + i;
    const V m = load(m_new + i);
    const auto [alpha, l] = fold(load(a.m + r), m, load(a.l + r), load(sums + i));
    store(a.alpha + r, alpha);
    store(a.l + r, l);
    store(a.m + r, m);
  }
  for (; i < count; ++i) {
    const std::size_t r = r0 + i;
    const auto [alpha, l] = fold(splat(a.m[r]), splat(m_new[i]), splat(a.l[r]), splat(sums[i]));
    a.alpha[r] = alpha[0];
    a.l[r] = l[0];
    a.m[r] = m_new[i];
  }
}

constexpr std::size_t fold_block = 64;  // rows whose state fold_rows updates at once

template <class T>
void flash_tile_impl(const FlashTileArgs<T>& a) {
  constexpr std::size_t w = W<T>;
  // The columns some row keeps: past the last one nothing is computed (most of a causal mask's tile
  // on the diagonal).
  std::int64_t last = 0;
  for (std::size_t r = 0; r < a.rows; ++r) last = a.score.hi[r] > last ? a.score.hi[r] : last;
  const auto used = static_cast<std::size_t>(last);     // <= cols
  const std::size_t used_pad = (used + w - 1) / w * w;  // <= cols_pad
  // pass 1: S = Q_i·K_jᵀ, register blocks of SR rows × SNV vectors of keys; each block of keys' columns
  // of Kᵀ (d_k × SNV vectors) stays in L1 while every block of rows reads it. The rows' maxima are taken
  // on the way (row_max), which spared pass 2 a read of the whole tile per row.
  for (std::size_t i = 0; i < a.rows_pad * w; i += w) store(a.row_max + i, splat(minus_inf<T>()));
  for (std::size_t c0 = 0; c0 < used_pad;) {
    const bool whole = c0 + SNV * w <= used_pad;
    for (std::size_t r0 = 0; r0 < a.rows_pad; r0 += SR) {
      const T* q = a.q + r0 * a.d_k;
      T* s = a.s + r0 * a.cols_pad + c0;
      T* row_max = a.row_max + r0 * w;
      if (whole) score_block<T, SR, SNV>(a.d_k, q, a.kt + c0, a.cols_pad, s, row_max);
      else score_block<T, SR, 1>(a.d_k, q, a.kt + c0, a.cols_pad, s, row_max);
    }
    c0 += whole ? SNV * w : w;
  }

  // pass 2: the online softmax of each row, P in place of S, and the rows' state in blocks of rows
  for (std::size_t r0 = 0; r0 < a.rows_pad; r0 += fold_block) {
    T m_new[fold_block], sums[fold_block];
    const std::size_t count = least(a.rows_pad - r0, fold_block);
    for (std::size_t i = 0; i < count; ++i) m_new[i] = online_softmax_row(a, r0 + i, used_pad, sums[i]);
    const std::size_t real = a.rows > r0 ? least(a.rows - r0, count) : 0;
    fold_rows(a, r0, real, m_new, sums);
    for (std::size_t i = real; i < count; ++i) a.alpha[r0 + i] = 1;  // padded rows: O stays 0
  }

  // dropout: P·V reads P ⊙ drop, while l summed P (the softmax's denominator)
  if (a.score.drop != nullptr)
    for (std::size_t r = 0; r < a.rows; ++r) {
      T* row = a.s + r * a.cols_pad;
      const T* drop = a.score.drop + r * a.cols_pad;
      for (std::size_t c = 0; c < used_pad; c += w) store(row + c, load(row + c) * load(drop + c));
    }

  // pass 3: O = diag(alpha)·O + P·V, register blocks of RO rows × up to NVO vectors of O's columns, the
  // keys in spans whose rows of V stay in L1 while every block of rows reads them (alpha on the first):
  // the sums run in the same order as over all the keys at once
  const std::size_t span = pv_span<T>(a.dv_pad);
  std::size_t k0 = 0;
  do {  // at least once: with no key used, O is still scaled by alpha
    const std::size_t keys = least(used - k0, span);
    const T* v = a.v + k0 * a.dv_pad;
    for (std::size_t r0 = 0; r0 < a.rows_pad; r0 += RO) {
      const T* p = a.s + r0 * a.cols_pad + k0;
      const T* alpha = k0 == 0 ? a.alpha + r0 : nullptr;
      T* o = a.o + r0 * a.dv_pad;
      std::size_t c0 = 0;
      for (; c0 + NVO * w <= a.dv_pad; c0 += NVO * w)
        pv_block<T, RO, NVO>(keys, p, a.cols_pad, v + c0, a.dv_pad, alpha, o + c0);
      for (; c0 < a.dv_pad; c0 += w) pv_block<T, RO, 1>(keys, p, a.cols_pad, v + c0, a.dv_pad, alpha, o + c0);
    }
    k0 += span;
  } while (k0 < used);
}

template <class T>
Layout layout_impl() {
  return {static_cast<std::size_t>(W<T>),
          static_cast<std::size_t>(MR),
          NV * static_cast<std::size_t>(W<T>),
          MC,
          KC,
          NC,
          CB<T>};
}

}  // namespace

Layout layout_of(float) { return layout_impl<float>(); }
Layout layout_of(double) { return layout_impl<double>(); }
#if defined(ATTN_OWN_GEMM)
void gemm(const GemmArgs<float>& g) { gemm_impl(g); }
void gemm(const GemmArgs<double>& g) { gemm_impl(g); }
#endif
void flash_tile(const FlashTileArgs<float>& a) { flash_tile_impl(a); }
void flash_tile(const FlashTileArgs<double>& a) { flash_tile_impl(a); }

}  // namespace attn::kernel::ATTN_ISA
