// The fast, unwatched path (engine/fast.hpp, kernel/) against the traced engines: the same answer by
// compare's rule on a seeded sweep of every mask, GQA, cross-attention, batches, RoPE, ALiBi, both
// dtypes and every instruction set this processor runs; the kernels against long double arithmetic
// written out here; and results that do not depend on the thread count. The fast backward likewise:
// every gradient within compare --backward's rule of the traced naive backward, the same bits on any
// thread count.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/compare.hpp"
#include "engine/compare_backward.hpp"
#include "engine/fast.hpp"
#include "engine/fast_backward.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "kernel/kernels.hpp"
#include "mask_spec.hpp"
#include "support.hpp"

using namespace attn;
using attn::test::pick;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

struct FastConfig {
  Problem p;
  test::MaskSpec spec;
  TileSize tiles;
  std::size_t threads = 1;
  kernel::Isa isa = kernel::Isa::baseline;
};

std::string describe(const FastConfig& c) {
  const Problem& p = c.p;
  return fmt::format(
      "B={} n={} m={} ({}) d_model={} d_k={} d_v={} h={} g={} W_o={} biases={} mask={} align={} window={} "
      "rope={} alibi={} softcap={} sinks={} dropout={} Br={} Bc={} threads={} isa={}",
      p.B, p.n, p.m, p.cross ? "cross" : "self", p.d_model, p.d_k, p.d_v, p.h, p.g, p.has_output_projection(),
      !p.b_q.empty(), to_string(c.spec.kind), to_string(c.spec.align), c.spec.window, p.rope.has_value(),
      p.alibi.has_value(), p.softcap.value_or(0), p.sinks.size(), p.dropout ? p.dropout->p : 0, c.tiles.Br, c.tiles.Bc,
      c.threads, kernel::name_of(c.isa));
}

// RoPE on the first `dims` features of each head and ALiBi's standard slopes, as the loader resolves them.
void add_rope(std::mt19937& rng, Problem& p) {
  Rope r;
  r.style = pick(rng, 0, 1) == 0 ? RopeStyle::half : RopeStyle::interleaved;
  r.dims = 2 * pick(rng, 1, p.d_k / 2);
  const auto start = static_cast<double>(pick(rng, 0, 300));
  for (std::size_t i = 0; i < p.n; ++i) r.positions.push_back(start + static_cast<double>(i));
  for (std::size_t j = 0; j < p.m; ++j) r.context_positions.push_back(start + static_cast<double>(j));
  if (!p.cross) r.context_positions = r.positions;
  r.frequencies = rope_frequencies(r.theta, r.dims);
  std::tie(r.cos_q, r.sin_q) = rope_table(r.positions, r.frequencies);
  std::tie(r.cos_k, r.sin_k) = rope_table(r.context_positions, r.frequencies);
  p.rope = std::move(r);
}

void add_alibi(Problem& p) {
  Alibi a;
  a.slopes = alibi_slopes(p.h);
  for (std::size_t i = 0; i < p.n; ++i)
    a.query_positions.push_back(static_cast<double>(p.m >= p.n ? p.m - p.n + i : i));
  for (std::size_t j = 0; j < p.m; ++j) a.key_positions.push_back(static_cast<double>(j));
  p.alibi = std::move(a);
}

// Sizes up to `max_len`, heads up to 40 wide (so that vectors are whole, partial and several), h in
// {1, 2, 3, 4, 6} sharing g | h key/value heads, up to 3 batch items, any mask, RoPE and ALiBi now and
// then, tiles from 1 to 70 (the fast default among them), 1 to 3 threads (which the larger ones use:
// kernel::threads_for keeps small products on one; the test of thread counts below is large enough).
FastConfig random_fast_config(std::mt19937& rng, std::size_t max_len, const std::vector<kernel::Isa>& isas,
                              std::size_t k) {
  test::Dims d;
  d.B = pick(rng, 1, 3);
  d.n = pick(rng, 1, max_len);
  d.m = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, max_len);
  d.d_model = pick(rng, 1, 24);
  d.d_context = pick(rng, 1, 24);
  d.h = std::vector<std::size_t>{1, 2, 3, 4, 6}[pick(rng, 0, 4)];
  std::vector<std::size_t> divisors;
  for (std::size_t g = 1; g <= d.h; ++g)
    if (d.h % g == 0) divisors.push_back(g);
  d.g = divisors[pick(rng, 0, divisors.size() - 1)];
  d.d_k = pick(rng, 1, 40);
  d.d_v = pick(rng, 1, 40);
  d.d_out = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, 24);
  d.biases = pick(rng, 0, 1) == 1;
  FastConfig c;
  c.p = test::random_problem(rng, d);
  const double gain = std::vector<double>{1, 1, 3, 10, 20}[pick(rng, 0, 4)];  // logits up to about 400
  for (Tensor<double>* w : {&c.p.W_q, &c.p.W_k})
    for (double& x : w->values()) x *= gain;
  c.spec = test::random_mask(rng, c.p);
  if (c.p.d_k >= 2 && pick(rng, 0, 3) == 0) add_rope(rng, c.p);
  if (pick(rng, 0, 3) == 0) add_alibi(c.p);
  // Gemma 2's cap, a sink per head and dropout, each in a quarter of the configurations
  if (pick(rng, 0, 3) == 0) c.p.softcap = std::vector<double>{0.5, 5, 50}[pick(rng, 0, 2)];
  if (pick(rng, 0, 3) == 0)
    for (std::size_t hd = 0; hd < c.p.h; ++hd) c.p.sinks.push_back(static_cast<double>(pick(rng, 0, 8)) - 4);
  if (pick(rng, 0, 3) == 0) c.p.dropout = Dropout{std::vector<double>{0.1, 0.5}[pick(rng, 0, 1)], rng()};
  c.tiles = pick(rng, 0, 4) == 0 ? fast_tiles() : TileSize{pick(rng, 1, 70), pick(rng, 1, 70)};
  c.threads = pick(rng, 1, 3);
  c.isa = isas[k % isas.size()];  // every set in turn
  return c;
}

// Every value of the head outputs (B·n rows) of the rows the mask empties is 0: checked on the output
// without W_o, where the output is the merged head outputs.
bool empty_rows_zero(const FastConfig& c, const Tensor<double>& Y) {
  if (c.p.has_output_projection() && !c.p.b_o.empty()) return true;  // b_o is what those rows get
  for (std::size_t b = 0; b < c.p.B; ++b)
    for (std::size_t i = 0; i < c.p.n; ++i)
      if (!c.spec.row_has_key(c.p, b, i))
        for (std::size_t e = 0; e < Y.dim(2); ++e)
          if (Y(b, i, e) != 0) return false;
  return true;
}

// How far rounding in T can move one engine's lse of each row (B, h, n): lse = m + log Σ_j exp(s_j - m)
// moves by at most max_j Δs_j with the scores (its gradient is the weights, which sum to 1), by
// (N + 2·Tc + 1)·u with the row sum of N terms over Tc tiles (compare.hpp, step 3), and by u·|lse| as m
// and log l are added. Δs_j is compare.hpp's score_error on the T-rounded inputs.
template <class T>
Tensor<double> lse_bound(const FastConfig& c, const Tensor<T>& lse) {
  const Problem p = rounded_inputs<T>(c.p);
  const Rounding r = rounding_of<T>();
  Tensor<double> Q = split_heads(project(p.X, p.W_q, std::span<const double>(p.b_q)), p.h);
  Tensor<double> K = split_heads(project(p.C, p.W_k, std::span<const double>(p.b_k)), p.g);
  Tensor<double> dQ = split_heads(projection_error(p.X, p.W_q, p.b_q, r), p.h);
  Tensor<double> dK = split_heads(projection_error(p.C, p.W_k, p.b_k, r), p.g);
  if (p.rope) {
    dQ = rotation_error(magnitude(Q), dQ, p.rope->cos_q, p.rope->sin_q, p.rope->style, r);
    dK = rotation_error(magnitude(K), dK, p.rope->cos_k, p.rope->sin_k, p.rope->style, r);
    Q = rotate(Q, p.rope->cos_q, p.rope->sin_q, p.rope->style);
    K = rotate(K, p.rope->cos_k, p.rope->sin_k, p.rope->style);
  }
  Q = magnitude(Q);
  K = magnitude(K);
  const std::size_t Tc = (p.m + c.tiles.Bc - 1) / c.tiles.Bc;
  Tensor<double> out({p.B, p.h, p.n});
  const ScoreChain<double> chain(p, DType::float64);
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i) {
        const std::size_t kv = kv_head_of(hd, p.h, p.g);
        // the cap's and ALiBi's own roundings are the chain's share of Δs; a sink is one more term of the
        // row sum
        const std::vector<double> ds =
            score_error(chain, {b, hd, i, 0}, std::span<const double>(&Q(b, hd, i, 0), p.d_k),
                        std::span<const double>(&dQ(b, hd, i, 0), p.d_k), &K(b, kv, 0, 0), &dK(b, kv, 0, 0), p.m, r);
        double worst = 0, N = p.sinks.empty() ? 0 : 1;
        for (std::size_t j = 0; j < p.m; ++j)
          if (c.spec.allows(p, b, i, j)) {
            worst = std::max(worst, ds[j]);
            ++N;
          }
        out(b, hd, i) =
            worst + (N + 2 * static_cast<double>(Tc) + 1) * r.u + r.u * std::abs(static_cast<double>(lse(b, hd, i)));
      }
  return out;
}

// One config in T: both fast engines judged against the traced naive by compare's rule (judge_flash),
// each also within the noise floor alone, with no NaN, zero rows where the mask leaves nothing, and
// flash's lse -inf exactly there and within twice lse_bound of the traced flash's elsewhere.
template <class T>
bool check_fast(const FastConfig& c) {
  NullObserver none;
  const AttentionResult<T> naive = run_naive<T>(c.p, none);
  const AttentionResult<T> flash = run_flash<T>(c.p, none, c.tiles);
  bool ok = true;
  const char* dtype = sizeof(T) == 4 ? "float32" : "float64";
  for (const Engine engine : {Engine::naive, Engine::flash}) {
    const AttentionResult<T> fast = run_fast<T>(c.p, engine, {c.tiles, c.threads, c.isa});
    const CompareRecord r = judge_flash<T>(c.p, c.tiles, naive, fast);
    const auto fail = [&](const std::string& what) {
      ok = false;
      FAIL_CHECK(fmt::format("{} fast {}: {}\n  config: {}", dtype, name_of(engine), what, describe(c)));
    };
    if (!r.pass)
      fail(fmt::format("outside compare's rule: max|fast - ref| = {:.3g} > 2·{:.3g} + {:.3g} = {:.3g}",
                       r.flash_vs_ref.max_abs, r.naive_vs_ref.max_abs, r.noise, r.bound));
    if (!(r.flash_vs_ref.max_abs <= r.noise))
      fail(fmt::format("farther from the reference than the noise floor: {:.3g} > {:.3g}", r.flash_vs_ref.max_abs,
                       r.noise));
    if (!test::no_nan(r.flash)) fail("NaN in the output");
    if (!empty_rows_zero(c, r.flash)) fail("a row with nothing to attend is not 0");
    if (fast.empty_rows.size() != naive.empty_rows.size()) fail("the rows with nothing to attend differ");
    if (engine == Engine::flash) {
      // each within its bound of the exact lse, so within twice it of each other; -inf exactly where empty
      REQUIRE(fast.lse.shape() == flash.lse.shape());
      const Tensor<double> bound = lse_bound<T>(c, flash.lse);
      for (std::size_t at = 0; at < fast.lse.size(); ++at) {
        const double got = fast.lse.values()[at], want = flash.lse.values()[at];
        if (std::isinf(want) ? got != want : !(std::abs(got - want) <= 2 * bound.values()[at])) {
          fail(fmt::format("lse at {}: traced {}, fast {}, bound 2·{:.3g}", test::index_of(fast.lse.shape(), at), want,
                           got, bound.values()[at]));
          break;
        }
      }
    }
  }
  return ok;
}

// One config's fast backward in T against the traced naive backward, by compare --backward's rule
// (judge_gradients): every gradient both form, with a seeded dY.
template <class T>
bool check_fast_backward(const FastConfig& c, TileSize backward_tiles) {
  NullObserver none;
  StepKeeper<double> naive(none), fast(none);
  run_naive_backward<T>(c.p, naive, sizeof(T) == 4 ? DType::float32 : DType::float64);
  FastOptions o{c.tiles, c.threads, c.isa};
  o.backward_tiles = backward_tiles;
  const FastBackward<T> f = run_fast_backward<T>(c.p, o);
  for (const auto& [step, value] : f.gradients) fast.on(step, value);
  CompareRecord r;
  judge_gradients<T>(c.p, naive, fast, r, sizeof(T) == 4 ? DType::float32 : DType::float64);
  bool ok = r.gradients_pass && !r.gradients.empty();
  const char* dtype = sizeof(T) == 4 ? "float32" : "float64";
  for (const GradientCheck& g : r.gradients)
    if (!g.pass)
      FAIL_CHECK(
          fmt::format("{} fast backward {}: max|fast - ref| = {:.3g} > 2·{:.3g} + {:.3g}\n  config: {} "
                      "backward tiles {}×{}",
                      dtype, step_info(g.step).name, g.flash_vs_ref.max_abs, g.naive_vs_ref.max_abs, g.noise,
                      describe(c), backward_tiles.Br, backward_tiles.Bc));
  // every gradient of the inputs and the parameters, and the heads' merged
  for (const Step s : {Step::d_q, Step::d_k, Step::d_v, Step::d_X, Step::d_context, Step::d_W_q, Step::d_W_k,
                       Step::d_W_v, Step::d_W_o, Step::d_b_q, Step::d_b_k, Step::d_b_v, Step::d_b_o})
    if (naive.has(s) && !fast.has(s)) {
      FAIL_CHECK(fmt::format("{} fast backward: no {}\n  config: {}", dtype, step_info(s).name, describe(c)));
      ok = false;
    }
  if (!ok && r.gradients.empty()) FAIL_CHECK("no gradient judged: " + describe(c));
  return ok;
}

}  // namespace

TEST_CASE(
    "The fast path agrees with the traced engines by compare's rule over seeded random configurations: every "
    "mask, GQA, cross-attention, batches, RoPE, ALiBi, softcap, sinks, dropout, float32 and float64, every "
    "instruction set",
    "[fast][compare][property]") {
  std::mt19937 rng(140014);
  const std::vector<kernel::Isa> isas = kernel::runnable_isas();
#ifdef ATTN_SANITIZED
  constexpr std::size_t configs = 60;  // under the sanitizers the sweep checks memory, not numbers
#else
  constexpr std::size_t configs = 600;
#endif
  std::size_t failed = 0, by_kind[5] = {}, rope = 0, alibi = 0, gqa = 0, cross = 0, batched = 0, threaded = 0;
  std::size_t capped = 0, sinks = 0, dropped = 0;
  std::vector<std::size_t> by_isa(3);
  for (std::size_t k = 0; k < configs; ++k) {
    const FastConfig c = random_fast_config(rng, 70, isas, k);
    INFO("config " << k << ": " << describe(c));
    if (!check_fast<float>(c)) ++failed;
    if (!check_fast<double>(c)) ++failed;
    ++by_kind[static_cast<int>(c.spec.kind)];
    ++by_isa[static_cast<std::size_t>(c.isa)];
    rope += c.p.rope.has_value();
    alibi += c.p.alibi.has_value();
    gqa += c.p.g < c.p.h;
    cross += c.p.cross;
    batched += c.p.B > 1;
    threaded += c.threads > 1;
    capped += c.p.softcap.has_value();
    sinks += !c.p.sinks.empty();
    dropped += c.p.dropout.has_value();
  }
  CHECK(failed == 0);
  // what the sweep covered, so that a change of the generator cannot quietly narrow it
  for (const std::size_t count : by_kind) CHECK(count >= configs / 10);
  for (const kernel::Isa isa : isas) CHECK(by_isa[static_cast<std::size_t>(isa)] >= configs / 4);
  CHECK(rope >= configs / 8);
  CHECK(alibi >= configs / 8);
  CHECK(gqa >= configs / 8);
  CHECK(cross >= configs / 4);
  CHECK(batched >= configs / 4);
  CHECK(threaded >= configs / 4);
  CHECK(capped >= configs / 8);
  CHECK(sinks >= configs / 8);
  CHECK(dropped >= configs / 8);
}

TEST_CASE(
    "Flash's O += P·V in several spans of keys (heads wide enough that a span is shorter than the tile) "
    "agrees with the traced engines by compare's rule, in every instruction set",
    "[fast][compare]") {
  // A span holds about 16 KiB of V's rows (kernel/simd.hpp's pv_span): with d_v = 200, 19 keys in float32
  // and 16 in float64, so the 384-key tile is summed in 20 or 24 spans, the 50-key tile in 3 or 4, and a
  // causal mask leaves the diagonal tiles' rows spans of every length.
  std::mt19937 rng(2026);
  std::size_t failed = 0, k = 0;
  for (const kernel::Isa isa : kernel::runnable_isas())
    for (const MaskKind kind : {MaskKind::none, MaskKind::causal})
      for (const TileSize tiles : {TileSize{96, 384}, TileSize{24, 50}}) {
        test::Dims d;
        d.B = 1;
        d.n = 300;
        d.d_model = 32;
        d.h = 2;
        d.g = 1;
        d.d_k = 24;
        d.d_v = 200;
        d.d_out = 0;
        FastConfig c;
        c.p = test::random_problem(rng, d);
        c.spec = test::install_mask(rng, c.p, kind, Align::top_left);
        c.tiles = tiles;
        c.threads = 1 + k++ % 2;
        c.isa = isa;
        INFO(describe(c));
        if (!check_fast<float>(c)) ++failed;
        if (!check_fast<double>(c)) ++failed;
      }
  CHECK(failed == 0);
}

TEST_CASE("The fast path gives the same bits on 1, 2 and 3 threads", "[fast][threads]") {
  std::mt19937 rng(77);
  test::Dims d;
  d.B = 2;
  d.n = 400;
  d.d_model = 64;
  d.h = 4;
  d.g = 2;
  d.d_k = 16;
  d.d_v = 16;
  d.d_out = 64;
  d.biases = true;
  Problem p = test::random_problem(rng, d);
  // large enough that every product (the smallest: one head's Q·Kᵀ, n·n·d_k) is worth the threads
  REQUIRE(kernel::threads_for(double(d.n * d.n * d.d_k), 3) == 3);
  test::install_mask(rng, p, MaskKind::causal, Align::top_left);
  for (const Engine engine : {Engine::naive, Engine::flash}) {
    const AttentionResult<float> one = run_fast<float>(p, engine, {{16, 32}, 1});
    for (const std::size_t threads : {2, 3}) {
      const AttentionResult<float> many = run_fast<float>(p, engine, {{16, 32}, threads});
      INFO(name_of(engine) << " on " << threads << " threads");
      CHECK(std::equal(one.output.values().begin(), one.output.values().end(), many.output.values().begin()));
      CHECK(std::equal(one.lse.values().begin(), one.lse.values().end(), many.lse.values().begin()));
    }
  }
}

TEST_CASE(
    "gemm equals a long double product within the rounding of its sums, for any strides, edges and "
    "accumulation, in every instruction set",
    "[fast][gemm]") {
  std::mt19937 rng(5);
  struct Size {
    std::size_t M, N, K;
  };
  // small and ragged ones, one that crosses the cache blocks (K past 256, M past a block of rows), and
  // nothing to sum (K = 0), where C must still be overwritten with the bias (C starts with other values,
  // as the fast path hands C over uninitialised: kernel::Buffer)
  std::vector<Size> sizes = {{1, 1, 1}, {3, 5, 7}, {13, 33, 2}, {300, 70, 260}, {4, 6, 0}};
  for (int k = 0; k < 20; ++k) sizes.push_back({pick(rng, 1, 50), pick(rng, 1, 50), pick(rng, 1, 50)});
  for (const kernel::Isa isa : kernel::runnable_isas())
    for (const Size s : sizes)
      for (const bool transposed_b : {false, true})
        for (const bool accumulate : {false, true}) {
          INFO(fmt::format("{}: M={} N={} K={} B{} {}", kernel::name_of(isa), s.M, s.N, s.K, transposed_b ? "ᵀ" : "",
                           accumulate ? "accumulate" : "overwrite"));
          const std::vector<double> A = test::random_vector(rng, s.M * s.K), B = test::random_vector(rng, s.K * s.N),
                                    bias = test::random_vector(rng, s.N), C0 = test::random_vector(rng, s.M * s.N);
          std::vector<float> a(A.begin(), A.end()), b(B.begin(), B.end()), c(C0.begin(), C0.end());
          const std::vector<float> bias_f(bias.begin(), bias.end());
          // B stored (K, N), or its transpose (N, K)
          const auto K = static_cast<std::ptrdiff_t>(s.K), N = static_cast<std::ptrdiff_t>(s.N);
          kernel::GemmArgs<float> g = kernel::product(s.M, s.N, s.K, a.data(), K, 1, b.data(), transposed_b ? 1 : N,
                                                      transposed_b ? K : 1, c.data(), N);
          g.bias = accumulate ? nullptr : bias_f.data();
          g.accumulate = accumulate;
          kernel::gemm(isa, g, 2);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < s.M; ++i)
            for (std::size_t j = 0; j < s.N; ++j) {
              long double ref = accumulate ? static_cast<float>(C0[i * s.N + j]) : static_cast<float>(bias[j]);
              long double magnitude = std::abs(ref);
              for (std::size_t e = 0; e < s.K; ++e) {
                const long double x = a[i * s.K + e];
                const long double y = transposed_b ? b[j * s.K + e] : b[e * s.N + j];
                ref += x * y;
                magnitude += std::abs(x * y);
              }
              // each of the K + 1 additions rounds once: |error| <= (K + 1)·u·Σ|terms|
              const long double bound = static_cast<long double>(s.K + 1) * 0x1p-24L * magnitude;
              if (std::abs(c[i * s.N + j] - ref) > bound && bad++ == 0)
                FAIL_CHECK(fmt::format("C[{}][{}] = {}, long double {}, bound {}", i, j, c[i * s.N + j],
                                       static_cast<double>(ref), static_cast<double>(bound)));
            }
          CHECK(bad == 0);
        }
}

TEMPLATE_TEST_CASE(
    "Naive's softmax kernel: exp within a few units of roundoff down into the subnormals, masked "
    "columns exactly 0, an empty row all 0, in every instruction set",
    "[fast][softmax]", float, double) {
  using T = TestType;
  // the smallest exponent reached: below exp's smallest normal result (-87.3 in float, -708.4 in double)
  const double deepest = sizeof(T) == 4 ? -100.0 : -740.0;
  for (const kernel::Isa isa : kernel::runnable_isas()) {
    INFO(kernel::name_of(isa));
    // row 0: values from `deepest` to 0 over 37 columns (whole vectors and a tail); row 1 keeps columns
    // [3, 20) and of those the even ones; row 2 keeps nothing
    constexpr std::size_t cols = 37;
    std::vector<T> s(3 * cols), keep(3 * cols, 1);
    for (std::size_t c = 0; c < cols; ++c) {
      s[c] = static_cast<T>(deepest * static_cast<double>(c) / (cols - 1));
      s[cols + c] = static_cast<T>(std::sin(static_cast<double>(c)));
      s[2 * cols + c] = 1;
      keep[cols + c] = c % 2 == 0 ? 1 : 0;
    }
    const std::vector<std::int64_t> lo = {0, 3, 5}, hi = {cols, 20, 5};
    std::vector<T> got = s;
    kernel::SoftmaxRowsArgs<T> a;
    a.rows = 3;
    a.cols = cols;
    a.s = got.data();
    a.row_stride = cols;
    a.score.scale = 1;
    a.score.lo = lo.data();
    a.score.hi = hi.data();
    a.score.keep = keep.data();
    kernel::softmax_rows(isa, a);
    const long double u = std::numeric_limits<T>::epsilon() / 2, tiny = std::numeric_limits<T>::denorm_min();
    std::size_t subnormal = 0;
    for (std::size_t r = 0; r < 2; ++r) {
      long double mx = -inf, sum = 0;
      const auto kept = [&](std::size_t c) {
        return static_cast<std::int64_t>(c) >= lo[r] && static_cast<std::int64_t>(c) < hi[r] && keep[r * cols + c] != 0;
      };
      for (std::size_t c = 0; c < cols; ++c)
        if (kept(c)) mx = std::max<long double>(mx, s[r * cols + c]);
      for (std::size_t c = 0; c < cols; ++c)
        if (kept(c)) sum += std::exp(static_cast<long double>(s[r * cols + c]) - mx);
      for (std::size_t c = 0; c < cols; ++c) {
        const T x = got[r * cols + c];
        if (!kept(c)) {
          CHECK(x == 0);
          continue;
        }
        // long double's own exp, not the kernel's: the reference
        const long double want = std::exp(static_cast<long double>(s[r * cols + c]) - mx) / sum;
        subnormal += want < std::numeric_limits<T>::min();
        INFO("row " << r << " column " << c << ": " << x << " vs " << static_cast<double>(want));
        CHECK(std::abs(x - want) <= 16 * u * want + tiny);
      }
    }
    CHECK(subnormal >= 2);  // the row reached below the normal numbers
    for (std::size_t c = 0; c < cols; ++c) CHECK(got[2 * cols + c] == 0);
  }
}

// BLIS 0.9 picks its kernels by the processor's family and model and took its reference ("generic")
// kernels on a Zen 5, at 15% of the FMA peak; kernel/blis_gemm.cpp picks them by our own instruction set.
// What bench prints as machine.products must say which it got: the set of ours, whatever the processor.
TEST_CASE("BLIS computes the products with the instruction set of our kernels, never its generic ones", "[fast]") {
  const std::string products = kernel::products_name();
  INFO(products);
  if (!products.starts_with("BLIS") || std::getenv("BLIS_ARCH_TYPE") != nullptr) return;  // not ours to choose
  switch (kernel::isa()) {
    case kernel::Isa::avx512: CHECK(products.ends_with(", skx")); break;
    case kernel::Isa::avx2: CHECK(products.ends_with(", haswell")); break;
    case kernel::Isa::baseline: break;  // BLIS's own choice
  }
}

TEST_CASE("run_fast refuses both engines at once and an empty tile", "[fast]") {
  std::mt19937 rng(1);
  const Problem p = test::random_problem(rng, {});
  CHECK_THROWS_WITH(run_fast<float>(p, Engine::both, {}), Catch::Matchers::Contains("one engine at a time"));
  CHECK_THROWS_WITH(run_fast<float>(p, Engine::flash, {{0, 4}, 1}), Catch::Matchers::Contains("both sides must be"));
}

TEST_CASE(
    "The fast backward agrees with the traced naive backward by compare --backward's rule over seeded random "
    "configurations: every mask, GQA, cross-attention, batches, RoPE, ALiBi, softcap, sinks, dropout, float32 and "
    "float64, every instruction set",
    "[fast][backward][property]") {
  std::mt19937 rng(220006);
  const std::vector<kernel::Isa> isas = kernel::runnable_isas();
#ifdef ATTN_SANITIZED
  constexpr std::size_t configs = 20;
#else
  constexpr std::size_t configs = 150;
#endif
  std::size_t failed = 0, by_kind[5] = {}, rope = 0, alibi = 0, gqa = 0, cross = 0, extras = 0;
  for (std::size_t k = 0; k < configs; ++k) {
    FastConfig c = random_fast_config(rng, 40, isas, k);
    extras += c.p.softcap.has_value() + !c.p.sinks.empty() + c.p.dropout.has_value();
    if (pick(rng, 0, 1) == 1) c.p.dY = test::random_tensor(rng, {c.p.B, c.p.n, c.p.d_out});
    const TileSize tiles = pick(rng, 0, 4) == 0 ? fast_backward_tiles() : TileSize{pick(rng, 1, 50), pick(rng, 1, 50)};
    INFO("config " << k << ": " << describe(c) << " backward tiles " << tiles.Br << "x" << tiles.Bc);
    if (!check_fast_backward<float>(c, tiles)) ++failed;
    if (!check_fast_backward<double>(c, tiles)) ++failed;
    ++by_kind[static_cast<int>(c.spec.kind)];
    rope += c.p.rope.has_value();
    alibi += c.p.alibi.has_value();
    gqa += c.p.g < c.p.h;
    cross += c.p.cross;
  }
  CHECK(failed == 0);
  for (const std::size_t count : by_kind) CHECK(count >= configs / 10);
  CHECK(rope >= configs / 8);
  CHECK(alibi >= configs / 8);
  CHECK(gqa >= configs / 8);
  CHECK(cross >= configs / 4);
  CHECK(extras >= configs / 2);  // softcap, sinks and dropout: a quarter of the configurations each
}

TEST_CASE("The fast backward gives the same bits on 1, 2 and 3 threads, in every instruction set",
          "[fast][backward][threads]") {
  std::mt19937 rng(78);
  test::Dims d;
  d.B = 2;
  d.n = 300;
  d.d_model = 32;
  d.h = 4;
  d.g = 2;
  d.d_k = 16;
  d.d_v = 16;
  d.d_out = 32;
  d.biases = true;
  Problem p = test::random_problem(rng, d);
  p.dY = test::random_tensor(rng, {p.B, p.n, p.d_out});
  REQUIRE(kernel::threads_for(double(d.B * d.h * d.n * d.n * (d.d_k + d.d_v)), 3) == 3);
  for (const MaskKind kind : {MaskKind::none, MaskKind::causal}) {
    if (kind == MaskKind::causal) test::install_mask(rng, p, MaskKind::causal, Align::top_left);
    for (const kernel::Isa isa : kernel::runnable_isas()) {
      // small tiles: many key tiles, so that the threads' shares of dQ meet on every query tile
      FastOptions o{{16, 32}, 1, isa};
      o.backward_tiles = {24, 48};
      const FastBackward<float> one = run_fast_backward<float>(p, o);
      for (const std::size_t threads : {2, 3}) {
        o.threads = threads;
        const FastBackward<float> many = run_fast_backward<float>(p, o);
        REQUIRE(many.gradients.size() == one.gradients.size());
        for (std::size_t k = 0; k < one.gradients.size(); ++k) {
          const std::span<const float> a = one.gradients[k].second.values();
          const std::span<const float> b = many.gradients[k].second.values();
          INFO(kernel::name_of(isa) << ", " << to_string(kind) << ", " << threads
                                    << " threads: " << step_info(one.gradients[k].first).name);
          CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
        }
      }
    }
  }
}
