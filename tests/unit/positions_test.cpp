// RoPE and ALiBi by hand: the rotation of a vector whose angle is known, the frequencies and slopes of
// their papers, where the steps sit in the pipeline, and every input error with its JSON Pointer.

#include <cmath>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/compare.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"
#include "ops/attention.hpp"
#include "support.hpp"
#include "trace/trace.hpp"

using namespace attn;

namespace {

// One token (X = [[1, 2]]) through identity weights: q = k = v = [1, 2], one head of d_k = 2.
std::string one_token(const std::string& extra) {
  return fmt::format(
      R"({{"X": [[1, 2]], "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [0, 1]]{}}})", extra);
}

// Three tokens, 2 heads of d_k = 2 (identity weights of 4 × 4), for the loader's errors.
std::string three_tokens(const std::string& extra) {
  const std::string eye = "[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]";
  return fmt::format(R"({{"X": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], "n_heads": 2, "W_q": {}, "W_k": {}, )"
                     R"("W_v": {}{}}})",
                     eye, eye, eye, extra);
}

std::pair<std::string, std::string> error_of(const std::string& text) {
  try {
    (void)load_problem(text, "test.json");
  } catch (const InputError& e) {
    return {e.pointer(), e.message()};
  }
  return {"<no error>", ""};
}

}  // namespace

TEST_CASE("rotate turns a 2-d vector by a quarter turn: [1, 2] -> [-2, 1]", "[rope][ops]") {
  // cos = 0, sin = 1: y_0 = 1·0 - 2·1 = -2, y_1 = 2·0 + 1·1 = 1
  const Tensor<double> x({1, 1, 1, 2}, {1, 2});
  const Tensor<double> c({1, 1}, std::vector<double>{0}), s({1, 1}, std::vector<double>{1});
  const Tensor<double> y = rotate(x, c, s, RopeStyle::half);
  CHECK(y.values()[0] == -2);
  CHECK(y.values()[1] == 1);
}

TEST_CASE("rotate pairs (i, i + P) in the half style and (2i, 2i + 1) interleaved, and features past dims pass",
          "[rope][ops]") {
  // d = 6, dims = 4 (P = 2): pair 0 turns by a quarter, pair 1 by half a turn; features 4, 5 stay.
  const Tensor<double> x({1, 1, 1, 6}, {1, 2, 3, 4, 5, 6});
  const Tensor<double> c({1, 2}, {0, -1}), s({1, 2}, {1, 0});
  // half: pairs (0, 2) and (1, 3): y0 = 1·0 - 3·1 = -3, y2 = 3·0 + 1·1 = 1; y1 = -2, y3 = -4
  const Tensor<double> h = rotate(x, c, s, RopeStyle::half);
  CHECK(std::vector<double>(h.values().begin(), h.values().end()) == std::vector<double>{-3, -2, 1, -4, 5, 6});
  // interleaved: pairs (0, 1) and (2, 3): y0 = -2, y1 = 1; y2 = -3, y3 = -4
  const Tensor<double> i = rotate(x, c, s, RopeStyle::interleaved);
  CHECK(std::vector<double>(i.values().begin(), i.values().end()) == std::vector<double>{-2, 1, -3, -4, 5, 6});
}

TEST_CASE("RoPE's frequencies are theta^(-2i/dims): theta 16, dims 4 gives 1 and 1/4", "[rope]") {
  CHECK(rope_frequencies(16, 4) == std::vector<double>{1, 0.25});
  const auto [c, s] = rope_table(std::vector<double>{0, 2}, std::vector<double>{1, 0.25});
  CHECK(c(0, 0) == 1);
  CHECK(s(0, 1) == 0);
  CHECK(c(1, 0) == std::cos(2.0));
  CHECK(s(1, 1) == std::sin(0.5));
}

TEST_CASE("A token at position 1 with theta^0 = 1 turns by 1 radian in both engines", "[rope][engine]") {
  // One token at position 1: q = k = [1, 2] turned by 1 rad. q_rot·k_rot = |q|² = 5 whatever the angle.
  const Problem p = load_problem(one_token(R"(, "rope": {"positions": [1]})"), "t.json");
  test::StepRecorder naive, flash;
  run_naive<double>(p, naive);
  run_flash<double>(p, flash, {1, 1});
  for (const test::StepRecorder* r : {&naive, &flash}) {
    const Tensor<double>& q = r->at(Step::q_rot);
    CHECK(q.values()[0] == Approx(std::cos(1.0) - 2 * std::sin(1.0)).epsilon(1e-15));
    CHECK(q.values()[1] == Approx(2 * std::cos(1.0) + std::sin(1.0)).epsilon(1e-15));
    CHECK(r->at(Step::k_rot) == q);
  }
  CHECK(naive.at(Step::scores).values()[0] == Approx(5).epsilon(1e-15));
}

TEST_CASE("The same relative distance gives the same score: RoPE depends on pos_i - pos_j only", "[rope][engine]") {
  const std::string two = R"({"X": [[1, 2], [0.5, -1]], "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1]], )"
                          R"("W_v": [[1, 0], [0, 1]], "rope": {"positions": [POS]}})";
  const auto scores_at = [&](const std::string& positions) {
    std::string text = two;
    text.replace(text.find("POS"), 3, positions);
    test::StepRecorder r;
    run_naive<double>(load_problem(text, "t.json"), r);
    return r.at(Step::scores);
  };
  const Tensor<double> a = scores_at("0, 3"), b = scores_at("10, 13");
  for (std::size_t k = 0; k < a.size(); ++k) CHECK(a.values()[k] == Approx(b.values()[k]).margin(1e-12));
}

TEST_CASE("ALiBi's standard slopes: 2^(-8(k+1)/h) for a power of two, the paper's interleaving otherwise", "[alibi]") {
  CHECK(alibi_slopes(1) == std::vector<double>{std::exp2(-8.0)});
  CHECK(alibi_slopes(8) == std::vector<double>{0.5, 0.25, 0.125, 0.0625, 0x1p-5, 0x1p-6, 0x1p-7, 0x1p-8});
  // 6 heads: the 4 slopes of 4 heads, then slopes 0 and 2 of 8 heads
  CHECK(alibi_slopes(6) == std::vector<double>{0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8, 0x1p-1, 0x1p-3});
}

TEST_CASE("ALiBi adds -slope·(pos_i - pos_j) after the scale, before the mask, in both engines", "[alibi][engine]") {
  // Three tokens, one head of slope 1/2 (given), identity q and k: the bias of (2, 0) is -1, of (0, 2) +1.
  const std::string text = R"({"X": [[1, 0], [0, 1], [1, 1]], "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1]], )"
                           R"("W_v": [[1, 0], [0, 1]], "alibi": [0.5], "scale": 1})";
  const Problem p = load_problem(text, "t.json");
  test::StepRecorder naive, flash;
  const auto y = run_naive<double>(p, naive).output;
  const auto y_flash = run_flash<double>(p, flash, {2, 2}).output;
  const Tensor<double>& S = naive.at(Step::scaled);
  const Tensor<double>& biased = naive.at(Step::bias);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      CHECK(biased(0, 0, i, j) == S(0, 0, i, j) - 0.5 * (static_cast<double>(i) - static_cast<double>(j)));
  CHECK(naive.at(Step::masked) == biased);  // no mask
  for (std::size_t k = 0; k < y.size(); ++k) CHECK(y_flash.values()[k] == Approx(y.values()[k]).margin(1e-14));
}

TEST_CASE(
    "The optional steps sit in pipeline order and only inputs with rope, softcap, alibi, sinks or dropout have "
    "them",
    "[rope][alibi][softcap][sinks][dropout]") {
  const Problem plain = load_problem(one_token(""), "t.json");
  CHECK(steps_of(plain).size() == 13);
  const Problem all = load_problem(
      one_token(R"(, "rope": {}, "alibi": true, "softcap": 50, "sinks": [0.5], "dropout": {"p": 0.5, "seed": 1})"),
      "t.json");
  const std::vector<Step> steps = steps_of(all);
  REQUIRE(steps.size() == step_count);
  test::StepRecorder r;
  run_naive<float>(all, r);
  CHECK(r.order() == steps);
  CHECK(steps[6] == Step::q_rot);
  CHECK(steps[7] == Step::k_rot);
  CHECK(steps[10] == Step::capped);
  CHECK(steps[11] == Step::bias);
  CHECK(steps[14] == Step::sink_weights);
  CHECK(steps[15] == Step::dropped);
}

TEST_CASE("Without alibi the keys of ALiBi count from 0 and the last query sits at the last key", "[alibi]") {
  const Problem p = load_problem(
      R"({"X": [[1, 0], [0, 1]], "context": {"X": [[1, 0], [0, 1], [1, 1], [0, 0]]}, "W_q": [[1, 0], [0, 1]], )"
      R"("W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [0, 1]], "alibi": true})",
      "t.json");
  CHECK(p.alibi->key_positions == std::vector<double>{0, 1, 2, 3});
  CHECK(p.alibi->query_positions == std::vector<double>{2, 3});
  const Problem r = load_problem(
      R"({"X": [[1, 0], [0, 1]], "context": {"X": [[1, 0], [0, 1], [1, 1], [0, 0]]}, "W_q": [[1, 0], [0, 1]], )"
      R"("W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [0, 1]], "alibi": true, "rope": {"positions": [7, 9]}})",
      "t.json");
  CHECK(r.alibi->query_positions == std::vector<double>{7, 9});  // rope's, when the input has them
  CHECK(r.alibi->key_positions == std::vector<double>{0, 1, 2, 3});
}

TEST_CASE("The loader's defaults for rope: theta 10000, positions 0…n-1, half style, dims = d_k", "[rope][loader]") {
  const Problem p = load_problem(three_tokens(R"(, "rope": {})"), "t.json");
  REQUIRE(p.rope);
  CHECK(p.rope->theta == 10000);
  CHECK(p.rope->positions == std::vector<double>{0, 1, 2});
  CHECK(p.rope->context_positions == p.rope->positions);
  CHECK(p.rope->style == RopeStyle::half);
  CHECK(p.rope->dims == 2);
  CHECK(p.rope->frequencies == std::vector<double>{1});
  CHECK_FALSE(load_problem(three_tokens(R"(, "alibi": false)"), "t.json").alibi);
}

TEST_CASE("Every bad rope or alibi value is an InputError with its JSON Pointer", "[rope][alibi][loader]") {
  struct Bad {
    std::string extra, pointer, says;
  };
  const std::vector<Bad> bad = {
      {R"(, "rope": {"dims": 3})", "/rope/dims", "even"},
      {R"(, "rope": {"dims": 4})", "/rope/dims", "at most d_k = 2"},
      {R"(, "rope": {"theta": 0})", "/rope/theta", "> 0"},
      {R"(, "rope": {"theta": -5})", "/rope/theta", "> 0"},
      {R"(, "rope": {"positions": [0, 1]})", "/rope/positions", "expected 3 positions (one per query), found 2"},
      {R"(, "rope": {"positions": [0, -1, 2]})", "/rope/positions/1", "whole number >= 0"},
      {R"(, "rope": {"positions": [0, 1.5, 2]})", "/rope/positions/1", "whole number >= 0"},
      {R"(, "rope": {"positions": [0, "1", 2]})", "/rope/positions/1", "whole number >= 0"},
      {R"(, "rope": {"style": "neox"})", "/rope/style", "\"half\" or \"interleaved\""},
      {R"(, "rope": {"thetta": 10})", "/rope/thetta", "did you mean \"theta\""},
      {R"(, "rope": {"context_positions": [0, 1, 2]})", "/rope/context_positions", "cross-attention"},
      {R"(, "rope": [1, 2])", "/rope", "expected an object"},
      {R"(, "alibi": [0.5])", "/alibi", "expected 2 slopes"},
      {R"(, "alibi": "yes")", "/alibi", "expected true"},
      {R"(, "alibi": [0.5, "x"])", "/alibi/1", "expected a number"},
  };
  for (const Bad& b : bad) {
    INFO(b.extra);
    const auto [pointer, message] = error_of(three_tokens(b.extra));
    CHECK(pointer == b.pointer);
    CHECK_THAT(message, Catch::Matchers::Contains(b.says));
  }
  // d_k odd and no dims: which features would pair is not said
  const auto [pointer, message] = error_of(
      R"({"X": [[1, 0, 0]], "W_q": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "W_k": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], )"
      R"("W_v": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "rope": {}})");
  CHECK(pointer == "/rope");
  CHECK_THAT(message, Catch::Matchers::Contains("d_k = 3 is odd"));
}

namespace {

// `p` with RoPE (random style, dims and positions from a random start) and ALiBi (standard slopes,
// scaled up so the bias weighs as much as the scores do), resolved as the loader resolves them.
void add_positions(std::mt19937& rng, Problem& p) {
  Rope r;
  r.theta = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? 10000 : 50;
  r.style = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? RopeStyle::half : RopeStyle::interleaved;
  r.dims = 2 * std::uniform_int_distribution<std::size_t>(1, p.d_k / 2)(rng);
  const auto start = static_cast<double>(std::uniform_int_distribution<int>(0, 500)(rng));
  for (std::size_t i = 0; i < p.n; ++i) r.positions.push_back(start + static_cast<double>(p.m - p.n + i));
  for (std::size_t j = 0; j < p.m; ++j) r.context_positions.push_back(start + static_cast<double>(j));
  if (!p.cross) r.context_positions = r.positions;
  r.frequencies = rope_frequencies(r.theta, r.dims);
  std::tie(r.cos_q, r.sin_q) = rope_table(r.positions, r.frequencies);
  std::tie(r.cos_k, r.sin_k) = rope_table(r.context_positions, r.frequencies);
  Alibi a;
  a.standard = false;
  for (const double s : alibi_slopes(p.h)) a.slopes.push_back(4 * s);
  a.query_positions = r.positions;
  a.key_positions = r.context_positions;
  p.rope = std::move(r);
  p.alibi = std::move(a);
}

}  // namespace

TEST_CASE("compare's noise floor bounds both engines' error with RoPE and ALiBi, in every dtype and tiling",
          "[rope][alibi][compare][noise]") {
  std::mt19937 rng(1307);
  for (int trial = 0; trial < 40; ++trial) {
    const bool cross = trial % 3 == 0;
    test::Dims d;
    d.n = std::uniform_int_distribution<std::size_t>(1, 7)(rng);
    d.m = cross ? std::uniform_int_distribution<std::size_t>(d.n, 9)(rng) : 0;
    d.h = trial % 2 == 0 ? 6 : 4;
    d.g = d.h / 2;
    d.d_k = 2 * std::uniform_int_distribution<std::size_t>(1, 4)(rng);
    d.d_out = trial % 4 == 0 ? 0 : 5;
    d.biases = trial % 5 == 0;
    Problem p = test::random_problem(rng, d);
    add_positions(rng, p);
    for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
      for (const TileSize tiles : {TileSize{1, 1}, TileSize{2, 3}, TileSize{64, 64}}) {
        NullObserver a, b;
        const CompareRecord c = compare_engines<float>(p, tiles, a, b, dtype);
        INFO("trial " << trial << " " << name_of(dtype) << " Br=" << tiles.Br << " Bc=" << tiles.Bc << ": naive "
                      << c.naive_vs_ref.max_abs << ", flash " << c.flash_vs_ref.max_abs << ", noise " << c.noise);
        CHECK(c.pass);
        CHECK(c.naive_vs_ref.max_abs <= c.noise);
        CHECK(c.flash_vs_ref.max_abs <= c.noise);
      }
    }
    NullObserver a, b;
    const CompareRecord c = compare_engines<double>(p, {2, 2}, a, b);
    CHECK(c.pass);
    CHECK(c.flash_vs_ref.max_abs <= c.noise);
  }
}
