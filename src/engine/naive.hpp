#pragma once
// Naive attention: every step computed in full, in the order of the trace, in scalar type T. In a half
// storage type (engine/common.hpp) every step is rounded to it as it is stored; the scale stays a T
// number, and the softmax runs in T from the stored masked scores.

#include "engine/common.hpp"

namespace attn {

// What the naive forward pass leaves for a backward pass: the heads as the scores read them, the
// weights, the head outputs and the output.
template <class T>
struct NaiveForward {
  Heads<T> heads;  // Q (B, h, n, d_k), K (B, g, m, d_k) turned with RoPE; V (B, g, m, d_v)
  Held<T> A;       // (B, h, n, m)
  Held<T> A_drop;  // (B, h, n, m) the weights after dropout: with dropout only
  Tensor<T> sink;  // (B, h, n) the sinks' shares of the weights: with sinks only
  Held<T> capped;  // (B, h, n, m) the capped scores, for the cap's backward: with softcap, when asked
  Tensor<T> O_h;   // (B, h, n, d_v)
  Tensor<T> Y;     // (B, n, d_out)
};

// The forward passes of the naive engine, every step kept by `keep` (which counts the score-sized ones).
// `for_backward`: keep what the backward pass reads beyond the weights (the capped scores).
template <class T>
NaiveForward<T> naive_forward(const Problem& p, const Inputs<T>& in, Keeper<T>& keep, Observer& observer, DType storage,
                              bool for_backward = false) {
  const auto allows = [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); };
  const std::span<const T> slopes(in.slopes), pos_q(in.pos_q), pos_k(in.pos_k);  // ALiBi's, or empty

  // pass 1: project the tokens into queries, keys and values, and split them into heads
  Heads<T> heads = project_heads(p, in, observer, storage);

  // pass 2: query dot key, scaled, soft-capped, with ALiBi's bias added, masked, then a softmax of each
  // row. Each (B, h, n, m) buffer is dropped once the next one is made, so at most two are held at a time
  // (three when the backward keeps the capped scores).
  Held<T> A;  // (B, h, n, m)
  Held<T> capped;
  Tensor<T> sink;
  {
    Held<T> S = keep.held(Step::scores, scores(heads.Q, heads.K));  // (B, h, n, m)
    Held<T> S_scaled = keep.held(Step::scaled, scale(*S, static_cast<T>(p.scale)));
    S.drop();
    if (p.softcap) {
      S_scaled = keep.held(Step::capped, softcap(*S_scaled, static_cast<T>(*p.softcap)));
      if (for_backward) capped = keep.counted(Tensor<T>(*S_scaled));
    }
    if (p.alibi) S_scaled = keep.held(Step::bias, add_alibi(*S_scaled, slopes, pos_q, pos_k));  // the mask reads it
    Held<T> S_masked = keep.held_as_is(Step::masked, apply_mask(*S_scaled, allows));  // stored values and -inf
    S_scaled.drop();
    if (p.sinks.empty()) {
      A = keep.held(Step::weights, softmax_rows(*S_masked));
    } else {  // each head's sink joins the row's max and denominator: its share goes to nothing
      Tensor<T> share;
      A = keep.held(Step::weights, softmax_rows_with_sinks(*S_masked, std::span<const T>(in.sinks), share));
      sink = keep(Step::sink_weights, std::move(share));  // (B, h, n)
    }
  }
  // dropout: the kept weights scaled by 1/(1 - p), the rest 0, by the keep mask of the seed
  Held<T> A_drop;
  if (p.dropout) A_drop = keep.held(Step::dropped, apply_dropout(*A, DropoutMask(*p.dropout)));

  // pass 3: average the values with the weights (after dropout), per head
  Tensor<T> O_h = keep(Step::head_outputs, weighted_sum(p.dropout ? *A_drop : *A, heads.V));  // (B, h, n, d_v)

  // pass 4: merge the heads and project out
  Tensor<T> Y = merge_and_project(p, in, O_h, observer, storage);
  return {std::move(heads),  std::move(A),   std::move(A_drop), std::move(sink),
          std::move(capped), std::move(O_h), std::move(Y)};
}

template <class T>
AttentionResult<T> run_naive(const Problem& p, Observer& observer, DType storage = DType::float32) {
  require_storage<T>("run_naive", storage);
  const Inputs<T> in(p, storage);
  Keeper<T> keep(observer, storage);
  NaiveForward<T> f = naive_forward(p, in, keep, observer, storage);
  return {std::move(f.Y), find_empty_rows(p), keep.peak(), Tensor<T>()};
}

// Compiled once, in engine/instances.cpp, rather than in every file that runs the engine.
extern template AttentionResult<float> run_naive<float>(const Problem&, Observer&, DType);
extern template AttentionResult<double> run_naive<double>(const Problem&, Observer&, DType);
extern template AttentionResult<long double> run_naive<long double>(const Problem&, Observer&, DType);

}  // namespace attn
