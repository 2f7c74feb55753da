#pragma once
// Decoding on the fast path: one new token's attention against a KV cache, unwatched, with the flash pass's
// vectorised tile kernel (kernel::flash_tile), for bench --decode. The cache keeps each key/value head's keys
// in tiles of Bc, transposed, and its values in tiles, which is how the kernel reads them, so a decode step
// reads the cache once and copies nothing. The query heads that share a key/value head (GQA, MQA) are one
// query tile: the cache they share is read once for all of them.
//
// Split (flash-decoding): the cache's tiles are cut into S chunks; every (batch item, key/value head, chunk)
// is one work item for the threads, each keeping its own running max m, sum l and unnormalised output O; the
// chunks are merged at the end: M = max_s m_s, l = Σ_s l_s·exp(m_s - M), O = Σ_s O_s·exp(m_s - M), o = O / l.
// That is merge_chunks (ops/online_softmax.hpp) on lse_s = m_s + log l_s, without forming the logs.
// ref: Dao, Haziza, Massa and Sizov, "Flash-Decoding for long-context inference" (2023).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "engine/fast.hpp"
#include "kernel/kernels.hpp"
#include "model/heads.hpp"
#include "model/problem.hpp"

namespace attn {

// The cache of B sequences of g key/value heads, as the tile kernel reads it: per sequence and head, tiles
// of Bc keys, Kt (d_k, Bc) with kt[e·Bc + c] = K[c][e] and V (Bc, dv_pad); columns past the cache's length
// are zero. Every sequence holds the same number of tokens.
template <class T>
class FastKvCache {
 public:
  FastKvCache(std::size_t B, std::size_t g, std::size_t d_k, std::size_t d_v, std::size_t capacity, kernel::Isa isa,
              std::size_t Bc = 128)
      : B_(B),
        g_(g),
        d_k_(d_k),
        d_v_(d_v),
        Bc_(fast::round_up(Bc, kernel::layout_of(isa, T{}).lanes)),
        dv_pad_(fast::round_up(std::max<std::size_t>(d_v, 1), kernel::layout_of(isa, T{}).lanes)),
        tiles_((capacity + Bc_ - 1) / Bc_),
        kt_(B * g * tiles_ * d_k * Bc_, T{0}),
        v_(B * g * tiles_ * Bc_ * dv_pad_, T{0}) {}

  // One token more for every sequence: k (B, g·d_k) and v (B, g·d_v), rows contiguous.
  void append(const T* k, const T* v) {
    if (length_ == tiles_ * Bc_) throw std::length_error("FastKvCache: the cache is full");
    const std::size_t tile = length_ / Bc_, c = length_ % Bc_;
    for (std::size_t b = 0; b < B_; ++b)
      for (std::size_t kv = 0; kv < g_; ++kv) {
        const std::size_t at = (b * g_ + kv) * tiles_ + tile;
        const T* key = k + (b * g_ + kv) * d_k_;
        const T* value = v + (b * g_ + kv) * d_v_;
        for (std::size_t e = 0; e < d_k_; ++e) kt_[at * d_k_ * Bc_ + e * Bc_ + c] = key[e];
        std::copy(value, value + d_v_, v_.data() + (at * Bc_ + c) * dv_pad_);
      }
    ++length_;
  }

  std::size_t length() const { return length_; }
  std::size_t tiles_used() const { return (length_ + Bc_ - 1) / Bc_; }
  std::size_t Bc() const { return Bc_; }
  std::size_t dv_pad() const { return dv_pad_; }
  std::size_t B() const { return B_; }
  std::size_t g() const { return g_; }
  const T* kt(std::size_t b, std::size_t kv, std::size_t tile) const {
    return kt_.data() + ((b * g_ + kv) * tiles_ + tile) * d_k_ * Bc_;
  }
  const T* v(std::size_t b, std::size_t kv, std::size_t tile) const {
    return v_.data() + ((b * g_ + kv) * tiles_ + tile) * Bc_ * dv_pad_;
  }
  // The bytes a decode step reads: every cached key and value of every sequence and head, as stored.
  std::uint64_t bytes_read() const {
    return static_cast<std::uint64_t>(B_) * g_ * length_ * (d_k_ + dv_pad_) * sizeof(T);
  }

 private:
  std::size_t B_, g_, d_k_, d_v_, Bc_, dv_pad_, tiles_;
  std::size_t length_ = 0;
  std::vector<T> kt_, v_;
};

struct FastDecodeOptions {
  std::size_t threads = 1;
  std::size_t split = 1;  // chunks of the cache per (sequence, key/value head)
  kernel::Isa isa = kernel::isa();
};

// Why the fast decode cannot run `p`, or nothing: it takes causal self-attention (engine/decoder.hpp) in float32
// or float64, and no ALiBi (whose slope differs between the query heads it puts in one tile).
inline std::optional<std::string> fast_decode_refusal(const Problem& p) {
  if (p.alibi) return "the fast decode path has no ALiBi";
  return std::nullopt;
}

namespace fast_decoding {

// One chunk's running state for the query heads of one key/value head.
template <class T>
struct Part {
  std::vector<T> m, l, O;  // (rows_pad), (rows_pad), (rows_pad, dv_pad)
};

template <class T>
struct Scratch {
  std::vector<T> q, s, alpha, row_max;
  std::vector<std::int64_t> lo, hi;
};

// The shape of a step: its query tile of `group` heads, the cache's tiles and chunks, the window's first key.
struct StepShape {
  std::size_t group = 1, rows_pad = 1, Bc = 1, dv_pad = 1, lanes = 1, L = 0, tiles = 0, S = 1, first = 0;
};

// Chunk `chunk` of key/value head kv of sequence b: the query heads that read it folded over the chunk's tiles,
// from m = -inf, l = 0 (or from the sink, m = sink and l = 1, in chunk 0: it joins each row once).
template <class T>
void fold_chunk(const Problem& p, const ScoreChain<T>& chain, const StepShape& t, const FastKvCache<T>& cache,
                const T* q, std::size_t b, std::size_t kv, std::size_t chunk, Scratch<T>& w, Part<T>& part,
                kernel::Isa isa) {
  const std::size_t h = p.h, d_k = p.d_k;
  if (w.q.empty()) {
    w.q.resize(t.rows_pad * d_k);
    w.s.resize(t.rows_pad * t.Bc);
    w.alpha.resize(t.rows_pad);
    w.row_max.resize(t.rows_pad * t.lanes);
    w.lo.resize(t.rows_pad);
    w.hi.resize(t.rows_pad);
  }
  std::fill(w.q.begin(), w.q.end(), T{0});
  for (std::size_t r = 0; r < t.group; ++r)
    std::copy_n(q + (b * h + kv * t.group + r) * d_k, d_k, w.q.data() + r * d_k);
  const bool sink = chain.has(Stage::sinks) && chunk == 0;
  part.m.assign(t.rows_pad, -std::numeric_limits<T>::infinity());
  part.l.assign(t.rows_pad, T{0});
  part.O.assign(t.rows_pad * t.dv_pad, T{0});
  for (std::size_t r = 0; r < t.group && sink; ++r) {
    part.m[r] = chain.sink(kv * t.group + r);
    part.l[r] = T{1};
  }
  for (std::size_t j = chunk * t.tiles / t.S; j < (chunk + 1) * t.tiles / t.S; ++j) {
    const std::size_t c0 = j * t.Bc, cols = std::min(t.Bc, t.L - c0);
    if (c0 + cols <= t.first) continue;  // the window has left the whole tile behind
    std::fill(w.lo.begin(), w.lo.end(), static_cast<std::int64_t>(t.first > c0 ? t.first - c0 : 0));
    std::fill(w.hi.begin(), w.hi.end(), static_cast<std::int64_t>(cols));
    kernel::FlashTileArgs<T> a;
    a.rows = t.group;
    a.rows_pad = t.rows_pad;
    a.cols = cols;
    a.cols_pad = t.Bc;
    a.d_k = d_k;
    a.d_v = p.d_v;
    a.dv_pad = t.dv_pad;
    a.q = w.q.data();
    a.kt = cache.kt(b, kv, j);
    a.v = cache.v(b, kv, j);
    chain.fill(a.score, {.hd = kv * t.group, .r0 = 0, .lo = w.lo.data(), .hi = w.hi.data()});
    a.s = w.s.data();
    a.m = part.m.data();
    a.l = part.l.data();
    a.alpha = w.alpha.data();
    a.row_max = w.row_max.data();
    a.o = part.O.data();
    kernel::flash_tile(isa, a);
  }
}

// Row r of the S chunks `parts` merged into `out` (d_v): each chunk weighted by exp(m_s - M), then O / l once.
template <class T>
void merge_row(const Part<T>* parts, std::size_t S, std::size_t r, std::size_t d_v, std::size_t dv_pad, T* out) {
  T M = -std::numeric_limits<T>::infinity();
  for (std::size_t s = 0; s < S; ++s) M = std::max(M, parts[s].m[r]);
  std::fill(out, out + d_v, T{0});
  if (M == -std::numeric_limits<T>::infinity()) return;  // nothing to attend: zero output
  T l = 0;
  for (std::size_t s = 0; s < S; ++s) {
    const Part<T>& part = parts[s];
    if (part.l[r] == 0) continue;         // an empty chunk adds nothing
    const T w = std::exp(part.m[r] - M);  // the chunk was summed against its own, smaller max
    l += w * part.l[r];
    for (std::size_t c = 0; c < d_v; ++c) out[c] += w * part.O[r * dv_pad + c];
  }
  for (std::size_t c = 0; c < d_v; ++c) out[c] /= l;
}

}  // namespace fast_decoding

// One decode step's attention on the fast path: the new token (at `position`, the cache holding it already) with
// queries q (B, h·d_k) against `cache` -> o (B, h·d_v), for `p`'s scale, softcap, sinks and sliding window.
template <class T>
void fast_decode_step(const Problem& p, std::size_t position, const FastKvCache<T>& cache, const T* q, T* o,
                      const FastDecodeOptions& opt) {
  using namespace fast_decoding;
  const kernel::Layout layout = kernel::layout_of(opt.isa, T{});
  const std::size_t B = cache.B(), g = p.g;
  StepShape t;
  t.group = p.h / g;
  t.rows_pad = fast::round_up(t.group, layout.row_block);
  t.lanes = layout.lanes;
  t.Bc = cache.Bc();
  t.dv_pad = cache.dv_pad();
  t.L = cache.length();
  t.tiles = cache.tiles_used();
  t.S = std::max<std::size_t>(1, opt.split);
  // the keys the mask leaves to the token: all of them, or a sliding window's last w
  if (p.mask.kind == MaskKind::sliding_window && position + 1 > p.mask.window) t.first = position + 1 - p.mask.window;

  const ScoreChain<T> chain(p, fast::unrounded<T>());

  // pass 1: every (sequence, key/value head, chunk) folds its chunk's tiles on its own, one work item each
  const std::size_t items = B * g * t.S;
  std::vector<Part<T>> parts(items);
  const std::size_t threads = std::min<std::size_t>(std::max<std::size_t>(opt.threads, 1), items);
  std::vector<Scratch<T>> scratch(threads);
  kernel::parallel_for(items, threads, [&](std::size_t item, std::size_t worker) {
    fold_chunk(p, chain, t, cache, q, item / (g * t.S), item / t.S % g, item % t.S, scratch[worker], parts[item],
               opt.isa);
  });
  // pass 2: the chunks merged
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t kv = 0; kv < g; ++kv)
      for (std::size_t r = 0; r < t.group; ++r)
        merge_row(&parts[(b * g + kv) * t.S], t.S, r, p.d_v, t.dv_pad, o + (b * p.h + kv * t.group + r) * p.d_v);
}

}  // namespace attn
