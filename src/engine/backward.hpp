#pragma once
// The backward pass: every gradient of attention from dY = ∂L/∂Y (L = Σ Y ⊙ dY) back to the inputs and
// the weights, after the forward pass that it differentiates. The naive engine forms every gradient
// whole (run_naive_backward); the flash engine is FlashAttention-2's backward, tile by tile, with the
// weights recomputed from the forward's log-sum-exp (run_flash_backward). ref: FlashAttention-2
// (arXiv:2307.08691), Algorithm 2. Both walk the rows back (engine/rows.hpp) for every step before the
// scores and after the weighted sum.
// In a half storage type every stored gradient is rounded to it, as the forward's steps are, and dY is
// an input rounded once.

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <utility>

#include "engine/common.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "ops/attention_backward.hpp"

namespace attn {

// dY (B, n, d_out) as the run holds it: the problem's (the input's "dY" or one drawn by --grad-seed),
// or 1 everywhere, rounded to T or to the half type it stores in.
template <class T>
Tensor<T> upstream_gradient(const Problem& p, DType storage) {
  Tensor<T> dY({p.B, p.n, p.d_out}, T{1});
  if (p.dY.empty()) return dY;
  for (std::size_t k = 0; k < dY.size(); ++k) dY.values()[k] = stored_input<T>(storage, p.dY.values()[k]);
  return dY;
}

// The naive forward pass, then its backward with every gradient whole: the rows of engine/rows.hpp
// walked back from dY, each gradient stored rounded to the storage and reported when whole, each value
// let go once the last step whose backward reads it has sent its gradient. Returns the forward's result.
template <class T>
AttentionResult<T> run_naive_backward(const Problem& p, Observer& observer, DType storage = DType::float32) {
  require_storage<T>("run_naive_backward", storage);
  const Inputs<T> in(p, storage);
  const RowContext<T> c{p, in};
  const Keeper<T> keep(observer, storage);
  ByteMeter meter;
  const Liveness live(p, true);
  ForwardValues<T> x = naive_forward(p, in, observer, meter, storage, live);
  Gradients<T> d;
  d[slot(Step::output)] = upstream_gradient<T>(p, storage);  // dY (B, n, d_out)
  const auto send = [&](Step s, const Tensor<T>& dy, const ForwardValues<T>&, Gradients<T>& into) {
    const std::vector<Step> read = inputs_of(s, p);
    std::array<bool, step_count> had{};  // which of the steps it read had a gradient before
    for (const Step t : read) had[slot(t)] = !into[slot(t)].empty();
    row_of<T>(s).backward(dy, x, c, into);
    for (const Step t : read)
      if (!had[slot(t)] && !into[slot(t)].empty()) hold(meter, t, into[slot(t)]);
    let_go(meter, s, into[slot(s)]);  // sent: its gradient was kept already
    for (const Step t : row_of<T>(s).saves(p))
      if (live.last_backward[slot(t)] == s) let_go(meter, t, x[slot(t)]);
  };
  walk_backward<T>(p, x, d, send, [&keep](Step g, Tensor<T> value) { return keep(g, std::move(value)); });
  return {std::move(x[slot(Step::output)]), find_empty_rows(p), meter.peak(), Tensor<T>()};
}

// P = exp(S - lse_i), S = Q_i·K_jᵀ through the score chain (ops/score_chain.hpp): one tile's forward
// weights (P, rows × cols), recomputed from the one number per row that the forward kept, instead of an
// n × m matrix stored; where a stage after the scale has a slope of its own (the cap's), also the slope of
// each score with respect to S' (`slope`).
// P[r][c] = exp(chain(Σ_e Q[r0+r][e]·K[c0+c][e]) - lse[r0+r]), 0 where the mask forbids
// Q (B, h, n, d_k) and K (B, g, m, d_k) as the scores read them, lse (B, h, n).
template <class T>
void recompute_tile_weights(const Inputs<T>& in, const Tensor<T>& Q, const Tensor<T>& K, const Tensor<T>& lse_all,
                            std::size_t b, std::size_t hd, std::size_t r0, std::size_t c0, Tensor<T>& P,
                            Tensor<T>& slope, DType storage) {
  const std::size_t kv = kv_head_of(hd, Q.dim(1), K.dim(1)), d_k = Q.dim(3), rows = P.dim(0), cols = P.dim(1);
  const bool sloped = in.chain.sloped();
  for (std::size_t r = 0; r < rows; ++r) {
    const T lse = lse_all(b, hd, r0 + r);
    if (lse == -std::numeric_limits<T>::infinity()) continue;  // nothing to attend: P = 0
    const T* q = &Q(b, hd, r0 + r, 0);
    for (std::size_t c = 0; c < cols; ++c) {
      const Where w{b, hd, r0 + r, c0 + c};
      if (!in.chain.allows(w)) continue;
      const T* k = &K(b, kv, c0 + c, 0);
      T dot = 0;
      for (std::size_t e = 0; e < d_k; ++e) dot += q[e] * k[e];
      T dS_ds = 1;
      const T s = in.chain.score(w, dot, dS_ds);
      if (sloped) slope(r, c) = dS_ds;
      P(r, c) = stored(storage, std::exp(s - lse));
    }
  }
}

// passes 6 to 8 of FlashAttention-2's backward (Algorithm 2), for one head hd of batch item b: per key
// tile j, a sweep over the query tiles with the weights recomputed from lse, dK_j and dV_j summed in
// place and dQ_i summed into dQ. Nothing of size n × m is formed: each tile's P, dP and dS are Br × Bc.
// The heads as the forward's tiles read them, and their gradients as the backward's tiles sum them.
template <class T>
struct TileHeads {
  const Tensor<T>& Q;  // (B, h, n, d_k) with RoPE turned
  const Tensor<T>& K;  // (B, g, m, d_k) likewise
  const Tensor<T>& V;  // (B, g, m, d_v)
  Tensor<T> dQ, dK, dV;
};

template <class T>
void flash_backward_head(const Problem& p, const Inputs<T>& in, TileHeads<T>& g, const Tensor<T>& lse,
                         const Tensor<T>& dO_h, const Tensor<T>& D, std::size_t b, std::size_t hd, TileSize tiles,
                         Observer& observer, ByteMeter& meter, DType storage) {
  const std::size_t h = p.h, n = p.n, m = p.m, d_k = p.d_k, d_v = p.d_v, kv = kv_head_of(hd, h, p.g);
  const std::size_t Br = tiles.Br, Bc = tiles.Bc, Tr = (n + Br - 1) / Br, Tc = (m + Bc - 1) / Bc;
  const bool watching = observer.wants_backward_tiles();
  const Tensor<T>& Q = g.Q;
  const Tensor<T>& K = g.K;
  const Tensor<T>& V = g.V;
  for (std::size_t j = 0; j < Tc; ++j) {
    const std::size_t c0 = j * Bc, c1 = std::min(m, c0 + Bc), cols = c1 - c0;
    Tensor<T> dK_j({cols, d_k}, T{0});  // running key and value gradients of this key tile
    Tensor<T> dV_j({cols, d_v}, T{0});
    for (std::size_t i = 0; i < Tr; ++i) {
      const std::size_t r0 = i * Br, r1 = std::min(n, r0 + Br), rows = r1 - r0;
      if (tile_masked_out(p.mask, b, r0, r1, c0, c1)) {
        if (watching) observer.on_backward_tile(BackwardTileEvent<T>{b, hd, i, j, r0, r1, c0, c1, true});
        continue;
      }
      Tensor<T> P({rows, cols}), dP({rows, cols}), dS({rows, cols}), dQ_add({rows, d_k});
      // each score's slope with respect to S' (the cap's 1 - tanh²), where a stage has one
      Tensor<T> slope(in.chain.sloped() ? Shape{rows, cols} : Shape{0, 0});
      meter.hold(bytes_of(P) + bytes_of(dP) + bytes_of(dS) + bytes_of(slope));
      recompute_tile_weights(in, Q, K, lse, b, hd, r0, c0, P, slope, storage);
      // dV_j += Pᵀ·dO_i      dV_j[c][e] += Σ_r P[r][c] · dO[r0+r][e]
      // dP = dO_i·V_jᵀ       dP[r][c] = Σ_e dO[r0+r][e] · V[c0+c][e]
      // dS = P ⊙ (dP - D_i)  the softmax's backward, with D = rowsum(dO ⊙ O) = rowsum(dA ⊙ A),
      //                      times the cap's slope with softcap: the gradient of S' itself
      // With dropout the keep mask Z is drawn again from the seed: P·V read P ⊙ Z/(1 - p), so dV_j sums
      // that, and dP is dO_i·V_jᵀ ⊙ Z/(1 - p), the gradient of the weights before dropout.
      for (std::size_t r = 0; r < rows; ++r) {
        const T* dO = &dO_h(b, hd, r0 + r, 0);
        for (std::size_t c = 0; c < cols; ++c) {
          const T* v = &V(b, kv, c0 + c, 0);
          T dot = 0;
          for (std::size_t e = 0; e < d_v; ++e) dot += dO[e] * v[e];
          T read = P(r, c);  // the weight P·V read
          if (in.chain.has(Stage::dropout)) {
            const T z = in.chain.factor({b, hd, r0 + r, c0 + c});
            dot *= z;
            read = stored(storage, read * z);
          }
          dP(r, c) = dot;
          T ds = P(r, c) * (dot - D(b, hd, r0 + r));
          if (!slope.empty()) ds *= slope(r, c);
          dS(r, c) = stored(storage, ds);
          if (read == 0) continue;  // a masked (or dropped) key adds nothing
          for (std::size_t e = 0; e < d_v; ++e) dV_j(c, e) += read * dO[e];
        }
      }
      // dQ_i += scale · dS·K_j   dQ[r0+r][e] += scale · Σ_c dS[r][c] · K[c0+c][e]
      // dK_j += scale · dSᵀ·Q_i  dK_j[c][e] += scale · Σ_r dS[r][c] · Q[r0+r][e]
      for (std::size_t r = 0; r < rows; ++r) {
        const T* q = &Q(b, hd, r0 + r, 0);
        for (std::size_t c = 0; c < cols; ++c) {
          const T ds =
              in.chain.backward(Stage::scale, {b, hd, r0 + r, c0 + c}, T{0}, dS(r, c));  // back through S' = S·scale
          if (ds == 0) continue;
          const T* k = &K(b, kv, c0 + c, 0);
          for (std::size_t e = 0; e < d_k; ++e) {
            dQ_add(r, e) += ds * k[e];
            dK_j(c, e) += ds * q[e];
          }
        }
        for (std::size_t e = 0; e < d_k; ++e) g.dQ(b, hd, r0 + r, e) += dQ_add(r, e);
      }
      if (watching)
        observer.on_backward_tile(
            BackwardTileEvent<T>{b, hd, i, j, r0, r1, c0, c1, false, &P, &dP, &dS, &dQ_add, &dK_j, &dV_j});
      meter.release(bytes_of(P) + bytes_of(dP) + bytes_of(dS) + bytes_of(slope));
    }
    // the key tile is done: its gradients join the key/value head's (summed over the query heads that share it)
    for (std::size_t c = 0; c < cols; ++c) {
      for (std::size_t e = 0; e < d_k; ++e) g.dK(b, kv, c0 + c, e) += dK_j(c, e);
      for (std::size_t e = 0; e < d_v; ++e) g.dV(b, kv, c0 + c, e) += dV_j(c, e);
    }
  }
}

// Back through the attention, flash's way, from dO_h = ∂L/∂head_outputs (B, h, n, d_v): D first, the sinks'
// gradients from it and lse, then passes 6 to 8 tile by tile per head. Sends dV to v_heads, dQ and dK to
// what the scores read (q_rot and k_rot with RoPE), and the sinks' gradients, into `d`.
template <class T>
void flash_backward_tiles(const Problem& p, const Inputs<T>& in, const FlashForward<T>& f, const Tensor<T>& dO_h,
                          TileSize tiles, Observer& observer, ByteMeter& meter, DType storage, Gradients<T>& d) {
  const Tensor<T>& O_h = f.x[slot(Step::head_outputs)];
  // D = rowsum(dO ⊙ O) first: equal to rowsum(dA ⊙ A), the softmax backward's D, with no A at hand
  // D[b][hd][i] = Σ_e dO_h[b][hd][i][e] · O_h[b][hd][i][e]                                 (B, h, n)
  Tensor<T> D({p.B, p.h, p.n});
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i) {
        T sum = 0;
        for (std::size_t e = 0; e < p.d_v; ++e) sum += dO_h(b, hd, i, e) * O_h(b, hd, i, e);
        D(b, hd, i) = sum;
      }
  if (observer.wants_backward_tiles()) observer.on_backward_rows(D);
  // the sinks' gradients from D and lse alone: a_sink = exp(sink - lse), dsink = -Σ a_sink · D
  if (in.chain.has(Stage::sinks))
    rows::send(d, Step::d_sinks,
               Tensor<T>({p.h}, d_sinks_from_rows<T>(in.chain.sinks(), f.lse.values(), D.values(), p.n)));

  // passes 6 to 8, tile by tile, per head
  const Step queries = rows::queries_read(p), keys = rows::keys_read(p);
  TileHeads<T> g{f.x[slot(queries)], f.x[slot(keys)], f.x[slot(Step::v_heads)], {}, {}, {}};
  g.dQ = Tensor<T>(g.Q.shape());
  g.dK = Tensor<T>(g.K.shape());
  g.dV = Tensor<T>(g.V.shape());
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      flash_backward_head(p, in, g, f.lse, dO_h, D, b, hd, tiles, observer, meter, storage);
  rows::send(d, Step::v_heads, std::move(g.dV));
  rows::send(d, queries, std::move(g.dQ));
  rows::send(d, keys, std::move(g.dK));
}

// The flash forward pass, then FlashAttention-2's backward: the rows of engine/rows.hpp walked back as
// naive walks them (the output projection, the merge, RoPE, the split and the projections, each gradient
// kept when whole), and in place of the score steps, which flash never forms whole, the tiles
// (flash_backward_tiles), sent from the head outputs' gradient. Returns the forward's result.
template <class T>
AttentionResult<T> run_flash_backward(const Problem& p, Observer& observer, TileSize tiles,
                                      DType storage = DType::float32) {
  require_tiles("run_flash_backward", tiles);
  require_storage<T>("run_flash_backward", storage);
  const Inputs<T> in(p, storage);
  const RowContext<T> c{p, in};
  const Keeper<T> keep(observer, storage);
  FlashForward<T> f = flash_forward(p, in, observer, tiles, storage);
  Gradients<T> d;
  d[slot(Step::output)] = upstream_gradient<T>(p, storage);  // dY (B, n, d_out)
  ByteMeter meter;
  const auto send = [&](Step s, const Tensor<T>& dy, const ForwardValues<T>& x, Gradients<T>& into) {
    if (s == Step::head_outputs) return flash_backward_tiles(p, in, f, dy, tiles, observer, meter, storage, into);
    row_of<T>(s).backward(dy, x, c, into);
  };
  walk_backward<T>(p, f.x, d, send, [&keep](Step g, Tensor<T> value) { return keep(g, std::move(value)); });
  return {std::move(f.x[slot(Step::output)]), find_empty_rows(p), std::max(f.peak_bytes, meter.peak()),
          std::move(f.lse)};
}

// Compiled once, in engine/instances.cpp, rather than in every file that runs the engine.
extern template AttentionResult<float> run_naive_backward<float>(const Problem&, Observer&, DType);
extern template AttentionResult<double> run_naive_backward<double>(const Problem&, Observer&, DType);
extern template AttentionResult<long double> run_naive_backward<long double>(const Problem&, Observer&, DType);
extern template AttentionResult<float> run_flash_backward<float>(const Problem&, Observer&, TileSize, DType);
extern template AttentionResult<double> run_flash_backward<double>(const Problem&, Observer&, TileSize, DType);

}  // namespace attn
