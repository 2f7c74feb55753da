#pragma once
// compare --backward: naive's and flash's backward passes against naive's in a wider type, gradient by
// gradient, with the forward's kind of rule: max|flash - ref| <= 2 · max|naive - ref| + noise.
//
// The noise floor of a gradient (docs/backward.md, "The verdict"). Flash recomputes every weight as
// P = exp(S' - lse) from the forward's log-sum-exp, where naive keeps A. Both S' and lse are T numbers of
// size up to Λ (the largest |S'| and |lse| the softmax sees), so the argument of exp is off by a few
// units of Λ·u even when P is small: P's relative error is ε_P = u·(4·Λ + 2·d_k + 8), 1.6% for
// Λ = 5·10⁵ in float32, 10⁻⁶ for Λ = 3. Every gradient behind the weights is a sum of products of P (or
// dS = P ⊙ (dP - D)) with values, queries or keys, so it moves by at most ε_P times the size of what it
// sums, plus u times that size for each addition of its longest sum. So, gradient by gradient,
//   noise = 2 · max (ε_P + u·(n + m + d_k + d_v + d_model + d_context + 8)) · M
// where M is the gradient's magnitude: the same formulas on absolute values (|dO|, |V|, A, ...) of the
// reference run. This is a first-order estimate, not the proven bound of the forward's floor
// (engine/compare.hpp): it scales with the logits as a correct flash's error does, and is orders of
// magnitude under what a wrong one (a missing scale, a lost GQA sum, D from the wrong rows) moves.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "engine/backward.hpp"
#include "engine/compare.hpp"
#include "engine/rows.hpp"
#include "ops/bounds.hpp"

namespace attn {

// Forwards everything to `inner`, and keeps every step of either pass in R on the way: what compare
// --backward reads of each engine, whatever the trace keeps of it.
template <class R>
class StepKeeper final : public Observer {
 public:
  explicit StepKeeper(Observer& inner) : inner_(inner) {}

  bool wants(Step) const override { return true; }
  void on(Step step, const Tensor<float>& v) override { take(step, v); }
  void on(Step step, const Tensor<double>& v) override { take(step, v); }
  void on(Step step, const Tensor<long double>& v) override { take(step, v); }
  bool wants_tiles() const override { return inner_.wants_tiles(); }
  void on_tile(const TileEvent<float>& e) override { inner_.on_tile(e); }
  void on_tile(const TileEvent<double>& e) override { inner_.on_tile(e); }
  void on_query_tile_done(const QueryTileDone<float>& e) override { inner_.on_query_tile_done(e); }
  void on_query_tile_done(const QueryTileDone<double>& e) override { inner_.on_query_tile_done(e); }
  void on_lse(const Tensor<float>& lse) override { inner_.on_lse(lse); }
  void on_lse(const Tensor<double>& lse) override { inner_.on_lse(lse); }
  bool wants_backward_tiles() const override { return inner_.wants_backward_tiles(); }
  void on_backward_rows(const Tensor<float>& D) override { inner_.on_backward_rows(D); }
  void on_backward_rows(const Tensor<double>& D) override { inner_.on_backward_rows(D); }
  void on_backward_tile(const BackwardTileEvent<float>& e) override { inner_.on_backward_tile(e); }
  void on_backward_tile(const BackwardTileEvent<double>& e) override { inner_.on_backward_tile(e); }

  // The value of `step` as reported (batch axis first), or an empty tensor.
  const Tensor<R>& operator[](Step step) const { return kept_[static_cast<std::size_t>(step)]; }
  Tensor<R>& operator[](Step step) { return kept_[static_cast<std::size_t>(step)]; }
  bool has(Step step) const { return reported_[static_cast<std::size_t>(step)]; }

 private:
  template <class U>
  void take(Step step, const Tensor<U>& v) {
    kept_[static_cast<std::size_t>(step)] = cast<R>(v);
    reported_[static_cast<std::size_t>(step)] = true;
    if (inner_.wants(step)) inner_.on(step, v);
  }

  Observer& inner_;
  std::array<Tensor<R>, table_size> kept_{};
  std::array<bool, table_size> reported_{};
};

// Λ: the largest |exponent| the softmax sees, from |S'| (on magnitudes, so that cancellation in a dot
// product cannot hide a large term; at most c with softcap) and the row's log-sum-exp, which lies
// within log m of its max. (The magnitudes of gradient_magnitudes (engine/rows.hpp) leave the cap's slope out: it is at
// most 1, so they bound the capped gradients too.)
inline double largest_logit(const Problem& p, const Tensor<double>& Q, const Tensor<double>& K) {
  const Tensor<double> S = scores(Q, K);  // |Q|·|K|ᵀ (B, h, n, m)
  double largest = 0;
  for (const double s : S.values()) largest = std::max(largest, std::fabs(p.scale) * s);
  if (p.softcap) largest = std::min(largest, *p.softcap);  // c·tanh(s/c) never passes ±c
  if (p.alibi) {
    double bias = 0;
    for (const double slope : p.alibi->slopes)
      for (const double qi : p.alibi->query_positions)
        for (const double kj : p.alibi->key_positions) bias = std::max(bias, std::fabs(alibi_term(slope, qi, kj)));
    largest += bias;
  }
  return largest + std::log(static_cast<double>(std::max<std::size_t>(p.m, 1))) + 1;
}

// Judges every gradient that both engines formed (kept by `naive` and `flash`, run in T storing in
// `storage`) against naive's backward in a wider type on the rounded inputs, into `c`.
template <class T>
void judge_gradients(const Problem& p, const StepKeeper<double>& naive, const StepKeeper<double>& flash,
                     CompareRecord& c, DType storage = DType::float32) {
  using R = Reference<T>;
  c.backward = true;
  const Problem rounded = rounded_inputs<T>(p, storage);
  NullObserver none;
  StepKeeper<R> ref(none);
  run_naive_backward<R>(rounded, ref);
  const Gradients<double> M = gradient_magnitudes(rounded, [&ref](Step s) { return cast<double>(ref[s]); });
  const Tensor<double> Q = magnitude(cast<double>(ref[p.rope ? Step::q_rot : Step::q_heads]));
  const Tensor<double> K = magnitude(cast<double>(ref[p.rope ? Step::k_rot : Step::k_heads]));
  c.largest_logit = largest_logit(rounded, Q, K);
  const double u = rounding_of<T>(storage).u, eta = rounding_of<T>(storage).eta;
  const double eps_P = 4 * u * c.largest_logit + u * (2 * static_cast<double>(p.d_k) + 8);
  const double sums = static_cast<double>(p.n + p.m + p.d_k + p.d_v + p.d_model + p.d_context + 8);
  c.gradients.clear();
  for (const Step s : gradient_steps()) {
    if (!naive.has(s) || !flash.has(s)) continue;  // d_weights … d_scores: flash holds them in tiles only
    GradientCheck g{s};
    const std::span<const double> a = naive[s].values(), b = flash[s].values();
    g.naive_vs_ref = error_stats<T, R>(a, ref[s].values(), storage);
    g.flash_vs_ref = error_stats<T, R>(b, ref[s].values(), storage);
    g.flash_vs_naive = error_stats<T, double>(b, a, storage);
    for (const R x : ref[s].values()) g.max_ref = std::max(g.max_ref, static_cast<double>(std::fabs(x)));
    double largest = 0;
    for (const double x : M[static_cast<std::size_t>(s)].values()) largest = std::max(largest, x);
    g.noise = 2 * (bound_times(eps_P + sums * u, largest) + sums * eta);
    g.bound = 2 * g.naive_vs_ref.max_abs + g.noise;
    g.pass = g.flash_vs_ref.max_abs <= g.bound;  // false when either is NaN
    c.gradients.push_back(g);
  }
  c.gradients_pass = std::all_of(c.gradients.begin(), c.gradients.end(), [](const GradientCheck& g) { return g.pass; });
}

// Runs naive's and flash's backward in T (storing in `storage`), each reporting to its observer, and
// judges the forward output (judge_flash) and every gradient that both engines form (judge_gradients).
template <class T>
CompareRecord compare_backward(const Problem& p, TileSize tiles, Observer& naive_observer, Observer& flash_observer,
                               DType storage = DType::float32) {
  StepKeeper<double> naive(naive_observer), flash(flash_observer);
  const AttentionResult<T> naive_result = run_naive_backward<T>(p, naive, storage);
  const AttentionResult<T> flash_result = run_flash_backward<T>(p, flash, tiles, storage);
  CompareRecord c = judge_flash<T>(p, tiles, naive_result, flash_result, storage);
  judge_gradients<T>(p, naive, flash, c, storage);
  return c;
}

// Compiled once, in engine/instances.cpp, rather than in every file that compares the engines.
extern template void judge_gradients<float>(const Problem&, const StepKeeper<double>&, const StepKeeper<double>&,
                                            CompareRecord&, DType);
extern template void judge_gradients<double>(const Problem&, const StepKeeper<double>&, const StepKeeper<double>&,
                                             CompareRecord&, DType);
extern template CompareRecord compare_backward<float>(const Problem&, TileSize, Observer&, Observer&, DType);
extern template CompareRecord compare_backward<double>(const Problem&, TileSize, Observer&, Observer&, DType);

}  // namespace attn
