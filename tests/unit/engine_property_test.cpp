// Properties of the naive engine over seeded random sweeps: what must hold for any input, checked
// against independent computations written here (the mask formulas of docs/input-format.md, the GQA
// head mapping, permutations, float64 as the reference for float32).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/naive.hpp"
#include "io/load.hpp"
#include "model/mask.hpp"
#include "mask_spec.hpp"
#include "support.hpp"
#include "trace/collector.hpp"

using namespace attn;
using attn::test::check_close;
using attn::test::Dims;
using attn::test::MaskSpec;
using attn::test::pick;
using attn::test::random_mask;
using attn::test::random_problem;
using attn::test::run_recorded;
using attn::test::spec_band_allows;

namespace {

// Random sizes: batch, self or cross, heads with g | h, head widths, with or without W_o and biases.
Dims random_dims(std::mt19937& rng) {
  Dims d;
  d.B = pick(rng, 1, 2);
  d.n = pick(rng, 1, 6);
  d.m = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, 7);
  d.d_model = pick(rng, 1, 6);
  d.d_context = pick(rng, 1, 6);
  d.h = std::vector<std::size_t>{1, 2, 4}[pick(rng, 0, 2)];
  const std::vector<std::size_t> divisors = d.h == 4   ? std::vector<std::size_t>{1, 2, 4}
                                            : d.h == 2 ? std::vector<std::size_t>{1, 2}
                                                       : std::vector<std::size_t>{1};
  d.g = divisors[pick(rng, 0, divisors.size() - 1)];
  d.d_k = pick(rng, 1, 4);
  d.d_v = pick(rng, 1, 4);
  d.d_out = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, 5);
  d.biases = pick(rng, 0, 1) == 1;
  return d;
}

std::string describe(const Problem& p, const MaskSpec& s) {
  return fmt::format("B={} n={} m={} h={} g={} d_k={} d_v={} W_o={} mask={} align={} window={}", p.B, p.n, p.m, p.h,
                     p.g, p.d_k, p.d_v, p.has_output_projection(), to_string(s.kind), to_string(s.align), s.window);
}

// Every weight row: exactly 0 where the mask forbids, > 0 where it allows, summing to 1 within `tol`;
// all zeros for a row with nothing to attend. Returns the rows (b, i) that had nothing to attend.
std::vector<EmptyRow> check_weights(const Problem& p, const MaskSpec& spec, const Tensor<double>& A, double tol) {
  REQUIRE(A.shape() == Shape{p.B, p.h, p.n, p.m});
  std::vector<EmptyRow> empty;
  std::size_t bad = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      const bool has_key = spec.row_has_key(p, b, i);
      if (!has_key) empty.push_back({b, i});
      for (std::size_t hd = 0; hd < p.h; ++hd) {
        double sum = 0;
        for (std::size_t j = 0; j < p.m; ++j) {
          const double a = A(b, hd, i, j);
          const bool allowed = spec.allows(p, b, i, j);
          if (std::isnan(a) || (allowed && !(a > 0)) || (!allowed && a != 0)) {
            ++bad;
            FAIL_CHECK(fmt::format("weights[{}, {}, {}, {}] = {} but the key is {}", b, hd, i, j, a,
                                   allowed ? "allowed" : "masked"));
          }
          sum += a;
        }
        const double expected = has_key ? 1.0 : 0.0;
        if (!(std::abs(sum - expected) <= tol)) {
          ++bad;
          FAIL_CHECK(fmt::format("weights row [{}, {}, {}] sums to {}, expected {}", b, hd, i, sum, expected));
        }
      }
    }
  CHECK(bad == 0);
  return empty;
}

double max_abs(const Tensor<double>& t) {
  double m = 0;
  for (const double x : t.values())
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace

// ---------------------------------------------------------------------------------------------- softmax

TEMPLATE_TEST_CASE("Every weight row sums to 1 when it has a key, is 0 where masked, and empty rows are listed",
                   "[engine][softmax][mask][property]", float, double) {
  const double tol = sizeof(TestType) == 4 ? 1e-5 : 1e-12;
  for (unsigned seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    Problem p = random_problem(rng, random_dims(rng));
    const MaskSpec spec = random_mask(rng, p);
    INFO("seed " << seed << ": " << describe(p, spec));
    const auto run = run_recorded<TestType>(p);
    const std::vector<EmptyRow> empty = check_weights(p, spec, run.steps.at(Step::weights), tol);
    CHECK(run.result.empty_rows == empty);
    for (const Step step : steps_of(p)) {
      if (step == Step::masked) continue;  // holds -inf by design
      INFO("step " << step_info(step).name);
      CHECK(attn::test::no_nan(run.steps.at(step)));
    }
  }
}

// ------------------------------------------------------------------------------------------------- masks

TEST_CASE("A causal mask leaves exactly zero weight above the diagonal", "[engine][mask][property]") {
  for (unsigned seed = 0; seed < 50; ++seed) {
    std::mt19937 rng(1000 + seed);
    Dims d;
    d.B = pick(rng, 1, 2);
    d.n = pick(rng, 1, 8);
    d.h = 2;
    d.d_model = 4;
    Problem p = random_problem(rng, d);
    p.mask.kind = MaskKind::causal;
    INFO("seed " << seed << ", n " << p.n);
    const auto run = run_recorded<float>(p);
    const Tensor<double>& A = run.steps.at(Step::weights);
    for (std::size_t b = 0; b < p.B; ++b)
      for (std::size_t hd = 0; hd < p.h; ++hd)
        for (std::size_t i = 0; i < p.n; ++i)
          for (std::size_t j = 0; j < p.n; ++j) {
            if (j > i && A(b, hd, i, j) != 0)
              FAIL_CHECK(fmt::format("weights[{}, {}, {}, {}] = {}", b, hd, i, j, A(b, hd, i, j)));
            if (j <= i && !(A(b, hd, i, j) > 0))
              FAIL_CHECK(fmt::format("weights[{}, {}, {}, {}] = {}", b, hd, i, j, A(b, hd, i, j)));
          }
    // the first query sees only itself
    CHECK(A(0, 0, 0, 0) == 1);
    CHECK(run.result.empty_rows.empty());
  }
}

TEST_CASE("Mask::allows matches the causal and sliding-window formulas of docs/input-format.md", "[mask][property]") {
  std::size_t checked = 0;
  for (const MaskKind kind : {MaskKind::causal, MaskKind::sliding_window})
    for (const Align align : {Align::top_left, Align::bottom_right})
      for (std::size_t n = 1; n <= 7; ++n)
        for (std::size_t m = 1; m <= 7; ++m)
          for (std::size_t w = 1; w <= (kind == MaskKind::causal ? 1u : 9u); ++w) {
            Mask mask;
            mask.kind = kind;
            mask.align = align;
            mask.window = kind == MaskKind::sliding_window ? w : 0;
            mask.n = n;
            mask.m = m;
            CHECK(mask.offset() ==
                  (align == Align::bottom_right ? static_cast<long long>(m) - static_cast<long long>(n) : 0));
            for (std::size_t i = 0; i < n; ++i) {
              const auto [first, last] = mask.band(i);
              for (std::size_t j = 0; j < m; ++j) {
                const bool expected =
                    spec_band_allows(kind, align, static_cast<long long>(w), static_cast<long long>(n),
                                     static_cast<long long>(m), static_cast<long long>(i), static_cast<long long>(j));
                ++checked;
                if (mask.allows(0, i, j) != expected)
                  FAIL_CHECK(fmt::format("{} {} n={} m={} w={}: allows({}, {}) = {}, formula says {}", to_string(kind),
                                         to_string(align), n, m, w, i, j, !expected, expected));
                // band() is the [first, last) range of allowed keys
                if ((first <= j && j < last) != expected)
                  FAIL_CHECK(fmt::format("{} {} n={} m={} w={}: band({}) = [{}, {}) disagrees at key {}",
                                         to_string(kind), to_string(align), n, m, w, i, first, last, j));
              }
            }
          }
  CHECK(checked > 10000);
}

TEST_CASE("Mask::allows follows padding flags and the custom matrix, per batch item or shared", "[mask]") {
  Mask padding;
  padding.kind = MaskKind::padding;
  padding.n = 2;
  padding.m = 3;
  padding.keep = Tensor<std::uint8_t>({1, 3}, std::vector<std::uint8_t>{1, 0, 1});  // shared by all items
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(padding.allows(b, i, 0));
      CHECK_FALSE(padding.allows(b, i, 1));
      CHECK(padding.allows(b, i, 2));
    }
  padding.keep = Tensor<std::uint8_t>({2, 3}, std::vector<std::uint8_t>{1, 0, 1, 0, 1, 1});  // one per item
  CHECK_FALSE(padding.allows(0, 0, 1));
  CHECK_FALSE(padding.allows(1, 0, 0));
  CHECK(padding.allows(1, 1, 1));

  Mask custom;
  custom.kind = MaskKind::custom;
  custom.n = 2;
  custom.m = 2;
  custom.allow = Tensor<std::uint8_t>({1, 2, 2}, std::vector<std::uint8_t>{0, 1, 1, 0});
  CHECK_FALSE(custom.allows(0, 0, 0));
  CHECK(custom.allows(0, 0, 1));
  CHECK(custom.allows(0, 1, 0));
  CHECK_FALSE(custom.allows(0, 1, 1));
}

TEST_CASE("A bottom_right causal mask with more queries than keys leaves the first n - m rows empty",
          "[engine][mask]") {
  // o = m - n = -2: query i sees keys j <= i - 2, so queries 0 and 1 see nothing.
  std::mt19937 rng(5);
  Dims d;
  d.n = 5;
  d.m = 3;
  Problem p = random_problem(rng, d);
  p.mask.kind = MaskKind::causal;
  p.mask.align = Align::bottom_right;
  const auto run = run_recorded<double>(p);
  CHECK(run.result.empty_rows == std::vector<EmptyRow>{{0, 0}, {0, 1}});
  const Tensor<double>& A = run.steps.at(Step::weights);
  // query 2 sees key 0 only; query 4 sees all three
  CHECK(A(0, 0, 2, 0) == 1);
  CHECK(A(0, 0, 2, 1) == 0);
  CHECK(A(0, 0, 4, 2) > 0);
}

// ------------------------------------------------------------------------------------ rows with no key

TEMPLATE_TEST_CASE("A custom mask with an all-false row gives that row zero weights, zero head output and output b_o",
                   "[engine][mask]", float, double) {
  std::mt19937 rng(21);
  Dims d;
  d.n = 3;
  d.h = 2;
  d.d_model = 4;
  d.d_out = 3;
  d.biases = true;
  Problem p = random_problem(rng, d);
  p.mask.kind = MaskKind::custom;
  // query 1 may attend nothing; the others everything
  p.mask.allow = Tensor<std::uint8_t>({1, 3, 3}, std::vector<std::uint8_t>{1, 1, 1, 0, 0, 0, 1, 1, 1});
  const auto run = run_recorded<TestType>(p);

  CHECK(run.result.empty_rows == std::vector<EmptyRow>{{0, 1}});
  for (const Step step : steps_of(p)) {
    if (step == Step::masked) continue;
    INFO("step " << step_info(step).name);
    CHECK(attn::test::no_nan(run.steps.at(step)));
  }
  const Tensor<double>& A = run.steps.at(Step::weights);
  const Tensor<double>& O_h = run.steps.at(Step::head_outputs);
  const Tensor<double>& O = run.steps.at(Step::concat);
  const Tensor<double>& Y = run.steps.at(Step::output);
  for (std::size_t hd = 0; hd < p.h; ++hd) {
    for (std::size_t j = 0; j < p.m; ++j) CHECK(A(0, hd, 1, j) == 0);
    for (std::size_t c = 0; c < p.d_v; ++c) CHECK(O_h(0, hd, 1, c) == 0);
  }
  for (std::size_t c = 0; c < p.h * p.d_v; ++c) CHECK(O(0, 1, c) == 0);
  // output = 0·W_o + b_o = b_o (rounded to the engine's type)
  for (std::size_t c = 0; c < p.d_out; ++c) CHECK(Y(0, 1, c) == static_cast<double>(static_cast<TestType>(p.b_o[c])));
  // the other rows are ordinary
  for (std::size_t hd = 0; hd < p.h; ++hd) {
    double sum = 0;
    for (std::size_t j = 0; j < p.m; ++j) sum += A(0, hd, 0, j);
    CHECK(sum == Approx(1).margin(1e-5));
  }
}

TEST_CASE("A padding mask that drops every key empties every row, with zero weights, output b_o, all listed",
          "[engine][mask]") {
  std::mt19937 rng(22);
  Dims d;
  d.B = 2;
  d.n = 3;
  d.m = 4;
  d.d_out = 2;
  d.biases = true;
  Problem p = random_problem(rng, d);
  p.mask.kind = MaskKind::padding;
  // item 0 keeps no key; item 1 keeps keys 0 and 3
  p.mask.keep = Tensor<std::uint8_t>({2, 4}, std::vector<std::uint8_t>{0, 0, 0, 0, 1, 0, 0, 1});
  const auto run = run_recorded<float>(p);
  CHECK(run.result.empty_rows == std::vector<EmptyRow>{{0, 0}, {0, 1}, {0, 2}});
  const Tensor<double>& A = run.steps.at(Step::weights);
  const Tensor<double>& Y = run.steps.at(Step::output);
  CHECK(attn::test::no_nan(A));
  CHECK(attn::test::no_nan(Y));
  for (std::size_t i = 0; i < p.n; ++i) {
    for (std::size_t j = 0; j < p.m; ++j) CHECK(A(0, 0, i, j) == 0);
    for (std::size_t c = 0; c < p.d_out; ++c) CHECK(Y(0, i, c) == static_cast<double>(static_cast<float>(p.b_o[c])));
    // item 1: only keys 0 and 3, weights summing to 1
    CHECK(A(1, 0, i, 1) == 0);
    CHECK(A(1, 0, i, 2) == 0);
    CHECK(A(1, 0, i, 0) + A(1, 0, i, 3) == Approx(1).margin(1e-6));
  }
}

TEST_CASE("A trace warns once per row with nothing to attend, naming the query", "[engine][mask]") {
  const std::string text = R"({"X": [[1, 0], [0, 1], [1, 1]], "tokens": ["a", "b", "c"],
    "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [0, 1]],
    "W_o": [[1, 0], [0, 1]], "b_o": [0.5, -2],
    "mask": {"type": "padding", "keep": [0, 0, 0]}})";
  const auto p = std::make_shared<const Problem>(load_problem(text, "test.json"));
  TraceCollector collector(p, DType::float64);
  AttentionResult<double> result = run_naive<double>(*p, collector);
  const Trace trace = std::move(collector).finish(result.empty_rows);
  CHECK(trace.empty_rows == std::vector<EmptyRow>{{0, 0}, {0, 1}, {0, 2}});
  REQUIRE(trace.warnings.size() == 3);
  CHECK_THAT(trace.warnings[1], Catch::Contains("\"b\""));
  // every output row is b_o
  check_close("output", cast<double>(result.output), {1, 3, 2}, {0.5, -2, 0.5, -2, 0.5, -2}, 0);
}

// --------------------------------------------------------------------------------------- equivariance

TEST_CASE("Self-attention without a mask is permutation-equivariant", "[engine][property]") {
  for (unsigned seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(2000 + seed);
    Dims d = random_dims(rng);
    d.m = 0;  // self-attention
    d.B = 1;
    const Problem p = random_problem(rng, d);
    std::vector<std::size_t> perm(p.n);
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    // X'[i] = X[perm[i]]
    Problem q = p;
    for (std::size_t i = 0; i < p.n; ++i)
      for (std::size_t c = 0; c < p.d_model; ++c) q.X(0, i, c) = p.X(0, perm[i], c);
    q.C = q.X;
    INFO("seed " << seed << ", perm " << fmt::format("{}", fmt::join(perm, " ")));
    const Tensor<double> Y = run_recorded<double>(p).result.output;
    const Tensor<double> Y_perm = run_recorded<double>(q).result.output;
    Tensor<double> expected(Y.shape());  // Y'[i] = Y[perm[i]]
    for (std::size_t i = 0; i < p.n; ++i)
      for (std::size_t c = 0; c < p.d_out; ++c) expected(0, i, c) = Y(0, perm[i], c);
    check_close("output", Y_perm, expected, 1e-12);
  }
}

// ----------------------------------------------------------------------------------------------- GQA

TEST_CASE("GQA with 4 query heads and 2 key/value heads equals MHA with each K/V block repeated for its heads",
          "[engine][property]") {
  for (unsigned seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(3000 + seed);
    Dims d;
    d.B = pick(rng, 1, 2);
    d.n = pick(rng, 1, 5);
    d.m = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, 6);
    d.d_model = pick(rng, 2, 6);
    d.h = 4;
    d.g = 2;
    d.d_k = pick(rng, 1, 3);
    d.d_v = pick(rng, 1, 3);
    d.d_out = pick(rng, 1, 4);
    d.biases = true;
    const Problem gqa = random_problem(rng, d);

    // MHA: head i gets its own copy of K/V head i / 2, i.e. column blocks [kv0 | kv0 | kv1 | kv1]
    Problem mha = gqa;
    mha.g = 4;
    const auto repeat_blocks = [&](const Tensor<double>& W, const std::vector<double>& b, std::size_t width,
                                   Tensor<double>& W_out, std::vector<double>& b_out) {
      W_out = Tensor<double>({W.dim(0), 4 * width});
      b_out.assign(4 * width, 0.0);
      for (std::size_t head = 0; head < 4; ++head) {
        const std::size_t kv = head / 2;
        for (std::size_t c = 0; c < width; ++c) {
          for (std::size_t r = 0; r < W.dim(0); ++r) W_out(r, head * width + c) = W(r, kv * width + c);
          b_out[head * width + c] = b[kv * width + c];
        }
      }
    };
    repeat_blocks(gqa.W_k, gqa.b_k, gqa.d_k, mha.W_k, mha.b_k);
    repeat_blocks(gqa.W_v, gqa.b_v, gqa.d_v, mha.W_v, mha.b_v);

    INFO("seed " << seed);
    const auto a = run_recorded<double>(gqa);
    const auto b = run_recorded<double>(mha);
    CHECK(a.steps.at(Step::k_heads).shape()[1] == 2);
    CHECK(b.steps.at(Step::k_heads).shape()[1] == 4);
    check_close("scores", a.steps.at(Step::scores), b.steps.at(Step::scores), 1e-12);
    check_close("weights", a.steps.at(Step::weights), b.steps.at(Step::weights), 1e-12);
    check_close("head_outputs", a.steps.at(Step::head_outputs), b.steps.at(Step::head_outputs), 1e-12);
    check_close("output", a.result.output, b.result.output, 1e-12);
  }
}

// -------------------------------------------------------------------------------------------- layout

namespace {

std::string json_matrix(const Tensor<double>& W, bool transposed) {
  std::vector<std::string> rows;
  const std::size_t R = transposed ? W.dim(1) : W.dim(0), C = transposed ? W.dim(0) : W.dim(1);
  for (std::size_t r = 0; r < R; ++r) {
    std::vector<double> row;
    for (std::size_t c = 0; c < C; ++c) row.push_back(transposed ? W(c, r) : W(r, c));
    rows.push_back(fmt::format("[{}]", fmt::join(row, ", ")));  // {} is the shortest round-trip form
  }
  return fmt::format("[{}]", fmt::join(rows, ", "));
}

std::string json_problem(const Problem& p, bool out_in) {
  Tensor<double> X({p.n, p.d_model}, std::vector<double>(p.X.values().begin(), p.X.values().end()));
  std::string text = fmt::format(R"({{"X": {}, "n_heads": {}, "n_kv_heads": {}, "layout": "{}")", json_matrix(X, false),
                                 p.h, p.g, out_in ? "out_in" : "in_out");
  text += fmt::format(R"(, "W_q": {}, "W_k": {}, "W_v": {}, "W_o": {})", json_matrix(p.W_q, out_in),
                      json_matrix(p.W_k, out_in), json_matrix(p.W_v, out_in), json_matrix(p.W_o, out_in));
  text += fmt::format(R"(, "b_q": [{}], "b_k": [{}], "b_v": [{}], "b_o": [{}]}})", fmt::join(p.b_q, ", "),
                      fmt::join(p.b_k, ", "), fmt::join(p.b_v, ", "), fmt::join(p.b_o, ", "));
  return text;
}

}  // namespace

TEST_CASE("Layout out_in with every weight transposed gives the same output as in_out", "[engine][loader][property]") {
  for (unsigned seed = 0; seed < 10; ++seed) {
    std::mt19937 rng(4000 + seed);
    Dims d;
    d.n = pick(rng, 1, 5);
    d.d_model = pick(rng, 2, 6);
    d.h = 2;
    d.g = pick(rng, 1, 2);
    d.d_k = pick(rng, 1, 3);
    d.d_v = pick(rng, 1, 3);
    d.d_out = pick(rng, 1, 5);
    d.biases = true;
    const Problem original = random_problem(rng, d);
    const Problem in_out = load_problem(json_problem(original, false), "in_out.json");
    const Problem out_in = load_problem(json_problem(original, true), "out_in.json");
    INFO("seed " << seed);
    CHECK(out_in.layout == Layout::out_in);
    // both are held in the math convention, equal to the weights they were written from
    CHECK(in_out.W_q == original.W_q);
    CHECK(out_in.W_q == original.W_q);
    CHECK(out_in.W_k == original.W_k);
    CHECK(out_in.W_v == original.W_v);
    CHECK(out_in.W_o == original.W_o);
    const auto a = run_recorded<double>(in_out);
    const auto b = run_recorded<double>(out_in);
    check_close("output", b.result.output, a.result.output, 0);
    check_close("output vs the C++-built problem", a.result.output, run_recorded<double>(original).result.output, 0);
  }
}

// ------------------------------------------------------------------------------------------ precision

TEST_CASE("float32 and float64 runs agree to 1e-5 relative to the values' magnitude", "[engine][property]") {
  for (unsigned seed = 0; seed < 100; ++seed) {
    std::mt19937 rng(5000 + seed);
    Problem p = random_problem(rng, random_dims(rng));
    const MaskSpec spec = random_mask(rng, p);
    INFO("seed " << seed << ": " << describe(p, spec));
    const auto f = run_recorded<float>(p);
    const auto r = run_recorded<double>(p);
    for (const Step step : steps_of(p)) {
      const Tensor<double>& reference = r.steps.at(step);
      check_close(step_info(step).name, f.steps.at(step), reference, 1e-5 * std::max(1.0, max_abs(reference)));
    }
    CHECK(f.result.empty_rows == r.result.empty_rows);
  }
}

// ------------------------------------------------------------------------------------------------ shapes

TEST_CASE("Cross-attention with m != n gives every step its (n, m) shape", "[engine]") {
  std::mt19937 rng(6);
  Dims d;
  d.B = 2;
  d.n = 3;
  d.m = 5;
  d.d_model = 4;
  d.d_context = 6;
  d.h = 4;
  d.g = 2;
  d.d_k = 2;
  d.d_v = 3;
  d.d_out = 7;
  const Problem p = random_problem(rng, d);
  const auto run = run_recorded<double>(p);
  const auto shape = [&](Step s) { return run.steps.at(s).shape(); };
  CHECK(shape(Step::q) == Shape{2, 3, 8});  // (B, n, h·d_k)
  CHECK(shape(Step::k) == Shape{2, 5, 4});  // (B, m, g·d_k)
  CHECK(shape(Step::v) == Shape{2, 5, 6});  // (B, m, g·d_v)
  CHECK(shape(Step::q_heads) == Shape{2, 4, 3, 2});
  CHECK(shape(Step::k_heads) == Shape{2, 2, 5, 2});
  CHECK(shape(Step::v_heads) == Shape{2, 2, 5, 3});
  for (const Step s : {Step::scores, Step::scaled, Step::masked, Step::weights}) CHECK(shape(s) == Shape{2, 4, 3, 5});
  CHECK(shape(Step::head_outputs) == Shape{2, 4, 3, 3});
  CHECK(shape(Step::concat) == Shape{2, 3, 12});
  CHECK(shape(Step::output) == Shape{2, 3, 7});
}

TEST_CASE("A 2-D cross-attention trace drops the batch axis, so scores are (h, n, m)", "[engine][loader]") {
  const std::string text = R"({"X": [[1, 0], [0, 1]], "context": {"X": [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]]},
    "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1], [1, 1]], "W_v": [[1, 0], [0, 1], [1, 1]],
    "mask": {"type": "sliding_window", "window": 2, "align": "bottom_right"}})";
  const auto p = std::make_shared<const Problem>(load_problem(text, "cross.json"));
  TraceCollector collector(p, DType::float64);
  AttentionResult<double> result = run_naive<double>(*p, collector);
  const Trace trace = std::move(collector).finish(result.empty_rows);
  REQUIRE(trace.steps.size() == steps_of(*p).size());
  CHECK(trace.steps[6].step == Step::scores);
  CHECK(trace.steps[6].value.shape() == Shape{1, 2, 4});
  // o = m - n = 2, w = 2: query 0 sees keys 1, 2; query 1 sees keys 2, 3
  const Tensor<double>& A = trace.steps[9].value;
  CHECK(A(0, 0, 0) == 0);
  CHECK(A(0, 0, 1) > 0);
  CHECK(A(0, 0, 2) > 0);
  CHECK(A(0, 0, 3) == 0);
  CHECK(A(0, 1, 0) == 0);
  CHECK(A(0, 1, 1) == 0);
  CHECK(A(0, 1, 2) > 0);
  CHECK(A(0, 1, 3) > 0);
  // by hand: Q = X·I = X; K = C·W_k = [[1, 0], [0, 1], [1, 1], [2, 2]]. Query 0 = [1, 0] meets keys 1
  // and 2 with scores 0 and 1, scaled by 1/sqrt(2): weights [1, e^(1/√2)] / (1 + e^(1/√2))
  const double a = std::exp(1 / std::sqrt(2.0));
  CHECK(A(0, 0, 1) == Approx(1 / (a + 1)).epsilon(1e-12));
  CHECK(A(0, 0, 2) == Approx(a / (a + 1)).epsilon(1e-12));
}
