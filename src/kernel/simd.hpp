#pragma once
// The vectors of the fast path's kernels and what every kernel builds on: the register and cache
// blocking, loads, stores, lanes, exp, and the score chain's stages on vectors (ScoreArgs, the one place
// the kernels apply them). Included only by the files compiled
// once per instruction set (kernel/isa.cpp, kernel/isa_backward.cpp; CMakeLists.txt), where ATTN_ISA
// names the namespace and ATTN_VBYTES the vector width; everything stays in an anonymous namespace, for
// the reason isa.cpp gives.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernel/args.hpp"

#if ATTN_VBYTES == 64 && defined(__AVX512F__)
#include <immintrin.h>
#define ATTN_SCALEF 1  // exp's last step is AVX-512's vscalefps / vscalefpd (exp_reduced below)
#endif

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
//   gemm and the backward's products: MR rows × NV vectors of accumulators;
//   flash's S = Q·Kᵀ: SR rows × SNV vectors;  O += P·V: RO rows × NVO vectors.
// With AVX-512, S's 6 × 4 block loads 10 values per 24 multiply-adds where 12 × 2 loads 14: alone, d = 64,
// one core of an Intel Xeon (family 6 model 207, FMA peak 165-176 GFLOP/s), 168 GFLOP/s against 155-157;
// with AVX2 the shapes measured alike there (6 × 2 kept).
constexpr int wide = ATTN_VBYTES >= 64 ? 1 : 0;
constexpr int MR = wide != 0 ? 12 : 6;
constexpr int NV = 2;
constexpr int SR = 6;
constexpr int SNV = wide != 0 ? 4 : 2;
constexpr int RO = wide != 0 ? 6 : 3;
constexpr int NVO = 4;
static_assert(MR % RO == 0, "a query tile's rows are padded to MR, which must hold whole blocks of RO");
static_assert(MR % SR == 0, "a query tile's rows are padded to MR, which must hold whole blocks of SR");

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
// Every lane x: one broadcast. x − 0 is x for every x, so the compiler drops the subtraction; 0 + x would
// stay an addition (it is +0, not x, when x is −0), one more instruction before every broadcast.
template <class T>
inline Vec<T> splat(T x) {
  return x - Vec<T>{};
}
template <class T>
inline Vec<T> iota() {
  Vec<T> v{};
  for (int k = 0; k < W<T>; ++k) v[k] = static_cast<T>(k);
  return v;
}
// Lane k beside lane k ^ S (S a power of two below W): the halves, quarters, ... of a vector exchanged.
template <class T, int S, int... K>
inline Vec<T> exchanged(Vec<T> v, std::integer_sequence<int, K...> /*lanes*/) {
  return __builtin_shufflevector(v, v, (K ^ S)...);
}
template <class T, int S>
inline Vec<T> exchanged(Vec<T> v) {
  return exchanged<T, S>(v, std::make_integer_sequence<int, W<T>>{});
}
// The max and the sum of the lanes by halving, log2(W) steps that do not wait on each lane in turn: the
// sum adds lane k to lane k + W/2 first, then k + W/4, ... (a fixed order, the same on every run).
template <class T, int S = W<T> / 2>
inline T lane_max(Vec<T> v) {
  if constexpr (S == 0) {
    return v[0];
  } else {
    const Vec<T> u = exchanged<T, S>(v);
    return lane_max<T, S / 2>(v > u ? v : u);
  }
}
template <class T, int S = W<T> / 2>
inline T lane_sum(Vec<T> v) {
  if constexpr (S == 0) {
    return v[0];
  } else {
    return lane_sum<T, S / 2>(v + exchanged<T, S>(v));
  }
}
template <class T>
inline T minus_inf() {
  return -__builtin_inf();
}
inline std::size_t least(std::size_t a, std::size_t b) { return a < b ? a : b; }

// p·2^k for a whole number k (in [-150, 128] for float, [-1075, 1024] for double) and p near 1, rounded
// once: into the exponent bits as two factors 2^(k/2)·2^(k - k/2), so that a result below the smallest
// normal number comes out subnormal (the first product is exact, the second rounds); with AVX-512 one
// instruction, vscalef, which rounds the same exact product once: the same bits, subnormals included,
// eight instructions fewer per exp. Flash's attention on one Zen 5 core: 218 -> 213 ms at n = 4096.
template <class T>
inline Vec<T> times_power_of_two(Vec<T> p, Vec<T> k) {
  constexpr bool single = sizeof(T) == 4;
#ifdef ATTN_SCALEF
  // GCC's builtins themselves: _mm512_scalef_ps/pd pass an "undefined" vector that GCC 12 then warns of
  if constexpr (single)
    return __builtin_ia32_scalefps512_mask(p, k, p, static_cast<__mmask16>(~0U), _MM_FROUND_CUR_DIRECTION);
  else return __builtin_ia32_scalefpd512_mask(p, k, p, static_cast<__mmask8>(~0U), _MM_FROUND_CUR_DIRECTION);
#else
  using I = typename Simd<T>::I;
  constexpr int mantissa = single ? 23 : 52, bias = single ? 127 : 1023;  // IEEE 754's binary32 and binary64
  const I whole = __builtin_convertvector(k, I), half = whole >> 1;
  return p * __builtin_bit_cast(Vec<T>, (half + bias) << mantissa) *
         __builtin_bit_cast(Vec<T>, (whole - half + bias) << mantissa);
#endif
}

// exp of every lane of x in [lowest, highest]: x = k·ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts,
// as Cephes's expf splits it, so that r is nearly exact), exp(r) by a polynomial, then times 2^k
// (times_power_of_two: a result below the smallest normal number comes out subnormal, as std::exp gives
// it). For float, exp(r) = 1 + r·q(r), q of degree 5, by Horner's rule alone: six multiply-adds where
// Cephes's degree-6 1 + r + r²·P(r) took eight instructions. q's coefficients were fitted for the least
// largest relative error over |r| <= ln 2 / 2 (2.0e-9 in exact arithmetic). Against std::exp in double
// over every float in [-104, 0]: at most 1.05 ulp off, 0.67% not correctly rounded (Cephes's: 1.01 ulp,
// 0.81%). Flash's softmax then takes 14 instructions per vector of scores with AVX-512 instead of 17;
// one tile without any exp took 10% less time than with it (kernels_bench, AVX-512, Intel Xeon).
// For double, the Taylor series of exp(r) to r^13 (its remainder is below 2^-60 for |r| <= ln 2 / 2).
inline Vec<float> exp_reduced(Vec<float> x) {
  using V = Vec<float>;
  const V magic = splat(12582912.0f);  // 1.5·2^23: adding and taking it away rounds to a whole number
  const V k = (x * 1.44269504088896341f + magic) - magic;
  V r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  V p = splat(1.38461450e-3f);
  p = p * r + 8.37412011e-3f;
  p = p * r + 4.16679606e-2f;
  p = p * r + 1.66664317e-1f;
  p = p * r + 4.99999940e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return times_power_of_two<float>(p, k);
}

inline Vec<double> exp_reduced(Vec<double> x) {
  using V = Vec<double>;
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
  return times_power_of_two<double>(p, k);
}

// a > b ? a : b in every lane: b where either is NaN. One instruction, (v)maxps / (v)maxpd, which
// computes exactly this; GCC wrote the expression as a compare and a masked move with AVX-512 and a
// compare and a blend with AVX2, two instructions in the loop of flash's softmax.
template <class T>
inline Vec<T> larger(Vec<T> a, Vec<T> b) {
  constexpr bool single = sizeof(T) == 4;
#if defined(ATTN_SCALEF) && defined(__clang__)  // clang's name (clang-tidy reads this file too)
  if constexpr (single) return __builtin_ia32_maxps512(a, b, _MM_FROUND_CUR_DIRECTION);
  else return __builtin_ia32_maxpd512(a, b, _MM_FROUND_CUR_DIRECTION);
#elif defined(ATTN_SCALEF)  // GCC's, as for vscalef above
  if constexpr (single)
    return __builtin_ia32_maxps512_mask(a, b, a, static_cast<__mmask16>(~0U), _MM_FROUND_CUR_DIRECTION);
  else return __builtin_ia32_maxpd512_mask(a, b, a, static_cast<__mmask8>(~0U), _MM_FROUND_CUR_DIRECTION);
#elif ATTN_VBYTES == 32 && defined(__AVX__)
  if constexpr (single) return __builtin_ia32_maxps256(a, b);
  else return __builtin_ia32_maxpd256(a, b);
#elif ATTN_VBYTES == 16 && defined(__SSE2__)
  if constexpr (single) return __builtin_ia32_maxps(a, b);
  else return __builtin_ia32_maxpd(a, b);
#else
  (void)single;
  return a > b ? a : b;
#endif
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
// the overflow side needs no check; exp(-inf) = 0 exactly, as a masked score needs. Below `lowest` the
// lanes take exp(lowest), which already rounds to 0 (p·2^k under half the smallest subnormal), so one max
// does what a compare and two selects did: the same bits for every float in [-1000, 0] and a sample of
// doubles, -inf and NaN (NaN stays NaN: `lowest > x` is false), in every instruction set.
template <class T>
inline Vec<T> exp_nonpositive(Vec<T> x) {
  return exp_reduced(larger<T>(splat(ExpRange<T>::lowest), x));
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

// A key tile's padded columns are a multiple of CB: whole vectors, and whole blocks of RO rows when dK and
// dV are summed with the keys as rows.
constexpr std::size_t gcd(std::size_t a, std::size_t b) { return b == 0 ? a : gcd(b, a % b); }
template <class T>
constexpr std::size_t CB = static_cast<std::size_t>(W<T>) / gcd(W<T>, RO) * static_cast<std::size_t>(RO);

// How many keys' rows of V (each dv_pad wide) make one span of flash's O += P·V: about 16 KiB, to stay
// in L1 (32 KiB on many processors) beside the rows of P that read them. Over the whole tile instead,
// V (96 KiB at 384 keys, d = 64) came from L2 for every block of rows: alone, 158 GFLOP/s against 169-173
// in spans of 48-192 keys (AVX-512, the Xeon above). The sums run in the same order either way.
template <class T>
inline std::size_t pv_span(std::size_t dv_pad) {
  const std::size_t keys = std::size_t{16384} / (dv_pad * sizeof(T));
  return keys < 16 ? 16 : keys;
}

// ---- the blocks the forward and backward kernels share

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
  V running = splat(minus_inf<T>());
  if (keep == nullptr && pos_k == nullptr && !(softcap > 0) && lo <= 0 && hi >= static_cast<T>(end)) {
    // a row the mask leaves whole, nothing added and no cap (the common case): no lanes to mask
    for (std::size_t c = 0; c < end; c += w) {
      const V x = load(row + c) * scale;
      store(row + c, x);
      running = running > x ? running : x;
    }
    return running;
  }
  const V lanes = iota<T>();
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

// ---- the score chain's stages, as the kernels apply them (kernel/args.hpp's ScoreArgs, filled by
// model/score_chain.hpp). A stage added to the chain adds its parameters to ScoreArgs and its forms here:
// the kernels themselves call nothing else of it.

// Does row r get the scale alone over [0, end)? The mask keeps every column (no gaps, `keep` none) and no
// stage adds to the scaled scores or bends them: the common case, which skips the mask's lanes.
template <class T>
inline bool scale_only(const ScoreArgs<T>& a, std::size_t r, std::size_t end, const T* keep) {
  const bool whole = keep == nullptr && a.lo[r] == 0 && static_cast<std::size_t>(a.hi[r]) == end;
  return whole && a.pos_q == nullptr && a.softcap == 0;
}

// Row r of the scores through every stage, in place over the whole vectors of [0, end): S·scale, capped,
// + ALiBi's bias, -inf where the mask forbids (`keep`: the row's own gaps, or none). Returns the lanes'
// running max.
template <class T>
inline Vec<T> score_lanes(T* row, std::size_t end, const ScoreArgs<T>& a, std::size_t r, const T* keep) {
  return scale_bias_mask<T>(row, end, a.scale, a.softcap, a.slope, a.pos_q != nullptr ? a.pos_q[r] : T{0},
                            a.pos_q != nullptr ? a.pos_k : nullptr, static_cast<T>(a.lo[r]), static_cast<T>(a.hi[r]),
                            keep);
}

// The same for one score s at column c of row r (`keep`: the row's gaps, or none): the scalar tail of a row.
template <class T>
inline T score_one(const ScoreArgs<T>& a, std::size_t r, std::size_t c, T s, const T* keep) {
  T x = s * a.scale;
  if (a.softcap > 0) x = softcap_one(x, a.softcap);
  if (a.pos_q != nullptr) x = x + -a.slope * (a.pos_q[r] - a.pos_k[c]);
  const T lo = static_cast<T>(a.lo[r]), hi = static_cast<T>(a.hi[r]);
  const bool in = static_cast<T>(c) >= lo && static_cast<T>(c) < hi && (keep == nullptr || keep[c] != 0);
  return in ? x : minus_inf<T>();
}

// Does a stage bend the scores, so that the score before the softmax has a slope other than 1 with respect
// to S' (the cap's)? Then the backward multiplies dS by slope_lanes.
template <class T>
inline bool sloped(const ScoreArgs<T>& a) {
  return a.softcap > 0;
}

// That slope at columns [c, c + W) of row r, from the scores there before the softmax x: the cap's
// 1 - (S_c/c)², S_c read back as x less ALiBi's bias, clamped to ±c (so a masked -inf gives slope 0, not
// NaN).
template <class T>
inline Vec<T> slope_lanes(const ScoreArgs<T>& a, std::size_t r, std::size_t c, Vec<T> x) {
  const T c_cap = a.softcap, pos_q = a.pos_q != nullptr ? a.pos_q[r] : T{0};
  Vec<T> capped = a.pos_q != nullptr ? x - -a.slope * (pos_q - load(a.pos_k + c)) : x;
  capped = capped > c_cap ? splat(c_cap) : capped;
  capped = capped < -c_cap ? splat(-c_cap) : capped;
  const Vec<T> t = capped / c_cap;
  return T{1} - t * t;
}

}  // namespace

}  // namespace attn::kernel::ATTN_ISA
