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

#ifndef ATTN_ISA
#define ATTN_ISA baseline
#endif
#ifndef ATTN_VBYTES
#define ATTN_VBYTES 16
#endif

namespace attn::kernel::ATTN_ISA {

namespace {

// Register blocking, per vector width. A wider machine has 32 vector registers (AVX-512), the others 16:
// each block of accumulators leaves room for the operands it loads.
//   gemm and S = Q·Kᵀ: MR rows × 2 vectors of accumulators;  O += P·V: RO rows × 4 vectors.
constexpr int wide = ATTN_VBYTES >= 64 ? 1 : 0;
constexpr int MR = wide != 0 ? 12 : 6;
constexpr int NV = 2;
constexpr int RO = wide != 0 ? 6 : 3;
constexpr int NVO = 4;
static_assert(MR % RO == 0, "a query tile's rows are padded to MR, which must hold whole blocks of RO");

// gemm's cache blocking: a KC × NR panel of B stays in L1 while MC × KC of A stays in L2.
constexpr std::size_t KC = 256;
constexpr std::size_t MC = static_cast<std::size_t>(MR) * 8;
constexpr std::size_t NC = 2048;

template <class T>
struct Simd;
template <>
struct Simd<float> {
  using V = float __attribute__((vector_size(ATTN_VBYTES)));
  using I = std::int32_t __attribute__((vector_size(ATTN_VBYTES)));
};
template <>
struct Simd<double> {
  using V = double __attribute__((vector_size(ATTN_VBYTES)));
  using I = std::int64_t __attribute__((vector_size(ATTN_VBYTES)));
};

template <class T>
constexpr int W = static_cast<int>(ATTN_VBYTES / sizeof(T));  // lanes

template <class T>
using Vec = typename Simd<T>::V;

template <class T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(T* p, Vec<T> v) {
  __builtin_memcpy(p, &v, sizeof v);
}
template <class T>
inline Vec<T> splat(T x) {
  return Vec<T>{} + x;
}
template <class T>
inline Vec<T> iota() {
  Vec<T> v{};
  for (int k = 0; k < W<T>; ++k) v[k] = static_cast<T>(k);
  return v;
}
template <class T>
inline T lane_max(Vec<T> v) {
  T x = v[0];
  for (int k = 1; k < W<T>; ++k) x = v[k] > x ? v[k] : x;
  return x;
}
template <class T>
inline T lane_sum(Vec<T> v) {
  T x = v[0];
  for (int k = 1; k < W<T>; ++k) x += v[k];
  return x;
}
template <class T>
inline T minus_inf() {
  return -__builtin_inf();
}
inline std::size_t least(std::size_t a, std::size_t b) { return a < b ? a : b; }

// exp of every lane of x in [lowest, highest]: x = k·ln 2 + r with |r| <= ln 2 / 2, exp(r) by a
// polynomial, then times 2^k, put into the exponent bits as two factors 2^(k/2)·2^(k - k/2) so that a
// result below the smallest normal number comes out subnormal, as std::exp gives it.
// ref: Cephes expf (degree-6 minimax) and, for double, the Taylor series of exp(r) to r^13 (its
// remainder is below 2^-60 for |r| <= ln 2 / 2).
inline Vec<float> exp_reduced(Vec<float> x) {
  using V = Vec<float>;
  using I = Simd<float>::I;
  const V magic = splat(12582912.0f);  // 1.5·2^23: adding and taking it away rounds to a whole number
  const V k = (x * 1.44269504088896341f + magic) - magic;
  V r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  V p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I whole = __builtin_convertvector(k, I), half = whole >> 1;
  return p * __builtin_bit_cast(V, (half + 127) << 23) * __builtin_bit_cast(V, (whole - half + 127) << 23);
}

inline Vec<double> exp_reduced(Vec<double> x) {
  using V = Vec<double>;
  using I = Simd<double>::I;
  const V magic = splat(6755399441055744.0);  // 1.5·2^52
  const V k = (x * 1.4426950408889634 + magic) - magic;
  V r = x - k * 6.93147180369123816490e-01;
  r = r - k * 1.90821492927058770002e-10;
  // Σ r^i / i!, i = 0 .. 13, by Horner's rule
  V p = splat(1.0 / 6227020800.0);
  const double inverse_factorials[] = {
      1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0,
      1.0 / 120.0,       1.0 / 24.0,       1.0 / 6.0,       1.0 / 2.0,      1.0,           1.0};
  for (const double c : inverse_factorials) p = p * r + c;
  const I whole = __builtin_convertvector(k, I), half = whole >> 1;
  return p * __builtin_bit_cast(V, (half + 1023) << 52) * __builtin_bit_cast(V, (whole - half + 1023) << 52);
}

// Below these exp rounds to 0 (half the smallest subnormal), above them it is inf.
template <class T>
struct ExpRange;
template <>
struct ExpRange<float> {
  static constexpr float lowest = -104.0f, highest = 88.72283f;
};
template <>
struct ExpRange<double> {
  static constexpr double lowest = -746.0, highest = 709.782712893384;
};

// exp of every lane for x <= 0 (or -inf, or NaN), all that a softmax asks once the max is taken out:
// the overflow side needs no check; exp(-inf) = 0 exactly, as a masked score needs.
template <class T>
inline Vec<T> exp_nonpositive(Vec<T> x) {
  const Vec<T> lowest = splat(ExpRange<T>::lowest);
  const Vec<T> y = exp_reduced(x < lowest ? lowest : x);
  return x < lowest ? Vec<T>{} : y;
}

// exp of every lane.
template <class T>
inline Vec<T> exp_lanes(Vec<T> x) {
  const Vec<T> highest = splat(ExpRange<T>::highest);
  const Vec<T> y = exp_nonpositive<T>(x > highest ? highest : x);
  return x > highest ? splat(static_cast<T>(__builtin_inf())) : y;
}

template <class T>
inline T exp_one(T x) {
  return exp_lanes<T>(splat(x))[0];
}

// c·tanh(x/c) of every lane (c > 0): tanh|y| = (1 - e)/(1 + e) with e = exp(-2|y|) <= 1, then the sign
// put back. Near 0 the difference 1 - e costs relative accuracy, not absolute: the capped score is off
// by a few u·c at most, which compare's noise floor allows (engine/compare.hpp, score_error).
template <class T>
inline Vec<T> softcap_lanes(Vec<T> x, T c) {
  const Vec<T> y = x / c;
  const Vec<T> a = y < 0 ? -y : y;
  const Vec<T> e = exp_nonpositive<T>(a * T{-2});
  const Vec<T> t = (T{1} - e) / (T{1} + e);
  return (y < 0 ? -t : t) * c;
}

template <class T>
inline T softcap_one(T x, T c) {
  return softcap_lanes<T>(splat(x), c)[0];
}

// ------------------------------------------------------------------------------------------------- gemm

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

// The one register-blocked loop every product here runs: R rows × NVC vectors of accumulators, over K
// steps, each step a broadcast of A's value of every row times NVC vectors of B's row.
// acc[r][v] += Σ_k A[r·a_row + k·a_step] · B[k·b_step + v·W .. + W)
template <class T, int R, int NVC>
inline void fma_block(Vec<T> (&acc)[R][NVC], std::size_t K, const T* a, std::size_t a_row, std::size_t a_step,
                      const T* b, std::size_t b_step) {
  using V = Vec<T>;
  for (std::size_t k = 0; k < K; ++k) {
    V bv[NVC];
#pragma GCC unroll 4
    for (int v = 0; v < NVC; ++v) bv[v] = load(b + k * b_step + static_cast<std::size_t>(v * W<T>));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V av = splat(a[static_cast<std::size_t>(r) * a_row + k * a_step]);
#pragma GCC unroll 4
      for (int v = 0; v < NVC; ++v) acc[r][v] += av * bv[v];
    }
  }
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

// ------------------------------------------------------------------------------------------------ flash

// S[r][c..] = Q[r]·Kt[.][c..] for R rows and NVC vectors of columns.
// S[r][c] = Σ_e Q[r][e] · Kt[e][c]
template <class T, int R, int NVC>
void score_block(std::size_t d_k, const T* q, const T* kt, std::size_t cols_pad, T* s) {
  Vec<T> acc[R][NVC] = {};
  fma_block<T, R, NVC>(acc, d_k, q, d_k, 1, kt, cols_pad);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NVC; ++v)
      store(s + static_cast<std::size_t>(r) * cols_pad + static_cast<std::size_t>(v * W<T>), acc[r][v]);
}

// O[r][c..] = alpha[r]·O[r][c..] + Σ_j P[r][j]·V[j][c..] for R rows and NVC vectors of O's columns.
template <class T, int R, int NVC>
void pv_block(std::size_t cols, const T* p, std::size_t cols_pad, const T* v, std::size_t dv_pad, const T* alpha,
              T* o) {
  Vec<T> acc[R][NVC];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NVC; ++x)
      acc[r][x] = load(o + static_cast<std::size_t>(r) * dv_pad + static_cast<std::size_t>(x * W<T>)) * alpha[r];
  fma_block<T, R, NVC>(acc, cols, p, cols_pad, 1, v, dv_pad);
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NVC; ++x)
      store(o + static_cast<std::size_t>(r) * dv_pad + static_cast<std::size_t>(x * W<T>), acc[r][x]);
}

// Which lanes of the columns [c, c + W) row r keeps: inside [lo, hi), and where keep is not 0.
template <class T>
inline auto kept_lanes(const Vec<T>& columns, T lo, T hi, const T* keep) {
  auto in = (columns >= lo) & (columns < hi);
  if (keep != nullptr) in = in & (load(keep) != 0);
  return in;
}

// S'[c] = S[c]·scale (capped to c·tanh(S'/c) when softcap > 0) + bias, -inf where row r's mask forbids,
// in place over the whole vectors of [0, end); ALiBi's bias -slope·(pos_q - pos_k[c]) when pos_k is
// given. Returns the lanes' running max.
template <class T>
inline Vec<T> scale_bias_mask(T* row, std::size_t end, T scale, T softcap, T slope, T pos_q, const T* pos_k, T lo, T hi,
                              const T* keep) {
  using V = Vec<T>;
  constexpr std::size_t w = W<T>;
  const V lanes = iota<T>();
  V running = splat(minus_inf<T>());
  for (std::size_t c = 0; c < end; c += w) {
    V x = load(row + c) * scale;
    if (softcap > 0) x = softcap_lanes<T>(x, softcap);
    if (pos_k != nullptr) x = x + -slope * (pos_q - load(pos_k + c));
    const auto in = kept_lanes<T>(lanes + static_cast<T>(c), lo, hi, keep != nullptr ? keep + c : nullptr);
    x = in ? x : splat(minus_inf<T>());
    store(row + c, x);
    running = running > x ? running : x;
  }
  return running;
}

template <class T>
void flash_tile_impl(const FlashTileArgs<T>& a) {
  using V = Vec<T>;
  constexpr std::size_t w = W<T>;
  // The columns some row keeps: past the last one nothing is computed (most of a causal mask's tile
  // on the diagonal).
  std::int64_t last = 0;
  for (std::size_t r = 0; r < a.rows; ++r) last = a.hi[r] > last ? a.hi[r] : last;
  const auto used = static_cast<std::size_t>(last);     // <= cols
  const std::size_t used_pad = (used + w - 1) / w * w;  // <= cols_pad
  // pass 1: S = Q_i·K_jᵀ, register blocks of MR rows × NV vectors of keys
  for (std::size_t r0 = 0; r0 < a.rows_pad; r0 += MR) {
    std::size_t c0 = 0;
    for (; c0 + NV * w <= used_pad; c0 += NV * w)
      score_block<T, MR, NV>(a.d_k, a.q + r0 * a.d_k, a.kt + c0, a.cols_pad, a.s + r0 * a.cols_pad + c0);
    for (; c0 < used_pad; c0 += w)
      score_block<T, MR, 1>(a.d_k, a.q + r0 * a.d_k, a.kt + c0, a.cols_pad, a.s + r0 * a.cols_pad + c0);
  }

  // pass 2: the online softmax of each row (online_softmax.hpp), P in place of S
  for (std::size_t r = 0; r < a.rows_pad; ++r) {
    T* row = a.s + r * a.cols_pad;
    if (r >= a.rows) {  // a padded row: P = 0 leaves its O at 0
      for (std::size_t c = 0; c < used_pad; c += w) store(row + c, V{});
      a.alpha[r] = 1;
      continue;
    }
    const T lo = static_cast<T>(a.lo[r]), hi = static_cast<T>(a.hi[r]);
    const T* keep = a.keep != nullptr ? a.keep + r * a.cols_pad : nullptr;
    // S = Q·Kᵀ·scale + bias, -inf where the mask forbids; a row that keeps every column of the tile
    // (the common case) skips the mask's lanes
    const bool whole = keep == nullptr && a.lo[r] == 0 && static_cast<std::size_t>(a.hi[r]) == used_pad;
    V running = splat(minus_inf<T>());
    if (whole && a.pos_q == nullptr && a.softcap == 0) {
      for (std::size_t c = 0; c < used_pad; c += w) {
        const V x = load(row + c) * a.scale;
        store(row + c, x);
        running = running > x ? running : x;
      }
    } else {
      running = scale_bias_mask<T>(row, used_pad, a.scale, a.softcap, a.slope, a.pos_q != nullptr ? a.pos_q[r] : T{0},
                                   a.pos_q != nullptr ? a.pos_k : nullptr, lo, hi, keep);
    }
    const T m_prev = a.m[r];
    const T row_max = lane_max<T>(running);
    const T m_new = row_max > m_prev ? row_max : m_prev;
    if (m_new == minus_inf<T>()) {  // nothing to attend yet: the state stays (0, 0)
      for (std::size_t c = 0; c < used_pad; c += w) store(row + c, V{});
      a.alpha[r] = 1;
      continue;
    }
    // alpha: earlier tiles were summed against a smaller max (m_prev = -inf gives 0)
    const T alpha = exp_one(m_prev - m_new);
    V sum{};
    for (std::size_t c = 0; c < used_pad; c += w) {
      const V p = exp_nonpositive<T>(load(row + c) - m_new);  // subtracting the max is so exp never overflows
      store(row + c, p);
      sum += p;
    }
    a.m[r] = m_new;
    a.l[r] = alpha * a.l[r] + lane_sum<T>(sum);
    a.alpha[r] = alpha;
  }

  // dropout: P·V reads P ⊙ drop, while l summed P (the softmax's denominator)
  if (a.drop != nullptr)
    for (std::size_t r = 0; r < a.rows; ++r) {
      T* row = a.s + r * a.cols_pad;
      const T* drop = a.drop + r * a.cols_pad;
      for (std::size_t c = 0; c < used_pad; c += w) store(row + c, load(row + c) * load(drop + c));
    }

  // pass 3: O = diag(alpha)·O + P·V, register blocks of RO rows × up to NVO vectors of O's columns
  for (std::size_t r0 = 0; r0 < a.rows_pad; r0 += RO) {
    const T* p = a.s + r0 * a.cols_pad;
    T* o = a.o + r0 * a.dv_pad;
    std::size_t c0 = 0;
    for (; c0 + NVO * w <= a.dv_pad; c0 += NVO * w)
      pv_block<T, RO, NVO>(used, p, a.cols_pad, a.v + c0, a.dv_pad, a.alpha + r0, o + c0);
    for (; c0 < a.dv_pad; c0 += w) pv_block<T, RO, 1>(used, p, a.cols_pad, a.v + c0, a.dv_pad, a.alpha + r0, o + c0);
  }
}

// --------------------------------------------------------------------------------------- flash backward

// A key tile's padded columns are a multiple of CB: whole vectors, and whole blocks of RO rows when dK and
// dV are summed with the keys as rows.
constexpr std::size_t gcd(std::size_t a, std::size_t b) { return b == 0 ? a : gcd(b, a % b); }
template <class T>
constexpr std::size_t CB = static_cast<std::size_t>(W<T>) / gcd(W<T>, RO) * static_cast<std::size_t>(RO);

// C[r][c..] (+)= Σ_k A[r·a_row + k·a_step] · B[k·b_step + c..] for R rows × NVC vectors of C's columns.
template <class T, int R, int NVC>
void product_block(std::size_t K, const T* a, std::size_t a_row, std::size_t a_step, const T* b, std::size_t b_step,
                   T* c, std::size_t c_row, bool add) {
  Vec<T> acc[R][NVC];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NVC; ++x)
      acc[r][x] = add ? load(c + static_cast<std::size_t>(r) * c_row + static_cast<std::size_t>(x * W<T>)) : Vec<T>{};
  fma_block<T, R, NVC>(acc, K, a, a_row, a_step, b, b_step);
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NVC; ++x)
      store(c + static_cast<std::size_t>(r) * c_row + static_cast<std::size_t>(x * W<T>), acc[r][x]);
}

// C = A·B (add: C += A·B) for `rows` rows (a multiple of R) and `cols` columns (a multiple of W), in
// register blocks of R rows × NVC vectors, then single vectors for the rest of the columns.
// C[r][c] (+)= Σ_k A[r·a_row + k·a_step] · B[k·b_step + c]
template <class T, int R, int NVC>
void product_rows(std::size_t rows, std::size_t cols, std::size_t K, const T* a, std::size_t a_row, std::size_t a_step,
                  const T* b, std::size_t b_step, T* c, std::size_t c_row, bool add) {
  constexpr std::size_t w = W<T>;
  for (std::size_t r0 = 0; r0 < rows; r0 += R) {
    const T* ar = a + r0 * a_row;
    T* cr = c + r0 * c_row;
    std::size_t c0 = 0;
    for (; c0 + NVC * w <= cols; c0 += NVC * w)
      product_block<T, R, NVC>(K, ar, a_row, a_step, b + c0, b_step, cr + c0, c_row, add);
    for (; c0 < cols; c0 += w) product_block<T, R, 1>(K, ar, a_row, a_step, b + c0, b_step, cr + c0, c_row, add);
  }
}

// P = exp(S·scale + bias - lse) and dS = P ⊙ (dP - D)·scale for row r, in place over [0, span): S and
// dP in, P and dS out. Masked columns give exp(-inf) = 0, so P and dS are 0 there. With softcap the
// scores are capped before the bias and dS also carries the cap's slope 1 - (S_c/c)², S_c read back
// from the biased score (clamped to ±c, so a masked -inf gives slope 0, not NaN).
template <class T>
void weights_and_score_gradient(const FlashBackwardTileArgs<T>& a, std::size_t r, std::size_t span) {
  using V = Vec<T>;
  constexpr std::size_t w = W<T>;
  T* p = a.p + r * a.cols_pad;
  T* ds = a.ds + r * a.cols_pad;
  const T* keep = a.keep != nullptr ? a.keep + r * a.cols_pad : nullptr;
  const bool whole = keep == nullptr && a.lo[r] == 0 && static_cast<std::size_t>(a.hi[r]) == span;
  if (whole && a.pos_q == nullptr && a.softcap == 0) {
    for (std::size_t c = 0; c < span; c += w) store(p + c, load(p + c) * a.scale);
  } else {
    scale_bias_mask<T>(p, span, a.scale, a.softcap, a.slope, a.pos_q != nullptr ? a.pos_q[r] : T{0},
                       a.pos_q != nullptr ? a.pos_k : nullptr, static_cast<T>(a.lo[r]), static_cast<T>(a.hi[r]), keep);
  }
  // S - lse <= 0 up to rounding: the weights the forward normalised, without an n × m matrix kept
  const T lse = a.lse[r], D = a.D[r];
  if (a.softcap > 0) {
    const T c_cap = a.softcap, pos_q = a.pos_q != nullptr ? a.pos_q[r] : T{0};
    for (std::size_t c = 0; c < span; c += w) {
      const V x = load(p + c);
      V capped = a.pos_q != nullptr ? x - -a.slope * (pos_q - load(a.pos_k + c)) : x;
      capped = capped > c_cap ? splat(c_cap) : capped;
      capped = capped < -c_cap ? splat(-c_cap) : capped;
      const V t = capped / c_cap;
      const V weight = exp_nonpositive<T>(x - lse);
      store(p + c, weight);
      store(ds + c, weight * (load(ds + c) - D) * (T{1} - t * t) * a.scale);
    }
    return;
  }
  for (std::size_t c = 0; c < span; c += w) {
    const V weight = exp_nonpositive<T>(load(p + c) - lse);
    store(p + c, weight);
    store(ds + c, weight * (load(ds + c) - D) * a.scale);
  }
}

template <class T>
void flash_backward_tile_impl(const FlashBackwardTileArgs<T>& a) {
  // The columns some row keeps, padded to whole blocks: past them P and dS are 0 (most of a causal
  // mask's tile on the diagonal), and nothing is computed.
  std::int64_t last = 0;
  for (std::size_t r = 0; r < a.rows; ++r) last = a.hi[r] > last ? a.hi[r] : last;
  const std::size_t span = least(a.cols_pad, (static_cast<std::size_t>(last) + CB<T> - 1) / CB<T> * CB<T>);

  // pass 1: S = Q_i·K_jᵀ into p, dP = dO_i·V_jᵀ into ds
  // S[r][c] = Σ_e Q[r][e] · Kt[e][c]   dP[r][c] = Σ_e dO[r][e] · Vt[e][c]
  product_rows<T, MR, NV>(a.rows_pad, span, a.d_k, a.q, a.dk_pad, 1, a.kt, a.cols_pad, a.p, a.cols_pad, false);
  product_rows<T, MR, NV>(a.rows_pad, span, a.d_v, a.d_o, a.dv_pad, 1, a.vt, a.cols_pad, a.ds, a.cols_pad, false);

  // pass 2: P recomputed from lse, dS = P ⊙ (dP - D)·scale; padded rows and rows with nothing to attend 0
  for (std::size_t r = 0; r < a.rows_pad; ++r) {
    if (r < a.rows && a.lse[r] != minus_inf<T>()) {
      T* p = a.p + r * a.cols_pad;
      T* ds = a.ds + r * a.cols_pad;
      const T* drop = a.drop != nullptr ? a.drop + r * a.cols_pad : nullptr;
      // dropout: the gradient of the weights before it is dP ⊙ drop; dV sums what P·V read, P ⊙ drop
      if (drop != nullptr)
        for (std::size_t c = 0; c < span; c += W<T>) store(ds + c, load(ds + c) * load(drop + c));
      weights_and_score_gradient(a, r, span);
      if (drop != nullptr)
        for (std::size_t c = 0; c < span; c += W<T>) store(p + c, load(p + c) * load(drop + c));
      continue;
    }
    for (std::size_t c = 0; c < span; ++c) a.p[r * a.cols_pad + c] = a.ds[r * a.cols_pad + c] = 0;
  }

  // pass 3: dV_j += Pᵀ·dO_i, dK_j += dSᵀ·Q_i, the keys as rows: blocks of RO keys × NVO vectors
  // dV[c][e] += Σ_r P[r][c] · dO[r][e]   dK[c][e] += Σ_r dS[r][c] · Q[r][e]
  product_rows<T, RO, NVO>(span, a.dv_pad, a.rows, a.p, 1, a.cols_pad, a.d_o, a.dv_pad, a.dv, a.dv_pad, true);
  product_rows<T, RO, NVO>(span, a.dk_pad, a.rows, a.ds, 1, a.cols_pad, a.q, a.dk_pad, a.dk, a.dk_pad, true);

  // pass 4: this tile's share of dQ_i = dS·K_j
  // dQ[r][e] = Σ_c dS[r][c] · K[c][e]
  product_rows<T, RO, NVO>(a.rows_pad, a.dk_pad, span, a.ds, a.cols_pad, 1, a.k, a.dk_pad, a.dq, a.dk_pad, false);
}

// ------------------------------------------------------------------------------------- naive's softmax

template <class T>
void softmax_rows_impl(const SoftmaxRowsArgs<T>& a) {
  using V = Vec<T>;
  constexpr std::size_t w = W<T>;
  const std::size_t full = a.cols / w * w;  // the columns whole vectors cover; the rest one by one
  for (std::size_t r = 0; r < a.rows; ++r) {
    T* row = a.s + r * a.row_stride;
    const T* keep = a.keep != nullptr ? a.keep + r * a.cols : nullptr;
    const T lo = static_cast<T>(a.lo[r]), hi = static_cast<T>(a.hi[r]);
    // S' = S·scale + bias, -inf where the mask forbids
    const auto score = [&](std::size_t c, T s) {
      T x = s * a.scale;
      if (a.softcap > 0) x = softcap_one(x, a.softcap);
      if (a.pos_q != nullptr) x = x + -a.slope * (a.pos_q[r] - a.pos_k[c]);
      const bool in = static_cast<T>(c) >= lo && static_cast<T>(c) < hi && (keep == nullptr || keep[c] != 0);
      return in ? x : minus_inf<T>();
    };
    const V running = scale_bias_mask<T>(row, full, a.scale, a.softcap, a.slope, a.pos_q != nullptr ? a.pos_q[r] : T{0},
                                         a.pos_q != nullptr ? a.pos_k : nullptr, lo, hi, keep);
    T row_max = lane_max<T>(running);
    for (std::size_t c = full; c < a.cols; ++c) {
      row[c] = score(c, row[c]);
      row_max = row[c] > row_max ? row[c] : row_max;
    }
    if (a.sink != nullptr) row_max = *a.sink > row_max ? *a.sink : row_max;  // the sink joins the max
    if (row_max == minus_inf<T>()) {  // nothing to attend: all-zero weights instead of 0/0
      for (std::size_t c = 0; c < a.cols; ++c) row[c] = 0;
      continue;
    }
    // P[c] = exp(S'[c] - max) / Σ exp(S' - max): subtracting the max is so exp never overflows; the sink's
    // exp(sink - max) joins the sum
    V sum_lanes{};
    for (std::size_t c = 0; c < full; c += w) {
      const V p = exp_nonpositive<T>(load(row + c) - row_max);
      store(row + c, p);
      sum_lanes += p;
    }
    T sum = lane_sum<T>(sum_lanes);
    if (a.sink != nullptr) sum += exp_one(*a.sink - row_max);
    for (std::size_t c = full; c < a.cols; ++c) {
      row[c] = exp_one(row[c] - row_max);
      sum += row[c];
    }
    for (std::size_t c = 0; c < full; c += w) store(row + c, load(row + c) / sum);
    for (std::size_t c = full; c < a.cols; ++c) row[c] /= sum;
  }
}

// ------------------------------------------------------------------------------------------ FMA peak

// What bench measures the processor's FP32 FMA peak with: `iterations` rounds of ACC independent chains
// acc = acc·x + y, one vector FMA each, with nothing loaded or stored. ACC chains hide the FMA's latency
// (4 to 5 cycles) on two FMA units: 16 with 32 vector registers, 12 with 16. Returns the accumulators'
// sum (so that the work cannot be dropped) and the floating-point operations of one round.
constexpr int ACC = wide != 0 ? 16 : 12;

double fma_loop_impl(std::size_t iterations, std::size_t& flops_per_iteration) {
  using V = Vec<float>;
  V acc[ACC];
  for (int k = 0; k < ACC; ++k) acc[k] = splat(static_cast<float>(k) * 0.001f);
  const V x = splat(0.999999f), y = splat(0.000001f);  // acc stays near 1: no overflow, no subnormals
  for (std::size_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (V& a : acc) a = a * x + y;
  }
  V sum{};
  for (const V& a : acc) sum += a;
  flops_per_iteration = 2 * static_cast<std::size_t>(ACC) * static_cast<std::size_t>(W<float>);
  return static_cast<double>(lane_sum<float>(sum));
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
void gemm(const GemmArgs<float>& g) { gemm_impl(g); }
void gemm(const GemmArgs<double>& g) { gemm_impl(g); }
void flash_tile(const FlashTileArgs<float>& a) { flash_tile_impl(a); }
void flash_tile(const FlashTileArgs<double>& a) { flash_tile_impl(a); }
void flash_backward_tile(const FlashBackwardTileArgs<float>& a) { flash_backward_tile_impl(a); }
void flash_backward_tile(const FlashBackwardTileArgs<double>& a) { flash_backward_tile_impl(a); }
void softmax_rows(const SoftmaxRowsArgs<float>& a) { softmax_rows_impl(a); }
double fma_loop(std::size_t iterations, std::size_t& flops_per_iteration) {
  return fma_loop_impl(iterations, flops_per_iteration);
}
void softmax_rows(const SoftmaxRowsArgs<double>& a) { softmax_rows_impl(a); }

}  // namespace attn::kernel::ATTN_ISA
