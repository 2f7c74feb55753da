#pragma once
// What the unwatched path's engines share (engine/fast.hpp, fast_backward.hpp, fast_decode.hpp): their
// tiles and options, the inputs and weights in T, the projections on the kernels' products, RoPE in
// place, the mask of a row as the kernels take it, and dropout's factors of a block.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "engine/common.hpp"
#include "kernel/kernels.hpp"
#include "model/run.hpp"

namespace attn {

// The tiles the fast flash pass runs with in the instruction set `isa`, chosen by measurement
// (docs/performance.md): Br a multiple of every instruction set's row block (12 and 6), so that no packed
// row is padding; Bc long enough that a tile's per-row work (max, alpha, the rescale) is paid for by many
// keys, short enough that a causal mask wastes little on the diagonal tiles (about Bc / 2n of the work).
// AVX-512's kernels gained from 384 keys (73% -> 76-78% of the FMA peak on a Zen 4, causal too); AVX2's,
// which read each value tile twice as often (half the rows per register block), lost beyond 192.
inline TileSize fast_tiles(kernel::Isa isa = kernel::isa()) {
  return isa == kernel::Isa::avx512 ? TileSize{96, 384} : TileSize{96, 192};
}

// The tiles the fast backward runs with (engine/fast_backward.hpp), chosen by measurement
// (docs/performance.md): Br a multiple of every instruction set's row block (12), Bc of its column
// block (48: whole vectors and whole blocks of the rows that sum dK and dV).
inline TileSize fast_backward_tiles() { return {96, 192}; }

struct FastOptions {
  TileSize tiles = fast_tiles();                    // flash's tiles (for the default instruction set)
  std::size_t threads = 1;                          // 0: all cores
  kernel::Isa isa = kernel::isa();                  // the kernels' instruction set
  TileSize backward_tiles = fast_backward_tiles();  // flash's backward's tiles
};

// The storage types the fast path computes: float32 and float64. Half types are rounded at every stored
// step, which the traced path does.
inline bool fast_supports(DType storage) { return !is_half(storage); }

namespace fast {

inline std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

template <class T, class Out = std::vector<T>>
Out in_type(std::span<const double> values) {
  Out out(values.size());
  std::transform(values.begin(), values.end(), out.begin(), [](double x) { return static_cast<T>(x); });
  return out;
}

// An input's or a weight's values in T, in a buffer not zeroed first (kernel::Buffer).
template <class T>
kernel::Buffer<T> in_rows(std::span<const double> values) {
  return in_type<T, kernel::Buffer<T>>(values);
}

// Y = X·W + b for the rows of X: X (rows, d_in), W (d_in, d_out), b (d_out) or empty -> Y (rows, d_out),
// every element of Y overwritten (it may come uninitialised).
template <class T>
void project_into(std::span<const T> X, std::size_t rows, std::size_t d_in, std::span<const T> W, std::size_t d_out,
                  std::span<const T> bias, const FastOptions& o, std::span<T> Y) {
  const auto in = static_cast<std::ptrdiff_t>(d_in), out = static_cast<std::ptrdiff_t>(d_out);
  kernel::GemmArgs<T> g = kernel::product(rows, d_out, d_in, X.data(), in, 1, W.data(), out, 1, Y.data(), out);
  g.bias = bias.empty() ? nullptr : bias.data();
  kernel::gemm(o.isa, g, o.threads);
}

// project_into a new buffer: Q, K and V
template <class T>
kernel::Buffer<T> project_rows(std::span<const T> X, std::size_t rows, std::size_t d_in, std::span<const T> W,
                               std::size_t d_out, std::span<const T> bias, const FastOptions& o) {
  kernel::Buffer<T> Y(rows * d_out);
  project_into(X, rows, d_in, W, d_out, bias, o, std::span<T>(Y));
  return Y;
}

// RoPE in place on (B·T, H·d) rows: every head of token t turned by position t's angles.
// y[a] = x[a]·cos[t][i] - x[c]·sin[t][i],  y[c] = x[c]·cos[t][i] + x[a]·sin[t][i]   (ops/attention.hpp, rotate)
// `back`: turned by the negative angles, the rotation's transpose, which is how a gradient goes back
// through it (ops/attention_backward.hpp, d_rotate).
template <class T>
void rotate_rows(std::span<T> Y, std::size_t B, std::size_t tokens, std::size_t H, std::size_t d,
                 const Tensor<double>& cos_table, const Tensor<double>& sin_table, RopeStyle style, bool back = false) {
  const std::size_t P = cos_table.dim(1);
  const std::vector<T> cos_t = in_type<T>(cos_table.values()), sin_t = in_type<T>(sin_table.values());
  const T turn = back ? T{-1} : T{1};
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < tokens; ++t)
      for (std::size_t hd = 0; hd < H; ++hd) {
        T* x = &Y[((b * tokens + t) * H + hd) * d];
        for (std::size_t i = 0; i < P; ++i) {
          const auto [a, c] = rope_pair(style, i, P);
          const T cos = cos_t[t * P + i], sin = turn * sin_t[t * P + i];
          const T xa = x[a], xc = x[c];
          x[a] = xa * cos - xc * sin;
          x[c] = xc * cos + xa * sin;
        }
      }
}

// The tensors both fast engines start from: the projections of the tokens, split into heads by their
// strides alone ((B·n, h·d_k) rows: head hd of row r at r·h·d_k + hd·d_k), turned by RoPE.
template <class T>
struct Projected {
  kernel::Buffer<T> Q;  // (B·n, h·d_k)
  kernel::Buffer<T> K;  // (B·m, g·d_k)
  kernel::Buffer<T> V;  // (B·m, g·d_v)
};

template <class T>
Projected<T> project_all(const Problem& p, const FastOptions& o) {
  const kernel::Buffer<T> X = in_rows<T>(p.X.values());
  Projected<T> out;
  const auto project = [&](std::span<const T> rows_of, std::size_t rows, std::size_t d_in, const Tensor<double>& W,
                           std::size_t d_out, const std::vector<double>& bias) {
    return project_rows<T>(rows_of, rows, d_in, in_rows<T>(W.values()), d_out, in_type<T>(bias), o);
  };
  out.Q = project(X, p.B * p.n, p.d_model, p.W_q, p.h * p.d_k, p.b_q);
  {
    kernel::Buffer<T> C_own;
    if (p.cross) C_own = in_rows<T>(p.C.values());
    const kernel::Buffer<T>& C = p.cross ? C_own : X;  // self-attention: the context is X
    out.K = project(C, p.B * p.m, p.d_context, p.W_k, p.g * p.d_k, p.b_k);
    out.V = project(C, p.B * p.m, p.d_context, p.W_v, p.g * p.d_v, p.b_v);
  }
  if (p.rope) {
    rotate_rows<T>(out.Q, p.B, p.n, p.h, p.d_k, p.rope->cos_q, p.rope->sin_q, p.rope->style);
    rotate_rows<T>(out.K, p.B, p.m, p.g, p.d_k, p.rope->cos_k, p.rope->sin_k, p.rope->style);
  }
  return out;
}

// Y = concat·W_o + b_o, or concat itself without W_o: concat (B·n, h·d_v) -> (B, n, d_out)
template <class T>
Tensor<T> output_of(const Problem& p, const kernel::Buffer<T>& concat, const FastOptions& o) {
  if (!p.has_output_projection()) return Tensor<T>({p.B, p.n, p.d_out}, std::vector<T>(concat.begin(), concat.end()));
  std::vector<T> Y(p.B * p.n * p.d_out);
  project_into<T>(concat, p.B * p.n, p.h * p.d_v, in_rows<T>(p.W_o.values()), p.d_out, in_type<T>(p.b_o), o,
                  std::span<T>(Y));
  return Tensor<T>({p.B, p.n, p.d_out}, std::move(Y));
}

// The mask of one row, as the kernels take it: the band [lo, hi) of columns [c0, c0 + cols) and, for
// the kinds with gaps (padding, custom), keep[c] = 1 where allowed.
inline bool mask_has_gaps(const Mask& mask) { return mask.kind == MaskKind::padding || mask.kind == MaskKind::custom; }

template <class T>
struct RowMask {
  std::int64_t lo = 0, hi = 0;
  bool any = false;  // the row keeps a column of the range
};

template <class T>
RowMask<T> row_mask(const Mask& mask, std::size_t b, std::size_t i, std::size_t c0, std::size_t cols, T* keep) {
  const auto [first, last] = mask.band(i);
  RowMask<T> r;
  r.lo = static_cast<std::int64_t>(std::clamp(first, c0, c0 + cols) - c0);
  r.hi = static_cast<std::int64_t>(std::clamp(last, c0, c0 + cols) - c0);
  r.any = r.lo < r.hi;
  if (keep != nullptr) {
    r.any = false;
    for (std::size_t c = 0; c < cols; ++c) {
      const bool allowed = mask.allows(b, i, c0 + c);
      keep[c] = allowed ? T{1} : T{0};
      r.any = r.any || (allowed && static_cast<std::int64_t>(c) >= r.lo && static_cast<std::int64_t>(c) < r.hi);
    }
  }
  return r;
}

// The storage the fast path's T is: itself (the fast path has no half types), so the chain holds its inputs
// as T converts them.
template <class T>
constexpr DType unrounded() {
  return sizeof(T) == sizeof(float) ? DType::float32 : DType::float64;
}

// `values` from `offset` on, or none where there are none (ALiBi's key positions without ALiBi): no offset
// is ever applied to the null pointer of an empty vector.
template <class T>
const T* at_offset(const std::vector<T>& values, std::size_t offset) {
  return values.empty() ? nullptr : values.data() + offset;
}

// Dropout's factors of one block, rows [r0, r0 + rows) × keys [c0, c0 + cols) of head hd, into drop
// (rows, cols_pad), the padding 0: the keep mask drawn from the seed, the numbers every engine draws.
template <class T>
void draw_dropout(const ScoreChain<T>& chain, std::size_t b, std::size_t hd, std::size_t r0, std::size_t rows,
                  std::size_t c0, std::size_t cols, std::size_t cols_pad, T* drop) {
  for (std::size_t r = 0; r < rows; ++r) {
    T* row = drop + r * cols_pad;
    for (std::size_t c = 0; c < cols; ++c) row[c] = chain.factor({b, hd, r0 + r, c0 + c});
    std::fill(row + cols, row + cols_pad, T{0});
  }
}

// What an engine's attention leaves for the output projection: the head outputs merged, (B·n, h·d_v),
// the bytes its scores took at their peak, and (flash) the log-sum-exp of every row.
template <class T>
struct Attended {
  kernel::Buffer<T> concat;
  std::size_t score_bytes = 0;
  Tensor<T> lse;
};

}  // namespace fast

}  // namespace attn
