#pragma once
// The backward pass: every gradient of attention from dY = ∂L/∂Y (L = Σ Y ⊙ dY) back to the inputs and
// the weights, after the forward pass that it differentiates. The naive engine forms every gradient
// whole (run_naive_backward); the flash engine is FlashAttention-2's backward, tile by tile, with the
// weights recomputed from the forward's log-sum-exp (run_flash_backward). ref: FlashAttention-2
// (arXiv:2307.08691), Algorithm 2. Both share the passes before the weighted sum and after the scores.
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

// pass 5: back through the output projection and the merge of the heads (d_output, d_concat,
// d_head_outputs).                                                 dY (B, n, d_out) -> dO_h (B, h, n, d_v)
template <class T>
Tensor<T> backward_output(const Problem& p, const Inputs<T>& in, const Tensor<T>& dY, const Keeper<T>& keep,
                          Observer& observer) {
  report(observer, Step::d_output, dY);
  Tensor<T> dO = dY;  // without W_o the output is the merged heads: its gradient is dY itself
  if (p.has_output_projection()) {
    dO = keep(Step::d_concat, d_project_input(dY, in.W_o));  // (B, n, h·d_v)
  } else {
    report(observer, Step::d_concat, dO);
  }
  Tensor<T> dO_h = split_heads(dO, p.h);  // merge_heads's backward: (B, h, n, d_v)
  report(observer, Step::d_head_outputs, dO_h);
  return dO_h;
}

// The gradients of the heads as the scores and the weighted sum read them.
template <class T>
struct HeadGradients {
  Tensor<T> dQ;  // (B, h, n, d_k) of the turned queries with RoPE (d_q_rot), else of q_heads
  Tensor<T> dK;  // (B, g, m, d_k) likewise
  Tensor<T> dV;  // (B, g, m, d_v)
};

// A weight's gradient in the input file's layout: in × out, or out × in (PyTorch's).
template <class T>
Tensor<T> in_layout(const Problem& p, Tensor<T> dW) {
  return p.layout == Layout::out_in ? transposed(dW) : dW;
}

// passes 9 and 10: back through RoPE, the split into heads and the projections, to the inputs (d_q_heads
// … d_context) and the parameters (d_W_q … d_b_o). g.dQ and g.dK were kept already, as d_q_rot and
// d_k_rot with RoPE, else as d_q_heads and d_k_heads. O_h (B, h, n, d_v) and dY (B, n, d_out) give W_o's.
template <class T>
void backward_projections(const Problem& p, const Inputs<T>& in, HeadGradients<T> g, const Tensor<T>& O_h,
                          const Tensor<T>& dY, const Keeper<T>& keep, Observer& observer) {
  // pass 9: the rotation's transpose turns the gradients back; the merge undoes the split
  if (p.rope) {
    g.dQ = keep(Step::d_q_heads, d_rotate(g.dQ, in.cos_q, in.sin_q, p.rope->style));  // (B, h, n, d_k)
    g.dK = keep(Step::d_k_heads, d_rotate(g.dK, in.cos_k, in.sin_k, p.rope->style));  // (B, g, m, d_k)
  }
  const Tensor<T> dQ = merge_heads(g.dQ);  // (B, n, h·d_k)
  const Tensor<T> dK = merge_heads(g.dK);  // (B, m, g·d_k)
  const Tensor<T> dV = merge_heads(g.dV);  // (B, m, g·d_v)
  report(observer, Step::d_q, dQ);
  report(observer, Step::d_k, dK);
  report(observer, Step::d_v, dV);

  // pass 10: through the projections. X reaches L along three paths in self-attention (as a query, a
  // key and a value), so its gradient is their sum; with a context, the key and value paths are C's.
  const Tensor<T> dX_q = d_project_input(dQ, in.W_q);                                  // (B, n, d_model)
  const Tensor<T> dC = add(d_project_input(dK, in.W_k), d_project_input(dV, in.W_v));  // (B, m, d_context)
  if (p.cross) {
    keep(Step::d_X, dX_q);
    keep(Step::d_context, dC);
  } else {
    keep(Step::d_X, add(dX_q, dC));
  }
  keep(Step::d_W_q, in_layout(p, d_project_weight(in.X, dQ)));
  keep(Step::d_W_k, in_layout(p, d_project_weight(in.C, dK)));
  keep(Step::d_W_v, in_layout(p, d_project_weight(in.C, dV)));
  if (p.has_output_projection()) keep(Step::d_W_o, in_layout(p, d_project_weight(merge_heads(O_h), dY)));
  if (!p.b_q.empty()) keep(Step::d_b_q, d_project_bias(dQ));
  if (!p.b_k.empty()) keep(Step::d_b_k, d_project_bias(dK));
  if (!p.b_v.empty()) keep(Step::d_b_v, d_project_bias(dV));
  if (!p.b_o.empty()) keep(Step::d_b_o, d_project_bias(dY));
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

// P = exp(S - lse_i), S = Q_i·K_jᵀ through the score chain (model/score_chain.hpp): one tile's forward
// weights (P, rows × cols), recomputed from the one number per row that the forward kept, instead of an
// n × m matrix stored; where a stage after the scale has a slope of its own (the cap's), also the slope of
// each score with respect to S' (`slope`).
// P[r][c] = exp(chain(Σ_e Q[r0+r][e]·K[c0+c][e]) - lse[r0+r]), 0 where the mask forbids
template <class T>
void recompute_tile_weights(const Problem& p, const Inputs<T>& in, const FlashForward<T>& f, std::size_t b,
                            std::size_t hd, std::size_t r0, std::size_t c0, Tensor<T>& P, Tensor<T>& slope,
                            DType storage) {
  const std::size_t kv = kv_head_of(hd, p.h, p.g), d_k = p.d_k, rows = P.dim(0), cols = P.dim(1);
  const bool sloped = in.chain.sloped();
  for (std::size_t r = 0; r < rows; ++r) {
    const T lse = f.lse(b, hd, r0 + r);
    if (lse == -std::numeric_limits<T>::infinity()) continue;  // nothing to attend: P = 0
    const T* q = &f.heads.Q(b, hd, r0 + r, 0);
    for (std::size_t c = 0; c < cols; ++c) {
      const Where w{b, hd, r0 + r, c0 + c};
      if (!in.chain.allows(w)) continue;
      const T* k = &f.heads.K(b, kv, c0 + c, 0);
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
template <class T>
void flash_backward_head(const Problem& p, const Inputs<T>& in, const FlashForward<T>& f, const Tensor<T>& dO_h,
                         const Tensor<T>& D, std::size_t b, std::size_t hd, TileSize tiles, HeadGradients<T>& g,
                         Observer& observer, ByteMeter& meter, DType storage) {
  const std::size_t h = p.h, n = p.n, m = p.m, d_k = p.d_k, d_v = p.d_v, kv = kv_head_of(hd, h, p.g);
  const std::size_t Br = tiles.Br, Bc = tiles.Bc, Tr = (n + Br - 1) / Br, Tc = (m + Bc - 1) / Bc;
  const bool watching = observer.wants_backward_tiles();
  const DropoutMask mask(p.dropout.value_or(Dropout{}));  // used with dropout only
  const Tensor<T>& Q = f.heads.Q;
  const Tensor<T>& K = f.heads.K;
  const Tensor<T>& V = f.heads.V;
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
      recompute_tile_weights(p, in, f, b, hd, r0, c0, P, slope, storage);
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
          if (p.dropout) {
            const T z = mask.factor<T>(b, hd, r0 + r, c0 + c);
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

// The flash forward pass, then FlashAttention-2's backward pass tile by tile. Returns the forward's result.
template <class T>
AttentionResult<T> run_flash_backward(const Problem& p, Observer& observer, TileSize tiles,
                                      DType storage = DType::float32) {
  require_tiles("run_flash_backward", tiles);
  require_storage<T>("run_flash_backward", storage);
  const Inputs<T> in(p, storage);
  const Keeper<T> keep(observer, storage);
  const FlashForward<T> f = flash_forward(p, in, observer, tiles, storage);

  // pass 5: back through the output projection and the merge
  const Tensor<T> dY = upstream_gradient<T>(p, storage);  // (B, n, d_out)
  const Tensor<T> dO_h = backward_output(p, in, dY, keep, observer);

  // D = rowsum(dO ⊙ O) first: equal to rowsum(dA ⊙ A), the softmax backward's D, with no A at hand
  // D[b][hd][i] = Σ_e dO_h[b][hd][i][e] · O_h[b][hd][i][e]                                 (B, h, n)
  Tensor<T> D({p.B, p.h, p.n});
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i) {
        T sum = 0;
        for (std::size_t e = 0; e < p.d_v; ++e) sum += dO_h(b, hd, i, e) * f.O_h(b, hd, i, e);
        D(b, hd, i) = sum;
      }
  if (observer.wants_backward_tiles()) observer.on_backward_rows(D);
  // the sinks' gradients from D and lse alone: a_sink = exp(sink - lse), dsink = -Σ a_sink · D
  Tensor<T> d_sink;
  if (!p.sinks.empty())
    d_sink = Tensor<T>({p.h}, d_sinks_from_rows<T>(in.chain.sinks(), f.lse.values(), D.values(), p.n));

  // passes 6 to 8, tile by tile, per head
  HeadGradients<T> g{Tensor<T>(f.heads.Q.shape()), Tensor<T>(f.heads.K.shape()), Tensor<T>(f.heads.V.shape())};
  ByteMeter meter;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      flash_backward_head(p, in, f, dO_h, D, b, hd, tiles, g, observer, meter, storage);
  g.dV = keep(Step::d_v_heads, std::move(g.dV));
  g.dQ = keep(p.rope ? Step::d_q_rot : Step::d_q_heads, std::move(g.dQ));
  g.dK = keep(p.rope ? Step::d_k_rot : Step::d_k_heads, std::move(g.dK));

  // passes 9 and 10
  backward_projections(p, in, std::move(g), f.O_h, dY, keep, observer);
  if (!p.sinks.empty()) keep(Step::d_sinks, std::move(d_sink));
  return {f.Y, find_empty_rows(p), std::max(f.peak_bytes, meter.peak()), f.lse};
}

// Compiled once, in engine/instances.cpp, rather than in every file that runs the engine.
extern template AttentionResult<float> run_naive_backward<float>(const Problem&, Observer&, DType);
extern template AttentionResult<double> run_naive_backward<double>(const Problem&, Observer&, DType);
extern template AttentionResult<long double> run_naive_backward<long double>(const Problem&, Observer&, DType);
extern template AttentionResult<float> run_flash_backward<float>(const Problem&, Observer&, TileSize, DType);
extern template AttentionResult<double> run_flash_backward<double>(const Problem&, Observer&, TileSize, DType);

}  // namespace attn
