#pragma once
// How much memory a run will need, worked out from the sizes alone, before anything is allocated. Counted
// in 64 bits on every platform: where size_t has 32 (the explorer's WebAssembly core), a run of 5 GiB
// would otherwise be "too large to count" rather than 5 GiB over the limit.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "model/problem.hpp"
#include "model/run.hpp"

namespace attn {

// A count of values or bytes.
using Count = std::uint64_t;
inline constexpr Count too_large = std::numeric_limits<Count>::max();

// a · b, or too_large when that does not fit in 64 bits (a size computation must not wrap).
inline Count checked_mul(Count a, Count b) {
  if (a == too_large || b == too_large) return too_large;
  if (a != 0 && b > too_large / a) return too_large;
  return a * b;
}
inline Count checked_add(Count a, Count b) { return a > too_large - b ? too_large : a + b; }

template <class... Sizes>
Count product(Sizes... sizes) {
  Count out = 1;
  ((out = checked_mul(out, sizes)), ...);
  return out;
}

struct MemoryEstimate {
  Count engine = 0;  // the inputs in the run's dtype, projections, heads and score buffers
  Count trace = 0;   // the copies a trace keeps (double), and its JSON text when asked for
  Count total() const { return checked_add(engine, trace); }
};

// What a run does, as far as memory goes.
struct RunShape {
  bool naive = true;                   // the naive engine runs
  bool flash = false;                  // the flash engine runs
  std::size_t scalar = 4;              // bytes per value of the dtype
  std::size_t reference_scalar = 0;    // compare's wider naive reference: its bytes per value, or 0
  bool shared_traced = false;          // some of q … v_heads, head_outputs, concat, output are kept
  std::size_t score_steps_traced = 0;  // how many of scores, scaled, masked, weights are kept
  bool tiles_traced = false;           // the flash tiles are kept
  bool json = false;                   // the trace is also written as JSON text
  TileSize tile_size;
  bool backward = false;                        // the backward pass runs after the forward
  std::size_t gradient_score_steps_traced = 0;  // of d_weights, d_masked, d_scaled, d_scores (naive)
};

// Values of one engine run that do not depend on the engine: inputs, projections, heads, outputs.
inline Count shared_values(const Problem& p) {
  const Count B = p.B, n = p.n, m = p.m;
  Count v = 0;
  v = checked_add(v, product(B, n, p.d_model));                                     // X
  v = checked_add(v, product(B, m, p.d_context));                                   // C
  v = checked_add(v, product(p.d_model, p.h, p.d_k));                               // W_q
  v = checked_add(v, product(p.d_context, p.g, checked_add(p.d_k, p.d_v)));         // W_k, W_v
  v = checked_add(v, product(p.h, p.d_v, p.d_out));                                 // W_o
  v = checked_add(v, product(2, B, n, p.h, p.d_k));                                 // Q and its heads
  v = checked_add(v, product(2, B, m, p.g, checked_add(p.d_k, p.d_v)));             // K, V and their heads
  v = checked_add(v, product(3, B, n, checked_add(product(p.h, p.d_v), p.d_out)));  // head outputs, concat, output
  if (p.rope) {
    v = checked_add(v, product(B, checked_add(product(n, p.h), product(m, p.g)), p.d_k));  // q_rot, k_rot
    v = checked_add(v, product(2, checked_add(n, m), p.rope->dims));                       // cos and sin
  }
  return v;
}

// The estimate for a run of `shape` on `p`; too_large when a size computation would overflow.
inline MemoryEstimate estimate_memory(const Problem& p, const RunShape& shape) {
  MemoryEstimate e;
  const Count B = p.B, h = p.h, n = p.n, m = p.m;
  const Count scores = product(B, h, n, m);  // one (B, h, n, m) buffer
  // The engines run one after another, so the most any one of them holds is what counts.
  const Count naive = checked_add(shared_values(p), checked_mul(2, scores));  // two score buffers at a time
  const Count flash =
      checked_add(shared_values(p), product(2, shape.tile_size.Br, checked_add(shape.tile_size.Bc, p.d_v + 3)));
  // The backward pass holds a gradient of every shared value beside it (the parameters' too), and naive
  // three score buffers at a time (A, dA, and the next of dS'', dS', dS), four with softcap (the capped
  // scores kept for the cap's slope): tests/unit/row_walks_test.cpp counts them.
  const Count backward_naive = checked_add(checked_mul(2, shared_values(p)), checked_mul(p.softcap ? 4 : 3, scores));
  const Count backward_flash = checked_add(checked_mul(2, shared_values(p)),
                                           product(3, shape.tile_size.Br, checked_add(shape.tile_size.Bc, p.d_k)));
  if (shape.naive) e.engine = std::max(e.engine, checked_mul(shape.backward ? backward_naive : naive, shape.scalar));
  if (shape.flash) e.engine = std::max(e.engine, checked_mul(shape.backward ? backward_flash : flash, shape.scalar));
  // compare --backward keeps every step of both engines in double and of its reference one precision up:
  // nine score-sized steps (five forward, four backward) and every shared value and its gradient.
  if (shape.backward && shape.reference_scalar) {
    const Count every = checked_add(checked_mul(9, scores), checked_mul(2, shared_values(p)));
    e.engine = checked_add(e.engine, checked_mul(every, checked_add(16, shape.reference_scalar)));
  }
  // compare's reference: naive one precision up, while the noise floor keeps Q, K, V, the head outputs
  // and a bound for each, in double: about twice the shared values again.
  if (shape.reference_scalar)
    e.engine =
        std::max(e.engine, checked_add(checked_mul(naive, shape.reference_scalar), product(2, shared_values(p), 8)));

  // A trace keeps doubles: the shared steps at most once each, the score steps, and the tiles.
  Count kept = 0;
  if (shape.shared_traced) kept = shared_values(p);
  kept = checked_add(kept, checked_mul(shape.score_steps_traced, scores));
  if (shape.backward) {
    kept = checked_add(kept, checked_mul(2, shared_values(p)));  // the gradients of the shared steps, at most
    kept = checked_add(kept, checked_mul(shape.gradient_score_steps_traced, scores));
  }
  if (shape.flash && shape.tiles_traced && shape.backward) {
    const Count Tr = (n + shape.tile_size.Br - 1) / shape.tile_size.Br,
                Tc = (m + shape.tile_size.Bc - 1) / shape.tile_size.Bc;
    const Count per_tile = checked_add(
        product(3, shape.tile_size.Br, shape.tile_size.Bc),
        checked_add(product(shape.tile_size.Br, p.d_k), product(shape.tile_size.Bc, checked_add(p.d_k, p.d_v))));
    kept = checked_add(kept, product(B, h, Tr, Tc, per_tile));
  }
  if (shape.flash && shape.tiles_traced) {
    const Count Tr = (n + shape.tile_size.Br - 1) / shape.tile_size.Br,
                Tc = (m + shape.tile_size.Bc - 1) / shape.tile_size.Bc;
    const Count per_tile = checked_add(product(2, shape.tile_size.Br, shape.tile_size.Bc),
                                       product(shape.tile_size.Br, checked_add(p.d_v, 5)));
    kept = checked_add(kept, product(B, h, Tr, Tc, per_tile));
  }
  e.trace = checked_mul(kept, 8);
  if (shape.json) e.trace = checked_add(e.trace, checked_mul(kept, 14));  // about 14 characters a number
  return e;
}

}  // namespace attn
