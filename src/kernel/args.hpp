#pragma once
// What the fast kernels are handed: plain structs of sizes and raw pointers, no member functions, so
// that the files compiled for one instruction set each (kernel/isa.cpp) instantiate nothing that
// another file also instantiates. kernels.cpp owns every buffer the pointers point into.

#include <cstddef>
#include <cstdint>

namespace attn::kernel {

// How one instruction set's kernels want their operands laid out, and how big their scratch is.
struct Layout {
  std::size_t lanes = 1;      // values of T in one vector register
  std::size_t row_block = 1;  // flash: a query tile's packed rows are a multiple of it; gemm: A's panels
  // gemm's blocking: panels of row_block rows of A and gemm_nr columns of B, blocks of gemm_mc rows,
  // gemm_kc of the inner axis and gemm_nc columns
  std::size_t gemm_nr = 1, gemm_mc = 1, gemm_kc = 1, gemm_nc = 1;
  // flash's backward: a key tile's padded columns are a multiple of it (of the lanes, and of the rows of
  // the blocks that sum dK and dV over the query rows)
  std::size_t col_block = 1;
};

// C = A·B (+ bias) or C += A·B, for any strides of A and B:
//   A(i, k) = a[i·a_row + k·a_col]   (M, K)
//   B(k, j) = b[k·b_row + j·b_col]   (K, N)
//   C(i, j) = c[i·c_row + j]         (M, N), rows contiguous
// C[i][j] = Σ_k A(i, k)·B(k, j) + bias[j]
template <class T>
struct GemmArgs {
  std::size_t M = 0, N = 0, K = 0;
  const T* a = nullptr;
  std::ptrdiff_t a_row = 0, a_col = 0;
  const T* b = nullptr;
  std::ptrdiff_t b_row = 0, b_col = 0;
  T* c = nullptr;
  std::ptrdiff_t c_row = 0;
  const T* bias = nullptr;  // (N), or none
  bool accumulate = false;  // add to C instead of overwriting it
  // This call's own scratch: round_up(min(M, gemm_mc), row_block) · min(K, gemm_kc) values for A's
  // panels, min(K, gemm_kc) · round_up(min(N, gemm_nc), gemm_nr) for B's (gemm_pack_sizes).
  T* a_pack = nullptr;
  T* b_pack = nullptr;
};

// The score chain's stages as the kernels apply them to one head's block of scores, in the chain's order
// (model/score_chain.hpp, which fills this: ScoreChain::fill): S' = S·scale, c·tanh(S'/c) when softcap > 0,
// + ALiBi's -slope·(pos_q[r] - pos_k[c]) when pos_q is given, -inf where the mask forbids; a sink logit in
// each row's softmax; dropout's factor on each weight. kernel/simd.hpp's scale_bias_mask applies the
// elementwise ones; a stage added to the chain adds its parameters here and its vector form there.
template <class T>
struct ScoreArgs {
  T scale = 1;
  T softcap = 0;  // c > 0: S·scale becomes c·tanh(S·scale/c) before the bias; 0: no cap
  // ALiBi: S[r][c] += -slope·(pos_q[r] - pos_k[c]); pos_q null without it.
  T slope = 0;
  const T* pos_q = nullptr;  // (rows)
  const T* pos_k = nullptr;  // (cols_pad)
  // The mask: row r keeps the columns [lo[r], hi[r]) of the block, and of those only where keep[r][c] != 0
  // when keep is given.
  const std::int64_t* lo = nullptr;  // (rows)
  const std::int64_t* hi = nullptr;  // (rows)
  const T* keep = nullptr;           // (rows, cols_pad), or none
  // A sink logit for every row (one head's rows): it joins the max and the denominator but takes no
  // column; a row the mask empties then has all-zero weights. None: no sink. (The flash tiles take it as
  // the rows' starting state instead: m = sink, l = 1.)
  const T* sink = nullptr;
  // Dropout: P·V reads P ⊙ drop (1/(1 - p) where kept, 0 where dropped) while l sums P; none: no dropout.
  const T* drop = nullptr;  // (rows, cols_pad), or none
};

// One key tile folded into the running state of one query tile (FlashAttention-2, Algorithm 1,
// lines 8-10): S = Q_i·K_jᵀ·scale, capped, + bias, masked; m_new = max(m_prev, rowmax S); P = exp(S - m_new);
// l = alpha·l + rowsum P; O = diag(alpha)·O + P·V_j, alpha = exp(m_prev - m_new).
// Padded rows (rows .. rows_pad) and columns (cols .. cols_pad) hold zeros in q, kt and v.
template <class T>
struct FlashTileArgs {
  std::size_t rows = 0, rows_pad = 0;  // query rows of the tile; rows_pad a multiple of Layout::row_block
  std::size_t cols = 0, cols_pad = 0;  // keys of the tile; cols_pad a multiple of Layout::lanes
  std::size_t d_k = 0;
  std::size_t d_v = 0, dv_pad = 0;  // dv_pad a multiple of Layout::lanes
  const T* q = nullptr;             // (rows_pad, d_k)    the query tile, rows contiguous
  const T* kt = nullptr;            // (d_k, cols_pad)    the key tile transposed: kt[e·cols_pad + c] = K[c][e]
  const T* v = nullptr;             // (cols_pad, dv_pad) the value tile
  ScoreArgs<T> score;
  T* s = nullptr;      // (rows_pad, cols_pad) scratch: S, then P
  T* m = nullptr;      // (rows) running row max, updated
  T* l = nullptr;      // (rows) running row sum, updated
  T* alpha = nullptr;  // (rows_pad) scratch
  T* o = nullptr;      // (rows_pad, dv_pad) running unnormalised output, updated
  // (rows_pad, lanes) scratch: each row's raw scores' maxima lane by lane, taken as S is computed, so
  // that a row with nothing added to its scores needs no pass of its own for its max
  T* row_max = nullptr;
};

// One query tile's share of one key tile's gradients (FlashAttention-2, Algorithm 2, lines 11-21), the
// weights recomputed from the forward's log-sum-exp: S = Q_i·K_jᵀ·scale + bias, masked;
// P = exp(S - lse); dV_j += Pᵀ·dO_i; dP = dO_i·V_jᵀ; dS = P ⊙ (dP - D)·scale; dK_j += dSᵀ·Q_i;
// dQ_i's share = dS·K_j. The scale is folded into dS once, so dQ and dK need no multiply of their own.
// Padded rows (rows .. rows_pad) and columns (cols .. cols_pad) hold zeros in q, d_o, kt, k and vt.
template <class T>
struct FlashBackwardTileArgs {
  std::size_t rows = 0, rows_pad = 0;  // query rows of the tile; rows_pad a multiple of Layout::row_block
  std::size_t cols = 0, cols_pad = 0;  // keys of the tile; cols_pad a multiple of Layout::col_block
  std::size_t d_k = 0, dk_pad = 0;     // dk_pad and dv_pad multiples of Layout::lanes
  std::size_t d_v = 0, dv_pad = 0;
  const T* q = nullptr;    // (rows_pad, dk_pad)  the query tile
  const T* d_o = nullptr;  // (rows_pad, dv_pad)  its output's gradient
  const T* lse = nullptr;  // (rows)  the forward's log-sum-exp; -inf: nothing to attend, P = 0
  const T* D = nullptr;    // (rows)  rowsum(dO ⊙ O)
  const T* kt = nullptr;   // (d_k, cols_pad)  the key tile transposed
  const T* k = nullptr;    // (cols_pad, dk_pad)  the key tile
  const T* vt = nullptr;   // (d_v, cols_pad)  the value tile transposed
  // As in FlashTileArgs; with softcap dS carries the cap's slope 1 - (S_c/c)², and with dropout dP becomes
  // dP ⊙ drop before dS, and dV sums (P ⊙ drop)ᵀ·dO.
  ScoreArgs<T> score;
  T* p = nullptr;   // (rows_pad, cols_pad) scratch: S, then P
  T* ds = nullptr;  // (rows_pad, cols_pad) scratch: dP, then dS
  T* dq = nullptr;  // (rows_pad, dk_pad) overwritten: this tile's share of dQ_i
  T* dk = nullptr;  // (cols_pad, dk_pad) running dK_j, updated
  T* dv = nullptr;  // (cols_pad, dv_pad) running dV_j, updated
};

// The naive engine's rows of scores, in place: S' = S·scale, capped, + bias, masked to -inf, then
// P = softmax(S') along each row; a row with nothing to attend gets all-zero weights.
template <class T>
struct SoftmaxRowsArgs {
  std::size_t rows = 0, cols = 0;
  T* s = nullptr;  // (rows, cols), row r at s + r·row_stride
  std::size_t row_stride = 0;
  // keep and pos_k are (rows, cols) and (cols) here; dropout is applied to the weights afterwards
  ScoreArgs<T> score;
};

}  // namespace attn::kernel
