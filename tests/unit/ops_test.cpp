// Each equation of src/ops/attention.hpp on cases small enough to check by hand. Every expected number
// below is worked out by hand in the comment next to it.

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "ops/attention.hpp"
#include "support.hpp"

using namespace attn;
using attn::test::check_close;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

Tensor<double> tensor(Shape shape, std::vector<double> data) {
  return Tensor<double>(std::move(shape), std::move(data));
}

}  // namespace

// ---------------------------------------------------------------------------------------------- project

TEST_CASE("project multiplies every row of X by W", "[ops]") {
  // X item 0 = [[1, 2, 3], [4, 5, 6]], item 1 = [[0, 0, 1], [1, 0, 0]]
  const auto X = tensor({2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0});
  const auto W = tensor({3, 2}, {1, 0, 0, 1, 1, 1});  // columns: x0 + x2, x1 + x2
  const Tensor<double> Y = project(X, W, std::span<const double>());
  // [1+3, 2+3] = [4, 5]; [4+6, 5+6] = [10, 11]; [0+1, 0+1] = [1, 1]; [1+0, 0+0] = [1, 0]
  check_close("Y", Y, {2, 2, 2}, {4, 5, 10, 11, 1, 1, 1, 0}, 0);
}

TEST_CASE("project adds the bias to every row", "[ops]") {
  const auto X = tensor({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  const auto W = tensor({3, 2}, {1, 0, 0, 1, 1, 1});
  const std::vector<double> b = {0.5, -1};
  const Tensor<double> Y = project(X, W, std::span<const double>(b));
  // [4 + 0.5, 5 - 1] = [4.5, 4]; [10 + 0.5, 11 - 1] = [10.5, 10]
  check_close("Y", Y, {1, 2, 2}, {4.5, 4, 10.5, 10}, 0);
}

TEST_CASE("project refuses an X and a W whose inner sizes differ, or a bias of the wrong length", "[ops]") {
  const auto X = tensor({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  const auto W = tensor({2, 2}, {1, 0, 0, 1});
  CHECK_THROWS_AS(project(X, W, std::span<const double>()), std::invalid_argument);
  const auto W3 = tensor({3, 2}, {1, 0, 0, 1, 1, 1});
  const std::vector<double> b = {1, 2, 3};
  CHECK_THROWS_AS(project(X, W3, std::span<const double>(b)), std::invalid_argument);
}

// ------------------------------------------------------------------------------- split_heads / merge_heads

TEST_CASE("split_heads puts feature block hd of every row into head hd", "[ops]") {
  // Y (1, n = 2, 4), two heads of width 2: head 0 takes columns 0-1, head 1 columns 2-3
  const auto Y = tensor({1, 2, 4}, {0, 1, 2, 3, 10, 11, 12, 13});
  const Tensor<double> H = split_heads(Y, 2);
  // head 0 = [[0, 1], [10, 11]], head 1 = [[2, 3], [12, 13]]
  check_close("H", H, {1, 2, 2, 2}, {0, 1, 10, 11, 2, 3, 12, 13}, 0);
}

TEST_CASE("merge_heads puts head hd back as feature block hd of every row", "[ops]") {
  // O (1, h = 2, n = 2, d = 2): head 0 = [[0, 1], [10, 11]], head 1 = [[2, 3], [12, 13]]
  const auto O = tensor({1, 2, 2, 2}, {0, 1, 10, 11, 2, 3, 12, 13});
  const Tensor<double> Y = merge_heads(O);
  // row 0 = [head 0 row 0, head 1 row 0] = [0, 1, 2, 3]; row 1 = [10, 11, 12, 13]
  check_close("Y", Y, {1, 2, 4}, {0, 1, 2, 3, 10, 11, 12, 13}, 0);
}

TEST_CASE("merge_heads undoes split_heads for any number of heads that divides the width", "[ops][property]") {
  std::mt19937 rng(7);
  for (const std::size_t heads : {1u, 2u, 3u, 6u}) {
    const Tensor<double> Y = attn::test::random_tensor(rng, {2, 5, 6});
    const Tensor<double> H = split_heads(Y, heads);
    CHECK(H.shape() == Shape{2, heads, 5, 6 / heads});
    CHECK(merge_heads(H) == Y);
  }
}

TEST_CASE("split_heads refuses a width the heads do not divide", "[ops]") {
  const Tensor<double> Y({1, 2, 5});
  CHECK_THROWS_AS(split_heads(Y, 2), std::invalid_argument);
  CHECK_THROWS_AS(split_heads(Y, 0), std::invalid_argument);
}

// ------------------------------------------------------------------------------------------------ scores

TEST_CASE("kv_head_of maps consecutive query heads to one key/value head", "[ops]") {
  // h = 4, g = 2: heads 0, 1 -> kv 0; heads 2, 3 -> kv 1 (repeat_interleave)
  CHECK(kv_head_of(0, 4, 2) == 0);
  CHECK(kv_head_of(1, 4, 2) == 0);
  CHECK(kv_head_of(2, 4, 2) == 1);
  CHECK(kv_head_of(3, 4, 2) == 1);
  // MHA: identity; MQA: all 0
  for (std::size_t hd = 0; hd < 4; ++hd) {
    CHECK(kv_head_of(hd, 4, 4) == hd);
    CHECK(kv_head_of(hd, 4, 1) == 0);
  }
}

TEST_CASE("scores is Q·Kᵀ per head, query head hd reading key head hd / (h/g)", "[ops]") {
  // Q (1, h = 4, n = 1, d_k = 2): heads [1, 0], [0, 1], [1, 0], [0, 1]
  const auto Q = tensor({1, 4, 1, 2}, {1, 0, 0, 1, 1, 0, 0, 1});
  // K (1, g = 2, m = 2, d_k = 2): kv 0 = [[1, 2], [3, 4]], kv 1 = [[5, 6], [7, 8]]
  const auto K = tensor({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor<double> S = scores(Q, K);
  // head 0: [1,0]·kv0 = [1, 3]; head 1: [0,1]·kv0 = [2, 4]; head 2: [1,0]·kv1 = [5, 7]; head 3: [6, 8]
  check_close("S", S, {1, 4, 1, 2}, {1, 3, 2, 4, 5, 7, 6, 8}, 0);
}

TEST_CASE("scores of a two-row query against three keys is the 2 × 3 table of dot products", "[ops]") {
  const auto Q = tensor({1, 1, 2, 2}, {1, 2, -1, 0.5});
  const auto K = tensor({1, 1, 3, 2}, {1, 1, 0, 2, -2, 4});
  const Tensor<double> S = scores(Q, K);
  // [1,2]·[1,1] = 3, [1,2]·[0,2] = 4, [1,2]·[-2,4] = 6; [-1,.5]·[1,1] = -0.5, ·[0,2] = 1, ·[-2,4] = 4
  check_close("S", S, {1, 1, 2, 3}, {3, 4, 6, -0.5, 1, 4}, 0);
}

TEST_CASE("scores refuses query heads that are not a multiple of the key heads", "[ops]") {
  const Tensor<double> Q({1, 3, 1, 2});
  const Tensor<double> K({1, 2, 1, 2});
  CHECK_THROWS_AS(scores(Q, K), std::invalid_argument);
  const Tensor<double> K3({1, 1, 1, 3});  // d_k differs
  CHECK_THROWS_AS(scores(Q, K3), std::invalid_argument);
}

// ------------------------------------------------------------------------------------- scale, apply_mask

TEST_CASE("scale multiplies every score by the factor", "[ops]") {
  const auto S = tensor({1, 1, 2, 2}, {1, -2, 0, 8});
  check_close("S'", scale(S, 0.5), {1, 1, 2, 2}, {0.5, -1, 0, 4}, 0);
}

TEST_CASE("apply_mask puts -inf where the mask forbids, in every head, and keeps the rest", "[ops][mask]") {
  // S (1, h = 2, n = 2, m = 2); allowed: j <= i (causal)
  const auto S = tensor({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor<double> M = apply_mask(S, [](std::size_t, std::size_t i, std::size_t j) { return j <= i; });
  check_close("masked", M, {1, 2, 2, 2}, {1, -inf, 3, 4, 5, -inf, 7, 8}, 0);
}

TEST_CASE("apply_mask asks about each batch item separately", "[ops][mask]") {
  const auto S = tensor({2, 1, 1, 2}, {1, 2, 3, 4});
  // item 0 may see key 0 only, item 1 key 1 only
  const Tensor<double> M = apply_mask(S, [](std::size_t b, std::size_t, std::size_t j) { return j == b; });
  check_close("masked", M, {2, 1, 1, 2}, {1, -inf, -inf, 4}, 0);
}

// ------------------------------------------------------------------------------------------ softmax_rows

TEST_CASE("softmax_rows turns logs of 1, 2, 3 into 1/6, 2/6, 3/6", "[softmax]") {
  // exp(log k) = k, so the weights are [1, 2, 3] / 6
  const auto S = tensor({1, 3}, {0, std::log(2.0), std::log(3.0)});
  check_close("P", softmax_rows(S), {1, 3}, {1.0 / 6, 2.0 / 6, 3.0 / 6}, 1e-15);
}

TEST_CASE("softmax_rows of equal scores is uniform, and of [0, 1] is [1/(1+e), e/(1+e)]", "[softmax]") {
  const auto S = tensor({2, 2}, {5, 5, 0, 1});
  const double e = std::exp(1.0);
  check_close("P", softmax_rows(S), {2, 2}, {0.5, 0.5, 1 / (1 + e), e / (1 + e)}, 1e-15);
}

TEST_CASE("softmax_rows makes every row sum to 1, whatever its shape", "[softmax][property]") {
  std::mt19937 rng(11);
  const Tensor<double> S = attn::test::random_tensor(rng, {2, 3, 4, 5}, -10, 10);
  const Tensor<double> P = softmax_rows(S);
  REQUIRE(P.shape() == S.shape());
  for (std::size_t r = 0; r < P.size() / 5; ++r) {
    double sum = 0;
    for (std::size_t j = 0; j < 5; ++j) {
      const double p = P.values()[r * 5 + j];
      CHECK(p > 0);
      sum += p;
    }
    CAPTURE(r);
    CHECK(sum == Approx(1).margin(1e-14));
  }
}

TEST_CASE("softmax_rows is unchanged by adding a constant to a row", "[softmax][property]") {
  std::mt19937 rng(12);
  const Tensor<double> S = attn::test::random_tensor(rng, {4, 6}, -3, 3);
  Tensor<double> shifted = S;
  for (double& s : shifted.values()) s += 100;
  check_close("P", softmax_rows(shifted), softmax_rows(S), 1e-14);
}

TEST_CASE("softmax_rows gives masked keys weight exactly 0", "[softmax][mask]") {
  const auto S = tensor({1, 3}, {-inf, 0, -inf});
  check_close("P", softmax_rows(S), {1, 3}, {0, 1, 0}, 0);
}

TEST_CASE("softmax_rows turns a row of only -inf into zeros, not NaN", "[softmax][mask]") {
  const auto S = tensor({2, 3}, {-inf, -inf, -inf, 1, 2, 3});
  const Tensor<double> P = softmax_rows(S);
  CHECK(attn::test::no_nan(P));
  CHECK(P(0, 0) == 0);
  CHECK(P(0, 1) == 0);
  CHECK(P(0, 2) == 0);
  // the next row is untouched by the empty one: e^k / (e + e^2 + e^3)
  const double Z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(P(1, 0) == Approx(std::exp(1.0) / Z).epsilon(1e-14));
  CHECK(P(1, 2) == Approx(std::exp(3.0) / Z).epsilon(1e-14));
}

TEMPLATE_TEST_CASE("softmax_rows stays finite for large logits, [1e4, 0] -> [1, 0]", "[softmax]", float, double) {
  // exp(1e4) overflows; exp(1e4 - 1e4) = 1 and exp(0 - 1e4) underflows to 0, so exactly [1, 0].
  const Tensor<TestType> S({3, 2}, std::vector<TestType>{TestType(1e4), 0, TestType(1e4), TestType(1e4), TestType(-1e4),
                                                         TestType(-1e4 + 1)});
  const Tensor<TestType> P = softmax_rows(S);
  for (const TestType p : P.values()) CHECK(std::isfinite(p));
  CHECK(P(0, 0) == 1);
  CHECK(P(0, 1) == 0);
  CHECK(P(1, 0) == Approx(0.5));
  CHECK(P(1, 1) == Approx(0.5));
  // [-1e4, -1e4 + 1] is [0, 1] shifted: [1/(1+e), e/(1+e)]
  const double e = std::exp(1.0);
  CHECK(P(2, 0) == Approx(1 / (1 + e)).epsilon(1e-6));
  CHECK(P(2, 1) == Approx(e / (1 + e)).epsilon(1e-6));
}

// ------------------------------------------------------------------------------------------ weighted_sum

TEST_CASE("weighted_sum averages the values with the weights, per head", "[ops]") {
  // P (1, h = 2, n = 1, m = 2): head 0 [0.25, 0.75], head 1 [1, 0]; V (1, g = 1, m = 2, d_v = 2)
  const auto P = tensor({1, 2, 1, 2}, {0.25, 0.75, 1, 0});
  const auto V = tensor({1, 1, 2, 2}, {4, 8, 0, 4});
  // head 0: 0.25·[4, 8] + 0.75·[0, 4] = [1, 5]; head 1: [4, 8]
  check_close("O", weighted_sum(P, V), {1, 2, 1, 2}, {1, 5, 4, 8}, 0);
}

TEST_CASE("weighted_sum reads value head hd / (h/g) for query head hd", "[ops]") {
  // h = 4, g = 2, n = 1, m = 1: every weight 1, so head hd's output is its value head's row
  const auto P = tensor({1, 4, 1, 1}, {1, 1, 1, 1});
  const auto V = tensor({1, 2, 1, 1}, {10, 20});
  check_close("O", weighted_sum(P, V), {1, 4, 1, 1}, {10, 10, 20, 20}, 0);
}

TEST_CASE("weighted_sum gives zero output for an all-zero weight row and ignores keys of weight 0", "[ops][mask]") {
  // row 0: weights [0, 0] -> [0, 0]; row 1: weights [1, 0] -> V row 0, even though V row 1 is infinite
  const auto P = tensor({1, 1, 2, 2}, {0, 0, 1, 0});
  const auto V = tensor({1, 1, 2, 2}, {3, -2, inf, inf});
  const Tensor<double> O = weighted_sum(P, V);
  CHECK(attn::test::no_nan(O));
  check_close("O", O, {1, 1, 2, 2}, {0, 0, 3, -2}, 0);
}

TEST_CASE("weighted_sum refuses weights and values of different key counts", "[ops]") {
  const Tensor<double> P({1, 1, 2, 3});
  const Tensor<double> V({1, 1, 2, 2});
  CHECK_THROWS_AS(weighted_sum(P, V), std::invalid_argument);
}
