// The backward pass, checked without PyTorch: central finite differences of the forward pass (an
// independent check: it never runs a backward formula), compare --backward's rule on the forward's
// property sweep, and the rule failing on the usual backward bugs.

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/backward.hpp"
#include "engine/compare_backward.hpp"
#include "io/load.hpp"
#include "mask_spec.hpp"
#include "support.hpp"
#include "trace/trace.hpp"

using namespace attn;
using attn::test::Dims;
using attn::test::pick;
using attn::test::random_mask;
using attn::test::random_problem;

namespace {

Dims sweep_dims(std::mt19937& rng) {
  Dims d;
  d.B = pick(rng, 1, 2);
  d.n = pick(rng, 1, 6);
  d.m = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, 7);
  d.d_model = pick(rng, 1, 5);
  d.d_context = pick(rng, 1, 5);
  d.h = std::vector<std::size_t>{1, 2, 4}[pick(rng, 0, 2)];
  d.g = d.h == 4 ? std::vector<std::size_t>{1, 2, 4}[pick(rng, 0, 2)] : d.h == 2 ? pick(rng, 1, 2) : 1;
  d.d_k = pick(rng, 1, 4);
  d.d_v = pick(rng, 1, 3);
  d.d_out = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, 4);
  d.biases = pick(rng, 0, 1) == 1;
  return d;
}

// A seeded dY of the output's shape.
void give_upstream(std::mt19937& rng, Problem& p) { p.dY = test::random_tensor(rng, {p.B, p.n, p.d_out}); }

// L = Σ Y ⊙ dY of the naive forward pass in float64.
double loss(const Problem& p) {
  NullObserver none;
  const AttentionResult<double> r = run_naive<double>(p, none);
  const Tensor<double> dY = upstream_gradient<double>(p, DType::float64);
  double L = 0;
  for (std::size_t k = 0; k < r.output.size(); ++k) L += r.output.values()[k] * dY.values()[k];
  return L;
}

// The leaves a gradient is checked at: each input tensor of the problem, the step of its gradient,
// and how an entry of the stored gradient maps onto the problem's in_out tensor.
struct Leaf {
  Step step;
  Tensor<double> Problem::*tensor;
};

}  // namespace

TEST_CASE("Every gradient of both engines matches central finite differences of the forward pass",
          "[backward][property]") {
  // ∂L/∂x ≈ (L(x + ε) - L(x - ε)) / 2ε, error O(ε²) from the truncation and O(u/ε) from rounding: with
  // ε = 1e-5 in float64 both are below 1e-9 for values of order 1; a wrong formula is off by far more.
  constexpr double eps = 1e-5, tol = 1e-6;
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    Problem p = random_problem(rng, sweep_dims(rng));
    const test::MaskSpec spec = random_mask(rng, p);
    give_upstream(rng, p);
    INFO("seed " << seed << ": B=" << p.B << " n=" << p.n << " m=" << p.m << " h=" << p.h << " g=" << p.g
                 << " mask=" << to_string(spec.kind));
    for (const bool flash : {false, true}) {
      NullObserver none;
      StepKeeper<double> kept(none);
      if (flash) run_flash_backward<double>(p, kept, {2, 3});
      else run_naive_backward<double>(p, kept);
      const std::vector<Leaf> leaves = {{Step::d_X, &Problem::X},     {Step::d_W_q, &Problem::W_q},
                                        {Step::d_W_k, &Problem::W_k}, {Step::d_W_v, &Problem::W_v},
                                        {Step::d_W_o, &Problem::W_o}, {Step::d_context, &Problem::C}};
      for (const Leaf& leaf : leaves) {
        if (!step_applies(leaf.step, p)) continue;
        const Tensor<double>& grad = kept[leaf.step];
        const std::size_t size = (p.*leaf.tensor).size();
        for (std::size_t pick_k = 0; pick_k < 3; ++pick_k) {
          const std::size_t k = test::pick(rng, 0, size - 1);
          Problem up = p, down = p;
          (up.*leaf.tensor).values()[k] += eps;
          (down.*leaf.tensor).values()[k] -= eps;
          if (leaf.tensor == &Problem::X && !p.cross) {  // self-attention: C is X
            up.C = up.X;
            down.C = down.X;
          }
          const double numeric = (loss(up) - loss(down)) / (2 * eps);
          // The problem holds weights in_out; the gradient is in the input's layout (in_out here).
          const double analytic = grad.values()[k];
          INFO((flash ? "flash " : "naive ") << step_info(leaf.step).name << " entry " << k << ": analytic " << analytic
                                             << ", finite differences " << numeric);
          CHECK(std::abs(analytic - numeric) <= tol * std::max(1.0, std::abs(numeric)));
        }
      }
    }
  }
}

TEST_CASE("compare --backward passes on the forward's property sweep, float32 and float64, at several tilings",
          "[backward][flash][property]") {
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(1000 + seed);
    Problem p = random_problem(rng, sweep_dims(rng));
    const test::MaskSpec spec = random_mask(rng, p);
    if (seed % 2 == 0) give_upstream(rng, p);
    const TileSize tiles{pick(rng, 1, 4), pick(rng, 1, 4)};
    INFO("seed " << seed << ": B=" << p.B << " n=" << p.n << " m=" << p.m << " h=" << p.h << " g=" << p.g
                 << " mask=" << to_string(spec.kind) << " tiles " << tiles.Br << "x" << tiles.Bc);
    NullObserver none;
    const CompareRecord f32 = compare_backward<float>(p, tiles, none, none);
    const CompareRecord f64 = compare_backward<double>(p, tiles, none, none);
    CHECK(passes(f32));
    CHECK(passes(f64));
    CHECK_FALSE(f32.gradients.empty());
  }
}

TEST_CASE("compare --backward fails a flash backward that leaves the scale out of dQ or the GQA sum out of dK",
          "[backward][flash]") {
  std::mt19937 rng(7);
  Dims d;
  d.n = 5;
  d.d_model = 4;
  d.h = 4;
  d.g = 2;
  d.d_k = 3;
  d.d_out = 4;
  Problem p = random_problem(rng, d);
  give_upstream(rng, p);
  NullObserver none;
  StepKeeper<double> naive(none), flash(none);
  const AttentionResult<float> n = run_naive_backward<float>(p, naive);
  const AttentionResult<float> f = run_flash_backward<float>(p, flash, {2, 2});
  {
    CompareRecord c = judge_flash<float>(p, {2, 2}, n, f);
    judge_gradients<float>(p, naive, flash, c);
    REQUIRE(passes(c));  // the correct flash passes
  }
  SECTION("dQ without the scale") {
    StepKeeper<double> broken = flash;
    for (double& x : broken[Step::d_q_heads].values()) x /= p.scale;
    CompareRecord c = judge_flash<float>(p, {2, 2}, n, f);
    judge_gradients<float>(p, naive, broken, c);
    CHECK_FALSE(passes(c));
  }
  SECTION("dK of a shared key/value head from its first query head only") {
    Tensor<double> dS = naive[Step::d_scores];  // (B, h, n, m)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      if (hd % (p.h / p.g) != 0)
        for (std::size_t i = 0; i < p.n; ++i)
          for (std::size_t j = 0; j < p.m; ++j) dS(0, hd, i, j) = 0;
    StepKeeper<double> broken = flash;
    broken[Step::d_k_heads] = d_scores_keys(dS, naive[Step::q_heads], p.g);
    CompareRecord c = judge_flash<float>(p, {2, 2}, n, f);
    judge_gradients<float>(p, naive, broken, c);
    CHECK_FALSE(passes(c));
  }
}

TEST_CASE("A row the mask empties has d_weights dO·Vᵀ and zero d_masked, d_scaled, d_scores", "[backward][mask]") {
  // By hand: the custom mask leaves query 1 nothing; its weights are 0, but L = Σ Y ⊙ dY still reads
  // them through O = A·V, so ∂L/∂A[1][j] = dO_1 · v_j; the softmax of an empty row cannot move.
  std::mt19937 rng(3);
  Dims d;
  d.n = 3;
  Problem p = random_problem(rng, d);
  p.mask.kind = MaskKind::custom;
  p.mask.allow = Tensor<std::uint8_t>({1, 3, 3}, std::vector<std::uint8_t>{1, 0, 1, 0, 0, 0, 1, 1, 1});
  give_upstream(rng, p);
  NullObserver none;
  StepKeeper<double> kept(none);
  run_naive_backward<double>(p, kept);
  const Tensor<double>& dA = kept[Step::d_weights];
  const Tensor<double>& dO = kept[Step::d_head_outputs];
  const Tensor<double>& V = kept[Step::v_heads];
  for (std::size_t j = 0; j < p.m; ++j) {
    double dot = 0;
    for (std::size_t c = 0; c < p.d_v; ++c) dot += dO(0, 0, 1, c) * V(0, 0, j, c);
    CHECK(dA(0, 0, 1, j) == Approx(dot).margin(1e-15));
    CHECK(kept[Step::d_masked](0, 0, 1, j) == 0.0);
    CHECK(kept[Step::d_scores](0, 0, 1, j) == 0.0);
  }
}

TEST_CASE("In float16 and bfloat16 every gradient is stored as a value of the half type, and flash passes the rule",
          "[backward][half]") {
  for (std::uint32_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(500 + seed);
    Problem p = random_problem(rng, sweep_dims(rng));
    random_mask(rng, p);
    give_upstream(rng, p);
    for (const DType storage : {DType::float16, DType::bfloat16}) {
      INFO("seed " << seed << " " << name_of(storage));
      NullObserver none;
      StepKeeper<double> naive(none), flash(none);
      run_naive_backward<float>(p, naive, storage);
      run_flash_backward<float>(p, flash, {2, 2}, storage);
      for (const Step s : gradient_steps())
        for (const StepKeeper<double>* keeper : {&naive, &flash}) {
          if (!keeper->has(s)) continue;
          for (const double x : (*keeper)[s].values()) {
            INFO(step_info(s).name << " holds " << x);
            CHECK(static_cast<double>(stored(storage, static_cast<float>(x))) == x);
          }
        }
      const CompareRecord c = compare_backward<float>(p, {2, 2}, none, none, storage);
      CHECK(passes(c));
    }
  }
}

TEST_CASE("Scores near the largest double: a gradient of exactly 0 has a finite bound and passes",
          "[backward][bounds]") {
  // tests/data/fuzz/gradient_bound_overflow.json, the fuzzer's find: X = ±1.2e154 gives logits of about
  // 1e308, so 4·Λ overflowed to infinity in ε_P; d_q_heads is exactly 0 (V's first column is 0 and the
  // second is the same 5 for both keys, so dA·(V − o) = 0), its magnitude 0, and inf · 0 made the bound
  // NaN: a verdict of FAIL on an exact result.
  const Problem p = load_problem_file(ATTN_SOURCE_DIR "/tests/data/fuzz/gradient_bound_overflow.json");
  NullObserver none;
  const CompareRecord c = compare_backward<double>(p, {1, 4}, none, none, DType::float64);
  REQUIRE_FALSE(c.gradients.empty());
  for (const GradientCheck& g : c.gradients) {
    INFO(step_info(g.step).name << ": bound " << g.bound);
    CHECK_FALSE(std::isnan(g.bound));
    CHECK(g.pass);
  }
  // The four that were NaN sum nothing (magnitude 0): left with the storage rounding's floor, 2·sums·η.
  for (const GradientCheck& g : c.gradients)
    if (g.step == Step::d_q_heads || g.step == Step::d_k_heads || g.step == Step::d_q || g.step == Step::d_W_q)
      CHECK(g.bound < 1e-300);
  CHECK(c.gradients_pass);
}
