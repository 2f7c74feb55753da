// The fast path's backward tile, naive's softmax and the FMA loop bench measures the peak with, compiled
// once per instruction set like kernel/isa.cpp (whose comment says why nothing here comes from a library).

#include <cstddef>
#include <cstdint>

#include "kernel/args.hpp"
#include "kernel/simd.hpp"

namespace attn::kernel::ATTN_ISA {

namespace {

// --------------------------------------------------------------------------------------- flash backward

// C[r][c..] (+)= Σ_k A[r·a_row + k·a_step] · B[k·b_step + c..] for R rows × NVC vectors of C's columns.
template <class T, int R, int NVC>
void product_block(std::size_t K, const T* a, std::size_t a_row, std::size_t a_step, const T* b, std::size_t b_step,
                   T* c, std::size_t c_row, bool add) {
  Vec<T> acc[R][NVC];  // unrolled whole, so that the accumulators live in registers alone (isa.cpp, score_block)
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < NVC; ++x)
      acc[r][x] = add ? load(c + static_cast<std::size_t>(r) * c_row + static_cast<std::size_t>(x * W<T>)) : Vec<T>{};
  fma_block<T, R, NVC>(acc, K, a, a_row, a_step, b, b_step);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
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
  const T* keep = a.score.keep != nullptr ? a.score.keep + r * a.cols_pad : nullptr;
  if (scale_only(a.score, r, span, keep)) {
    for (std::size_t c = 0; c < span; c += w) store(p + c, load(p + c) * a.score.scale);
  } else {
    score_lanes<T>(p, span, a.score, r, keep);
  }
  // S - lse <= 0 up to rounding: the weights the forward normalised, without an n × m matrix kept
  const T lse = a.lse[r], D = a.D[r];
  if (sloped(a.score)) {  // dS also carries the slope of the score before the softmax with respect to S'
    for (std::size_t c = 0; c < span; c += w) {
      const V x = load(p + c);
      const V weight = exp_nonpositive<T>(x - lse);
      store(p + c, weight);
      store(ds + c, weight * (load(ds + c) - D) * slope_lanes<T>(a.score, r, c, x) * a.score.scale);
    }
    return;
  }
  for (std::size_t c = 0; c < span; c += w) {
    const V weight = exp_nonpositive<T>(load(p + c) - lse);
    store(p + c, weight);
    store(ds + c, weight * (load(ds + c) - D) * a.score.scale);
  }
}

template <class T>
void flash_backward_tile_impl(const FlashBackwardTileArgs<T>& a) {
  // The columns some row keeps, padded to whole blocks: past them P and dS are 0 (most of a causal
  // mask's tile on the diagonal), and nothing is computed.
  std::int64_t last = 0;
  for (std::size_t r = 0; r < a.rows; ++r) last = a.score.hi[r] > last ? a.score.hi[r] : last;
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
      const T* drop = a.score.drop != nullptr ? a.score.drop + r * a.cols_pad : nullptr;
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
    const T* keep = a.score.keep != nullptr ? a.score.keep + r * a.cols : nullptr;
    // S' = S through the score chain's stages, -inf where the mask forbids: whole vectors, then the rest
    const V running = score_lanes<T>(row, full, a.score, r, keep);
    T row_max = lane_max<T>(running);
    for (std::size_t c = full; c < a.cols; ++c) {
      row[c] = score_one<T>(a.score, r, c, row[c], keep);
      row_max = row[c] > row_max ? row[c] : row_max;
    }
    if (a.score.sink != nullptr) row_max = *a.score.sink > row_max ? *a.score.sink : row_max;  // the sink joins the max
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
    if (a.score.sink != nullptr) sum += exp_one(*a.score.sink - row_max);
    for (std::size_t c = full; c < a.cols; ++c) {
      row[c] = exp_one(row[c] - row_max);
      sum += row[c];
    }
    // times 1/sum rather than divided by it: a division per vector costs several multiplications, and the
    // extra rounding is one unit of the last place, well inside compare's rule
    const T inverse = T{1} / sum;
    for (std::size_t c = 0; c < full; c += w) store(row + c, load(row + c) * inverse);
    for (std::size_t c = full; c < a.cols; ++c) row[c] *= inverse;
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

}  // namespace

void flash_backward_tile(const FlashBackwardTileArgs<float>& a) { flash_backward_tile_impl(a); }
void flash_backward_tile(const FlashBackwardTileArgs<double>& a) { flash_backward_tile_impl(a); }
void softmax_rows(const SoftmaxRowsArgs<float>& a) { softmax_rows_impl(a); }
double fma_loop(std::size_t iterations, std::size_t& flops_per_iteration) {
  return fma_loop_impl(iterations, flops_per_iteration);
}
void softmax_rows(const SoftmaxRowsArgs<double>& a) { softmax_rows_impl(a); }

}  // namespace attn::kernel::ATTN_ISA
