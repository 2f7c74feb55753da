#pragma once
// Flash attention: the same result as naive, computed tile by tile with an online softmax so that
// nothing of size n × m is ever held. ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 1.
// In a half storage type (engine/common.hpp) q, k and v are stored as naive stores them; S, m, l, alpha
// and the running O stay in T = float, P is rounded before P·V (online_softmax_update), and O / l is
// rounded as it is stored.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>

#include "engine/common.hpp"
#include "engine/rows.hpp"
#include "model/run.hpp"
#include "ops/online_softmax.hpp"

namespace attn {

// Does the mask leave query rows [r0, r1) nothing at all among keys [c0, c1)?
inline bool tile_masked_out(const Mask& mask, std::size_t b, std::size_t r0, std::size_t r1, std::size_t c0,
                            std::size_t c1) {
  for (std::size_t r = r0; r < r1; ++r) {
    const auto [first, last] = mask.band(r);
    for (std::size_t c = std::max(first, c0); c < std::min(last, c1); ++c)
      if (mask.allows(b, r, c)) return false;
  }
  return true;
}

// What the flash forward pass leaves for its backward pass: the values of the steps it forms whole (the
// rows before the scores and after the head outputs, the sinks' shares, the head outputs), the log-sum-exp
// of every row and the most score-tile bytes held at once.
template <class T>
struct FlashForward {
  ForwardValues<T> x;  // by slot; the score steps, which flash never forms whole, empty
  Tensor<T> lse;       // (B, h, n)
  std::size_t peak_bytes = 0;
};

inline void require_tiles(const char* who, TileSize tiles) {
  if (tiles.Br == 0 || tiles.Bc == 0)
    throw std::invalid_argument(fmt::format("{}: tiles of {} × {}: both sides must be >= 1", who, tiles.Br, tiles.Bc));
}

// One tile's scores: S = Q_i·K_jᵀ through the score chain (model/score_chain.hpp: scaled, capped with
// softcap, + ALiBi's bias of this block), -inf where the mask forbids. Q (B, h, n, d_k), K (B, g, m, d_k).
// S[r][c] = chain(Σ_e Q[r0+r][e] · K[c0+c][e]) at (b, hd, r0+r, c0+c)
template <class T>
Tensor<T> tile_scores(const Inputs<T>& in, const Tensor<T>& Q, const Tensor<T>& K, std::size_t b, std::size_t hd,
                      std::size_t r0, std::size_t c0, std::size_t rows, std::size_t cols) {
  const std::size_t kv = kv_head_of(hd, Q.dim(1), K.dim(1)), d_k = Q.dim(3);
  Tensor<T> S({rows, cols});
  for (std::size_t r = 0; r < rows; ++r) {
    const T* q = &Q(b, hd, r0 + r, 0);
    for (std::size_t c = 0; c < cols; ++c) {
      const T* k = &K(b, kv, c0 + c, 0);
      T dot = 0;
      for (std::size_t e = 0; e < d_k; ++e) dot += q[e] * k[e];
      S(r, c) = in.chain.score({b, hd, r0 + r, c0 + c}, dot);
    }
  }
  return S;
}

// Each sink's share of its row, from what the pass keeps: exp(sink - M) / l = exp(sink - lse).  -> (B, h, n)
template <class T>
Tensor<T> sink_shares(const Inputs<T>& in, const Tensor<T>& lse) {
  Tensor<T> share(lse.shape());
  for (std::size_t b = 0; b < lse.dim(0); ++b)
    for (std::size_t hd = 0; hd < lse.dim(1); ++hd)
      for (std::size_t r = 0; r < lse.dim(2); ++r) share(b, hd, r) = std::exp(in.chain.sink(hd) - lse(b, hd, r));
  return share;
}

// The tiles: per query tile, a sweep over the key tiles with the online softmax. Q (B, h, n, d_k) and
// K (B, g, m, d_k) as the scores read them, V (B, g, m, d_v) -> the head outputs O_h (B, h, n, d_v), and
// the log-sum-exp of every row into lse (B, h, n).
template <class T>
Tensor<T> flash_tiles(const Problem& p, const Inputs<T>& in, const Tensor<T>& Q, const Tensor<T>& K, const Tensor<T>& V,
                      Observer& observer, TileSize tiles, DType storage, Tensor<T>& lse, ByteMeter& meter) {
  const std::size_t B = p.B, h = p.h, g = p.g, n = p.n, m = p.m, d_v = p.d_v;
  const std::size_t Br = tiles.Br, Bc = tiles.Bc;
  const std::size_t Tr = (n + Br - 1) / Br, Tc = (m + Bc - 1) / Bc;  // the last tiles may be partial
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const bool watching = observer.wants_tiles();
  Tensor<T> O_h({B, h, n, d_v});  // normalised head outputs
  lse = Tensor<T>({B, h, n});     // log-sum-exp of each row: what a backward pass would keep
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      for (std::size_t i = 0; i < Tr; ++i) {
        const std::size_t r0 = i * Br, r1 = std::min(n, r0 + Br), rows = r1 - r0;
        // The running row max and sum start empty (-inf, 0), or with the head's sink folded in (sink, 1): the
        // sink is one more key, of value 0, so it changes m and l but not O, and the online softmax gives the
        // same m, l and O whichever tile a key comes in; the sink must only come once, so it comes first.
        const bool sink = in.chain.has(Stage::sinks);
        Tensor<T> m_i({rows}, sink ? in.chain.sink(hd) : minus_inf);  // running row max
        Tensor<T> l_i({rows}, sink ? T{1} : T{0});                    // running row sum
        Tensor<T> O_i({rows, d_v}, T{0});                             // running unnormalised output
        for (std::size_t j = 0; j < Tc; ++j) {
          const std::size_t c0 = j * Bc, c1 = std::min(m, c0 + Bc), cols = c1 - c0;
          if (tile_masked_out(p.mask, b, r0, r1, c0, c1)) {
            if (watching) observer.on_tile(TileEvent<T>{b, hd, i, j, r0, r1, c0, c1, true});
            continue;
          }
          Tensor<T> S = tile_scores(in, Q, K, b, hd, r0, c0, rows, cols);
          Tensor<T> V_j({cols, d_v});  // (Bc, d_v) this tile's values
          for (std::size_t c = 0; c < cols; ++c)
            for (std::size_t e = 0; e < d_v; ++e) V_j(c, e) = V(b, kv, c0 + c, e);

          // dropout: this tile's keep mask, 1/(1 - p) where kept and 0 where dropped, drawn from the seed and
          // the entries' positions, the same numbers naive draws
          Tensor<T> drop;
          if (in.chain.has(Stage::dropout)) {
            drop = Tensor<T>({rows, cols});
            for (std::size_t r = 0; r < rows; ++r)
              for (std::size_t c = 0; c < cols; ++c) drop(r, c) = in.chain.factor({b, hd, r0 + r, c0 + c});
          }
          OnlineSoftmaxStep<T> step =
              online_softmax_update(S, m_i, l_i, O_i, V_j, storage, drop.empty() ? nullptr : &drop);
          const std::size_t tile_bytes = bytes_of(S) + bytes_of(step.P) + bytes_of(step.P_drop) + bytes_of(drop);
          meter.hold(tile_bytes);
          if (watching) {
            TileEvent<T> e{b,  hd,   i,           j,           r0,      r1,   c0,          c1,     false,
                           &S, &m_i, &step.m_new, &step.alpha, &step.P, &l_i, &step.l_new, &step.O};
            if (!drop.empty()) e.P_drop = &step.P_drop;
            observer.on_tile(e);
          }
          meter.release(tile_bytes);
          m_i = std::move(step.m_new);
          l_i = std::move(step.l_new);
          O_i = std::move(step.O);
        }
        // O_i / l_i once at the end, and lse = m + log l
        Tensor<T> lse_i;
        finish_rows(O_i, lse_i, m_i, l_i);
        round_stored(O_i, storage);  // lse stays in T, as a backward pass keeps it
        if (watching) observer.on_query_tile_done(QueryTileDone<T>{b, hd, i, r0, r1, &O_i, &lse_i});
        for (std::size_t r = 0; r < rows; ++r) {
          lse(b, hd, r0 + r) = lse_i(r);
          for (std::size_t e = 0; e < d_v; ++e) O_h(b, hd, r0 + r, e) = O_i(r, e);
        }
      }
    }
  return O_h;
}

// The forward pass: the rows of engine/rows.hpp around the attention (walk_around_attention: the
// projections, the heads and RoPE before it, the merge and the output projection after it), each kept as
// naive keeps it, and in place of the score steps, which flash never forms whole, the tiles; the sinks'
// shares from lse.
template <class T>
FlashForward<T> flash_forward(const Problem& p, const Inputs<T>& in, Observer& observer, TileSize tiles,
                              DType storage) {
  FlashForward<T> f;
  ByteMeter meter;
  f.x = walk_around_attention(p, in, Keeper<T>(observer, storage), [&](const ForwardValues<T>& x) {
    AttentionOut<T> out;
    out.head_outputs = flash_tiles(p, in, x[slot(rows::queries_read(p))], x[slot(rows::keys_read(p))],
                                   x[slot(Step::v_heads)], observer, tiles, storage, f.lse, meter);
    observer.on_lse(f.lse);  // the result of the pass, like its output: reported whether or not tiles are watched
    if (in.chain.has(Stage::sinks)) out.sink_weights = sink_shares(in, f.lse);
    return out;
  });
  f.peak_bytes = meter.peak();
  return f;
}

template <class T>
AttentionResult<T> run_flash(const Problem& p, Observer& observer, TileSize tiles, DType storage = DType::float32) {
  require_tiles("run_flash", tiles);
  require_storage<T>("run_flash", storage);
  const Inputs<T> in(p, storage);
  FlashForward<T> f = flash_forward(p, in, observer, tiles, storage);
  return {std::move(f.x[slot(Step::output)]), find_empty_rows(p), f.peak_bytes, std::move(f.lse)};
}

// Compiled once, in engine/instances.cpp, rather than in every file that runs the engine.
extern template AttentionResult<float> run_flash<float>(const Problem&, Observer&, TileSize, DType);
extern template AttentionResult<double> run_flash<double>(const Problem&, Observer&, TileSize, DType);

}  // namespace attn
