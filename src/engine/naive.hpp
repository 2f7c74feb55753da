#pragma once
// Naive attention: every step computed in full, in the order of the trace, in scalar type T. In a half
// storage type (engine/common.hpp) every step is rounded to it as it is stored; the scale stays a T
// number, and the softmax runs in T from the stored masked scores.

#include "engine/common.hpp"

namespace attn {

template <class T>
AttentionResult<T> run_naive(const Problem& p, Observer& observer, DType storage = DType::float32) {
  require_storage<T>("run_naive", storage);
  const Inputs<T> in(p, storage);
  const auto allows = [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); };
  ByteMeter meter;

  // pass 1: project the tokens into queries, keys and values, and split them into heads
  const Heads<T> heads = project_heads(p, in, observer, storage);

  // pass 2: query dot key, scaled, with ALiBi's bias added, masked, then a softmax of each row. Each
  // (B, h, n, m) buffer is dropped once the next one is made, so at most two are held at a time.
  Tensor<T> A;  // (B, h, n, m)
  {
    Tensor<T> S = scores(heads.Q, heads.K);  // (B, h, n, m)
    round_stored(S, storage);
    meter.hold(bytes_of(S));
    report(observer, Step::scores, S);
    Tensor<T> S_scaled = scale(S, static_cast<T>(p.scale));
    round_stored(S_scaled, storage);
    meter.hold(bytes_of(S_scaled));
    report(observer, Step::scaled, S_scaled);
    meter.release(bytes_of(S));
    S = Tensor<T>();
    if (p.alibi) {
      Tensor<T> S_bias = add_alibi(S_scaled, std::span<const T>(in.slopes), std::span<const T>(in.pos_q),
                                   std::span<const T>(in.pos_k));
      round_stored(S_bias, storage);
      meter.hold(bytes_of(S_bias));
      report(observer, Step::bias, S_bias);
      meter.release(bytes_of(S_scaled));
      S_scaled = std::move(S_bias);  // what the mask applies to
    }
    Tensor<T> S_masked = apply_mask(S_scaled, allows);  // stored values and -inf: nothing new to round
    meter.hold(bytes_of(S_masked));
    report(observer, Step::masked, S_masked);
    meter.release(bytes_of(S_scaled));
    S_scaled = Tensor<T>();
    A = softmax_rows(S_masked);
    round_stored(A, storage);
    meter.hold(bytes_of(A));
    report(observer, Step::weights, A);
    meter.release(bytes_of(S_masked));
  }

  // pass 3: average the values with the weights, per head
  Tensor<T> O_h = weighted_sum(A, heads.V);  // (B, h, n, d_v)
  round_stored(O_h, storage);
  report(observer, Step::head_outputs, O_h);

  // pass 4: merge the heads and project out
  Tensor<T> Y = merge_and_project(p, in, O_h, observer, storage);
  return {std::move(Y), find_empty_rows(p), meter.peak(), Tensor<T>()};
}

}  // namespace attn
