// run --mistake: each mistake made on inputs small enough to work out by hand. The expected numbers are
// written out from the formulas in each test (exp, sums, quotients), never taken from the engine.

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "io/load.hpp"
#include "lessons/mistakes.hpp"

using namespace attn;

namespace {

std::shared_ptr<const Problem> example(const std::string& name) {
  return std::make_shared<const Problem>(load_problem_file(std::string(ATTN_SOURCE_DIR) + "/data/" + name));
}

std::shared_ptr<const Problem> from_text(const std::string& json) {
  return std::make_shared<const Problem>(load_problem(json, "test.json"));
}

// Two tokens of width 1 whose projections are the identity: Q = K = V = X = [[1], [2]], d_k = 1, so the
// scale is 1 and the scores are q_i·k_j = [[1, 2], [2, 4]].
std::string two_tokens(const std::string& mask) {
  return R"({"tokens": ["a", "b"], "X": [[1], [2]], "W_q": [[1]], "W_k": [[1]], "W_v": [[1]], "mask": )" + mask + "}";
}

const Tensor<double>& value(const Trace& t, Step step) {
  const StepRecord* rec = find_step(t, step);
  REQUIRE(rec != nullptr);
  return rec->value;
}

const StepDifference& diff(const MistakeResult& r, Step step) {
  const auto it = std::find_if(r.steps.begin(), r.steps.end(), [&](const StepDifference& d) { return d.step == step; });
  REQUIRE(it != r.steps.end());
  return *it;
}

constexpr double tol = 1e-6;  // float32 runs of numbers near 1

}  // namespace

TEST_CASE("Every mistake has a name that --mistake finds, one line, and both formulas", "[mistakes]") {
  CHECK(all_mistakes().size() == 8);
  for (const MistakeInfo& m : all_mistakes()) {
    INFO(m.name);
    CHECK(mistake_from_name(m.name) == m.mistake);
    CHECK_FALSE(m.summary.empty());
    CHECK(m.intended != m.mistaken);
  }
  CHECK_FALSE(mistake_from_name("no_scale").has_value());
}

TEST_CASE("no-scale on the worked example: the scores of cat stay 4, 0, 2 and its weights sharpen", "[mistakes]") {
  const MistakeResult r = run_mistake(example("the_cat_sat.json"), Mistake::no_scale, DType::float32);
  REQUIRE(r.first_difference == Step::scaled);
  CHECK_FALSE(diff(r, Step::scores).differs());
  // By hand: the largest change of a scaled score is 4 - 4/√2.
  CHECK(diff(r, Step::scaled).max_abs == Approx(4 - 4 / std::sqrt(2.0)).epsilon(1e-6));
  // cat's row: softmax(4, 0, 2) unscaled against softmax(4/√2, 0, 2/√2) scaled.
  const double e4 = std::exp(4.0), e2 = std::exp(2.0), sum = e4 + 1 + e2;
  const Tensor<double>& A = value(r.mistaken, Step::weights);  // (h, n, m)
  CHECK(A(0, 1, 0) == Approx(e4 / sum).margin(tol));
  CHECK(A(0, 1, 1) == Approx(1 / sum).margin(tol));
  CHECK(A(0, 1, 2) == Approx(e2 / sum).margin(tol));
  CHECK(value(r.intended, Step::weights)(0, 1, 0) == Approx(0.7679).margin(1e-4));
  // The costs: cat's largest weight and entropy, intended and mistaken.
  REQUIRE(r.costs.size() == 1);
  const CostRow& cat = r.costs[0].rows[1];
  CHECK(cat.index == 1);
  CHECK(cat.mistaken[0] == Approx(e4 / sum).margin(tol));
  const double s = std::sqrt(2.0), f4 = std::exp(4 / s), f2 = std::exp(2 / s), fsum = f4 + 1 + f2;
  CHECK(cat.intended[0] == Approx(f4 / fsum).margin(tol));
  const auto entropy = [](std::vector<double> p) {
    double h = 0;
    for (const double x : p) h -= x * std::log(x);
    return h;
  };
  CHECK(cat.intended[1] == Approx(entropy({f4 / fsum, 1 / fsum, f2 / fsum})).margin(tol));
  CHECK(cat.mistaken[1] == Approx(entropy({e4 / sum, 1 / sum, e2 / sum})).margin(tol));
  CHECK(cat.mistaken[1] < cat.intended[1]);
}

TEST_CASE("no-scale changes nothing when the scale is 1, and says so", "[mistakes]") {
  const MistakeResult r = run_mistake(from_text(two_tokens(R"({"type": "none"})")), Mistake::no_scale, DType::float64);
  CHECK_FALSE(r.first_difference.has_value());
  CHECK(std::any_of(r.findings.begin(), r.findings.end(),
                    [](const std::string& f) { return f.find("changes nothing") != std::string::npos; }));
}

TEST_CASE("no-mask lets the first token see the second: its leak is e^2 / (e^1 + e^2)", "[mistakes]") {
  const MistakeResult r = run_mistake(from_text(two_tokens(R"({"type": "causal"})")), Mistake::no_mask, DType::float64);
  REQUIRE(r.first_difference == Step::masked);
  const double leak = std::exp(2.0) / (std::exp(1.0) + std::exp(2.0));  // 0.7311
  REQUIRE(r.costs.size() == 1);
  REQUIRE(r.costs[0].rows.size() == 1);  // only "a" is restricted by the causal mask
  CHECK(r.costs[0].rows[0].index == 0);
  CHECK(r.costs[0].rows[0].intended[0] == 0);
  CHECK(r.costs[0].rows[0].mistaken[0] == Approx(leak).epsilon(1e-12));
  // The output of "a": the value 1 alone, against 1·(1 - leak) + 2·leak.
  CHECK(diff(r, Step::output).max_abs == Approx(leak).epsilon(1e-12));
}

TEST_CASE("mask-after-softmax leaves the first row summing to e^1 / (e^1 + e^2)", "[mistakes]") {
  const MistakeResult r =
      run_mistake(from_text(two_tokens(R"({"type": "causal"})")), Mistake::mask_after_softmax, DType::float64);
  REQUIRE(r.first_difference == Step::masked);
  const Tensor<double>& A = value(r.mistaken, Step::weights);           // (h, n, m)
  const double kept = std::exp(1.0) / (std::exp(1.0) + std::exp(2.0));  // 0.2689
  CHECK(A(0, 0, 0) == Approx(kept).epsilon(1e-12));
  CHECK(A(0, 0, 1) == 0);
  CHECK(A(0, 1, 0) == Approx(value(r.intended, Step::weights)(0, 1, 0)).epsilon(1e-12));
  REQUIRE(r.costs[0].rows.size() == 1);
  CHECK(r.costs[0].rows[0].mistaken[0] == Approx(kept).epsilon(1e-12));
}

TEST_CASE("softmax-columns normalises each key's column: scores 1, 2 over 2, 4", "[mistakes]") {
  const MistakeResult r =
      run_mistake(from_text(two_tokens(R"({"type": "none"})")), Mistake::softmax_columns, DType::float64);
  REQUIRE(r.first_difference == Step::weights);
  // Column 0 holds the scores 1 and 2, column 1 the scores 2 and 4.
  const double a00 = 1 / (1 + std::exp(1.0)), a10 = 1 - a00;
  const double a01 = 1 / (1 + std::exp(2.0)), a11 = 1 - a01;
  const Tensor<double>& A = value(r.mistaken, Step::weights);
  CHECK(A(0, 0, 0) == Approx(a00).epsilon(1e-12));
  CHECK(A(0, 1, 0) == Approx(a10).epsilon(1e-12));
  CHECK(A(0, 0, 1) == Approx(a01).epsilon(1e-12));
  CHECK(A(0, 1, 1) == Approx(a11).epsilon(1e-12));
  REQUIRE(r.costs.size() == 2);
  CHECK(r.costs[0].rows[0].mistaken[0] == Approx(a00 + a01).epsilon(1e-12));  // row sums: 0.388, 1.612
  CHECK(r.costs[0].rows[1].mistaken[0] == Approx(a10 + a11).epsilon(1e-12));
  CHECK(r.costs[1].by_key);
  for (const CostRow& col : r.costs[1].rows) CHECK(col.mistaken[0] == Approx(1).epsilon(1e-12));
}

TEST_CASE("shared-qkv makes every head's scores symmetric, and is refused where Q = K = V cannot be", "[mistakes]") {
  const MistakeResult r = run_mistake(example("gpt_causal.json"), Mistake::shared_qkv, DType::float64);
  REQUIRE(r.first_difference == Step::k);
  const Tensor<double>& S = value(r.mistaken, Step::scores);  // (h, n, n)
  for (std::size_t hd = 0; hd < S.dim(0); ++hd)
    for (std::size_t i = 0; i < S.dim(1); ++i)
      for (std::size_t j = 0; j < S.dim(2); ++j) CHECK(S(hd, i, j) == S(hd, j, i));
  CHECK(value(r.mistaken, Step::k) == value(r.intended, Step::q));
  CHECK(value(r.mistaken, Step::v) == value(r.intended, Step::q));
  CHECK(mistake_refused(Mistake::shared_qkv, *example("cross_attention.json")).has_value());
  CHECK_FALSE(mistake_refused(Mistake::shared_qkv, *example("the_cat_sat.json")).has_value());
  CHECK_FALSE(mistake_refused(Mistake::no_mask, *example("cross_attention.json")).has_value());
}

TEST_CASE("wrong-reshape reads the rows a b and c d of Q as heads a b and c d instead of a c and b d", "[mistakes]") {
  // Two tokens, two heads of width 1, projections the identity: Q = X = [[1, 2], [3, 4]].
  const std::string input = R"({"tokens": ["x", "y"], "X": [[1, 2], [3, 4]], "n_heads": 2,
    "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [0, 1]]})";
  const MistakeResult r = run_mistake(from_text(input), Mistake::wrong_reshape, DType::float64);
  REQUIRE(r.first_difference == Step::q_heads);
  const Tensor<double>& right = value(r.intended, Step::q_heads);  // (h, n, d_k)
  const Tensor<double>& wrong = value(r.mistaken, Step::q_heads);
  CHECK(right.values()[0] == 1);
  CHECK(right.values()[1] == 3);
  CHECK(right.values()[2] == 2);
  CHECK(right.values()[3] == 4);
  CHECK(wrong.values()[0] == 1);
  CHECK(wrong.values()[1] == 2);
  CHECK(wrong.values()[2] == 3);
  CHECK(wrong.values()[3] == 4);
  // Own features: head 0 of x and head 1 of y keep theirs (1 and 4); the other two rows do not.
  REQUIRE(r.costs[0].rows.size() == 4);
  CHECK(r.costs[0].rows[0].mistaken[0] == 1);  // head 0, x
  CHECK(r.costs[0].rows[1].mistaken[0] == 0);  // head 0, y: holds 2, x's head 1
  CHECK(r.costs[0].rows[2].mistaken[0] == 0);  // head 1, x: holds 3, y's head 0
  CHECK(r.costs[0].rows[3].mistaken[0] == 1);  // head 1, y
}

TEST_CASE("wrong-reshape changes nothing with one head", "[mistakes]") {
  const MistakeResult r = run_mistake(example("the_cat_sat.json"), Mistake::wrong_reshape, DType::float32);
  CHECK_FALSE(r.first_difference.has_value());
}

TEST_CASE("minus-1e9 gives a row the mask empties the weights 1/2, 1/2 instead of none", "[mistakes]") {
  const MistakeResult r =
      run_mistake(from_text(two_tokens(R"({"type": "custom", "allow": [[true, false], [false, false]]})")),
                  Mistake::minus_1e9, DType::float32);
  REQUIRE(r.first_difference == Step::masked);
  const Tensor<double>&right = value(r.intended, Step::weights), &wrong = value(r.mistaken, Step::weights);
  CHECK(right(0, 1, 0) == 0);
  CHECK(right(0, 1, 1) == 0);
  CHECK(wrong(0, 1, 0) == 0.5);
  CHECK(wrong(0, 1, 1) == 0.5);
  CHECK(wrong(0, 0, 0) == 1);  // a row with an allowed key: exp(-1e9 - 1) is exactly 0
  CHECK(wrong(0, 0, 1) == 0);
  // b's output: the mean of the values 1 and 2 instead of 0.
  CHECK(value(r.mistaken, Step::output)(1, 0) == 1.5);
  CHECK(value(r.intended, Step::output)(1, 0) == 0);
  REQUIRE(r.costs[0].rows.size() == 1);
  CHECK(r.costs[0].rows[0].mistaken[0] == 1);
}

TEST_CASE("minus-1e9 on a causal mask that empties no row gives exactly the weights of -infinity", "[mistakes]") {
  const MistakeResult r = run_mistake(example("gpt_causal.json"), Mistake::minus_1e9, DType::float32);
  REQUIRE(r.first_difference == Step::masked);
  CHECK_FALSE(diff(r, Step::weights).differs());
  CHECK_FALSE(diff(r, Step::output).differs());
}
