#pragma once
// Decoding: attention at inference, one token at a time. The prompt runs as one causal pass (prefill) whose
// keys and values fill the cache (engine/kv_cache.hpp); every later token is then one decode step: its q, k
// and v projected (and turned by RoPE at its own position), k and v appended to the cache, its one row of
// scores against the whole cache, the softmax, the weighted sum and its output row. Each step is the rows of
// engine/rows.hpp on a part of the problem (model/slice.hpp): the new token alone for q … k_rot, the token
// against the cache for scores … output, with the cache standing where the keys and values would be.
//
// With `split` (flash-decoding) the cache is cut into chunks: each chunk's softmax and weighted sum are done
// on their own, keeping the chunk's log-sum-exp, and the chunks are merged exactly (merge_chunks,
// ops/online_softmax.hpp) into the head's output; the weights are never formed whole.
//
// Unsplit, a decode step computes every value of its row with the same sums in the same order as the plain
// pass over the whole input does for that row: the keys after it are -inf there, so they add exp(-inf) = 0
// to the softmax's sum and nothing to the weighted sum. Its output is the plain pass's row bit for bit.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/kv_cache.hpp"
#include "engine/rows.hpp"
#include "model/decode_plan.hpp"
#include "model/slice.hpp"
#include "ops/online_softmax.hpp"

namespace attn {

// The pages of the pool of a paged decode of `p`: twice what its sequences need, as a server's pool has room
// for sequences that come and go, so that the pages a sequence draws are spread over it.
inline std::size_t pool_pages_for(const Problem& p, std::size_t page_size) {
  return page_size == 0 ? 0 : 2 * p.B * ((p.n + page_size - 1) / page_size);
}

// Flash-decoding's chunks of one decode step, for every batch item and head.
template <class T>
struct SplitState {
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // (S) [begin, end) of the cache
  Tensor<T> o;                                              // (B, h, S, d_v) each chunk's own output
  Tensor<T> lse;                                            // (B, h, S) its log-sum-exp, -inf when empty
  Tensor<T> share;                                          // (B, h, S) exp(lse_s - lse): its weight in the merge
  Tensor<T> merged_lse;                                     // (B, h) log Σ_s exp(lse_s)
};

// One decode step as the engine made it: valid during the call.
template <class T>
struct DecodeStepEvent {
  std::size_t position;        // of the new token, 0 … n - 1
  const Tensor<T>& k_cache;    // (B, g, L, d_k) after the append: the keys as the scores read them
  const Tensor<T>& v_cache;    // (B, g, L, d_v)
  const SplitState<T>* split;  // with a split, else nullptr
  const KvCache<T>& cache;     // its block tables, when paged
};

// Watches a decode: the prefill's steps, each decode step's steps, then each step whole.
class DecodeObserver {
 public:
  virtual ~DecodeObserver() = default;
  // The prompt's causal pass (problem: the prompt alone).
  virtual Observer& prefill(const Problem& prompt) = 0;
  // Decode step `position`: its q … k_rot are of `token` (the new token alone), its scores … output of
  // `attend` (the token against every key so far).
  virtual Observer& step(std::size_t position, const Problem& token, const Problem& attend) = 0;
  virtual void on_step(const DecodeStepEvent<float>&) {}
  virtual void on_step(const DecodeStepEvent<double>&) {}
};

template <class T>
struct DecodeResult {
  Tensor<T> output;  // (B, n, d_out): the prompt's rows from the prefill, then one row per decode step
};

namespace decoding {

// Copies row `i` of y (B, 1, d) into row `at` of Y (B, n, d), or rows [0, r) of y (B, r, d) into Y's first.
template <class T>
void put_rows(Tensor<T>& Y, const Tensor<T>& y, std::size_t at) {
  for (std::size_t b = 0; b < y.dim(0); ++b)
    for (std::size_t i = 0; i < y.dim(1); ++i)
      for (std::size_t c = 0; c < y.dim(2); ++c) Y(b, at + i, c) = y(b, i, c);
}

// (B, g, t, d) -> sequence b's (g, t, d).
template <class T>
Tensor<T> item(const Tensor<T>& t, std::size_t b) {
  const std::span<const T> block = t.block(b);
  return Tensor<T>({t.dim(1), t.dim(2), t.dim(3)}, std::vector<T>(block.begin(), block.end()));
}

// Every sequence's cache, (B, g, L, d).
template <class T>
Tensor<T> gathered(const KvCache<T>& cache, std::size_t B, bool keys) {
  std::vector<T> values;
  Shape shape;
  for (std::size_t b = 0; b < B; ++b) {
    const Tensor<T> one = keys ? cache.keys(b) : cache.values(b);
    shape = {B, one.dim(0), one.dim(1), one.dim(2)};
    values.insert(values.end(), one.values().begin(), one.values().end());
  }
  return Tensor<T>(shape, std::move(values));
}

// Flash-decoding of one query row per head: the cache cut into S chunks, each chunk's row folded by the
// online softmax on its own (one tile: m = -inf, l = 0 before it) and finished into o_s and lse_s, then the
// chunks merged. masked (B, h, 1, L): the row's final scores; V (B, g, L, d_v). Sets head_outputs' value
// (B, h, 1, d_v) and, with sinks, the sink's share of each row (B, h, 1).
template <class T>
SplitState<T> split_row(const Inputs<T>& in, const Tensor<T>& masked, const Tensor<T>& V, std::size_t S, DType storage,
                        Tensor<T>& head_outputs, Tensor<T>& sink_share) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t B = masked.dim(0), h = masked.dim(1), L = masked.dim(3), g = V.dim(1), d_v = V.dim(3);
  SplitState<T> st;
  for (std::size_t s = 0; s < S; ++s) st.chunks.push_back(chunk_of(s, S, L));
  st.o = Tensor<T>({B, h, S, d_v});
  st.lse = Tensor<T>({B, h, S});
  st.share = Tensor<T>({B, h, S});
  st.merged_lse = Tensor<T>({B, h});
  head_outputs = Tensor<T>({B, h, 1, d_v});
  if (in.chain.has(Stage::sinks)) sink_share = Tensor<T>({B, h, 1});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      Tensor<T> o_s({S, d_v});
      std::vector<T> lse_s(S);
      // pass 1: each chunk on its own, as one core of flash-decoding does it
      for (std::size_t s = 0; s < S; ++s) {
        const auto [c0, c1] = st.chunks[s];
        Tensor<T> Sc({1, c1 - c0}), Vc({c1 - c0, d_v});
        for (std::size_t j = c0; j < c1; ++j) {
          Sc(0, j - c0) = masked(b, hd, 0, j);
          for (std::size_t c = 0; c < d_v; ++c) Vc(j - c0, c) = V(b, kv, j, c);
        }
        OnlineSoftmaxStep<T> folded = online_softmax_update(Sc, Tensor<T>({1}, minus_inf), Tensor<T>({1}, T(0)),
                                                            Tensor<T>({1, d_v}), Vc, storage);
        Tensor<T> lse;
        finish_rows(folded.O, lse, folded.m_new, folded.l_new);
        lse_s[s] = lse(0);
        for (std::size_t c = 0; c < d_v; ++c) o_s(s, c) = folded.O(0, c);
      }
      // pass 2: the merge, every chunk weighted by its share of the whole row (the sink's too)
      const MergedRow<T> row = merge_chunks<T>(lse_s, o_s, in.chain.has(Stage::sinks) ? in.chain.sink(hd) : minus_inf);
      for (std::size_t s = 0; s < S; ++s) {
        st.lse(b, hd, s) = lse_s[s];
        st.share(b, hd, s) = row.share[s];
        for (std::size_t c = 0; c < d_v; ++c) st.o(b, hd, s, c) = o_s(s, c);
      }
      st.merged_lse(b, hd) = row.lse;
      for (std::size_t c = 0; c < d_v; ++c) head_outputs(b, hd, 0, c) = row.o[c];
      if (in.chain.has(Stage::sinks)) sink_share(b, hd, 0) = row.sink_share;
    }
  return st;
}

}  // namespace decoding

// Decodes `p` as `plan` says, in T stored in `storage`: the prefill, then one step per later token, each
// reported to `observer`. Precondition: decode_refusal(p) is empty and plan.prompt < p.n.
template <class T>
DecodeResult<T> run_decode(const Problem& p, const DecodePlan& plan, DecodeObserver& observer,
                           DType storage = DType::float32) {
  require_storage<T>("run_decode", storage);
  if (const std::optional<std::string> why = decode_refusal(p)) throw std::invalid_argument("run_decode: " + *why);
  if (plan.prompt >= p.n)
    throw std::invalid_argument(
        fmt::format("run_decode: a prompt of {} tokens leaves none of {} to decode", plan.prompt, p.n));
  const std::size_t S = plan.split > 1 ? plan.split : 0;
  KvCache<T> cache(p.B, p.g, p.d_k, p.d_v, plan.page_size, pool_pages_for(p, plan.page_size), plan.page_seed);
  DecodeResult<T> result{Tensor<T>({p.B, p.n, p.d_out})};
  const auto fill_cache = [&](const ForwardValues<T>& x, const Problem& part) {
    const Tensor<T>& K = x[slot(rows::keys_read(part))];  // (B, g, t, d_k) turned with RoPE: what the scores read
    const Tensor<T>& V = x[slot(Step::v_heads)];          // (B, g, t, d_v)
    for (std::size_t b = 0; b < p.B; ++b) cache.append(b, decoding::item(K, b), decoding::item(V, b));
  };

  // pass 1: the prompt as one causal pass (prefill); its keys and values fill the cache
  if (plan.prompt > 0) {
    const Problem prompt = slice_problem(p, 0, plan.prompt, 0);
    const Inputs<T> in(prompt, storage);
    const RowContext<T> c{prompt, in};
    const Keeper<T> keep(observer.prefill(prompt), storage);
    ForwardValues<T> x;
    walk_forward<T>(
        prompt, x, [&c](Step s, const ForwardValues<T>& v) { return row_of<T>(s).forward(v, c); },
        [&keep](Step s, Tensor<T> value) { return keep(s, std::move(value)); });
    fill_cache(x, prompt);
    decoding::put_rows(result.output, x[slot(Step::output)], 0);
  }

  // pass 2: every later token, one decode step each
  for (std::size_t t = plan.prompt; t < p.n; ++t) {
    const Problem token = slice_problem(p, t, t + 1, t);
    const Problem attend = slice_problem(p, t, t + 1, 0);
    const Keeper<T> keep(observer.step(t, token, attend), storage);
    ForwardValues<T> x;
    // 2a: the new token's q, k and v, split into heads, turned at its own position
    {
      const Inputs<T> in(token, storage);
      const RowContext<T> c{token, in};
      for (const Step s : all_steps())
        if (is_decode_token_step(s) && step_applies(s, token)) x[slot(s)] = keep(s, row_of<T>(s).forward(x, c));
    }
    // 2b: its key and value appended to the cache, which the rest reads in their place
    fill_cache(x, token);
    const Tensor<T> K = decoding::gathered(cache, p.B, true);   // (B, g, t + 1, d_k)
    const Tensor<T> V = decoding::gathered(cache, p.B, false);  // (B, g, t + 1, d_v)
    x[slot(rows::keys_read(attend))] = K;
    x[slot(Step::v_heads)] = V;
    // 2c: its one row of scores against the whole cache … its output row
    const Inputs<T> in(attend, storage);
    const RowContext<T> c{attend, in};
    std::optional<SplitState<T>> split;
    for (const Step s : all_steps()) {
      if (is_decode_token_step(s) || !step_applies(s, attend)) continue;
      if (S > 0 && s == Step::weights) {  // never formed whole: the chunks and their merge instead
        split = decoding::split_row(in, x[slot(Step::masked)], V, S, storage, x[slot(Step::head_outputs)],
                                    x[slot(Step::sink_weights)]);
        continue;
      }
      // with a split, the merge made the head outputs and the sink's share of each row
      const bool merged = S > 0 && (s == Step::sink_weights || s == Step::head_outputs);
      x[slot(s)] = keep(s, merged ? std::move(x[slot(s)]) : row_of<T>(s).forward(x, c));
    }
    observer.on_step(DecodeStepEvent<T>{t, K, V, split ? &*split : nullptr, cache});
    decoding::put_rows(result.output, x[slot(Step::output)], t);
  }
  return result;
}

extern template DecodeResult<float> run_decode<float>(const Problem&, const DecodePlan&, DecodeObserver&, DType);
extern template DecodeResult<double> run_decode<double>(const Problem&, const DecodePlan&, DecodeObserver&, DType);

}  // namespace attn
