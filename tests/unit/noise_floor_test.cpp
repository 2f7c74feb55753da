// The noise floor of compare's verdict (engine/compare.hpp, docs/flash.md "The noise floor of the
// verdict"): each term on a case small enough to work out by hand, the worked example's whole noise
// by hand, the weights' term against the exact change of a softmax whose score is moved far, and the
// input that the earlier noise term failed at every tiling in both dtypes. Expected numbers are worked
// out by hand in the comments, or computed in this file from the softmax's definition.

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/compare.hpp"
#include "io/load.hpp"

using namespace attn;

namespace {

constexpr Rounding float32 = rounding_of<float>();  // u = 2^-24, η = 2^-149
constexpr Rounding exact{0, 0};                     // no rounding at all: only the inputs' errors count

}  // namespace

TEST_CASE("The rounding unit of float32 is 2^-24 with subnormals down to 2^-149, of float64 2^-53 and 2^-1074",
          "[compare][noise]") {
  CHECK(float32.u == std::ldexp(1.0, -24));
  CHECK(float32.eta == std::ldexp(1.0, -149));
  CHECK(rounding_of<double>().u == std::ldexp(1.0, -53));
  CHECK(rounding_of<double>().eta == std::ldexp(1.0, -1074));
}

TEST_CASE("projection_error is (d_in + 1)·u·(|X|·|W| + |b|) + d_in·η, by hand", "[compare][noise]") {
  // X = [1, -2], W = [[3, -1], [4, 0]], b = [-5, 0.5]
  // |X|·|W| + |b| = [1·3 + 2·4 + 5, 1·1 + 2·0 + 0.5] = [16, 1.5]; d_in = 2, so 3·u·[16, 1.5] + 2·η
  const Tensor<double> X({1, 1, 2}, std::vector<double>{1, -2});
  const Tensor<double> W({2, 2}, std::vector<double>{3, -1, 4, 0});
  const std::vector<double> b = {-5, 0.5};
  const Tensor<double> dY = projection_error(X, W, b, float32);
  REQUIRE(dY.shape() == Shape{1, 1, 2});
  CHECK(dY(0, 0, 0) == 3 * float32.u * 16 + 2 * float32.eta);
  CHECK(dY(0, 0, 1) == 3 * float32.u * 1.5 + 2 * float32.eta);
}

TEST_CASE("score_error is |scale|·Σ_e ((d_k + 1)·u·|q_e||k_e| + Δq_e|k_e| + |q_e|Δk_e + Δq_eΔk_e), by hand",
          "[compare][noise]") {
  // q = [1, 2], Δq = [0.5, 0]; keys k_0 = [3, 0], k_1 = [1, 1] with Δk_0 = [0, 0], Δk_1 = [0.25, 0]; scale -0.5
  // without rounding (u = η = 0) only the inputs' errors count:
  //   Δs_0 = 0.5·(0.5·3 + 0 + 0 + 0)                 = 0.75
  //   Δs_1 = 0.5·(0.5·1 + 1·0.25 + 0.5·0.25 + 0·1)   = 0.5·0.875 = 0.4375
  const std::vector<double> q = {1, 2}, dq = {0.5, 0};
  const std::vector<double> K = {3, 0, 1, 1}, dK = {0, 0, 0.25, 0};
  Problem p;  // one query, two keys, no mask: the chain is the scale alone
  p.n = 1;
  p.m = 2;
  p.scale = -0.5;
  p.mask.n = 1;
  p.mask.m = 2;
  const ScoreChain<double> chain(p, DType::float64);
  const std::vector<double> ds = score_error(chain, {}, q, dq, K.data(), dK.data(), 2, exact);
  CHECK(ds == std::vector<double>{0.75, 0.4375});
  // with float32's rounding, the dot products' own term: (d_k + 1)·u·Σ|q||k| = 3u·3 for k_0, 3u·3 for k_1,
  // and (d_k·|scale| + 1)·η = 2η
  const std::vector<double> zero = {0, 0}, zeros = {0, 0, 0, 0};
  const std::vector<double> rounded = score_error(chain, {}, q, zero, K.data(), zeros.data(), 2, float32);
  CHECK(rounded[0] == 0.5 * (9 * float32.u) + 2 * float32.eta);
  CHECK(rounded[1] == 0.5 * (9 * float32.u) + 2 * float32.eta);
}

TEST_CASE("A row's bound grows with the key tiles its weights fall in, by hand", "[compare][noise][flash]") {
  // Two keys of equal weight a = [1/2, 1/2], values v = [1, 3] (d_v = 1), exact scores and values:
  // o = 2, |v - o| = 1 for both, log(a_max / a_j) = 0, N = 2.
  //   one key tile (T_r = 1):  D = 2u, so the weights' term is (e^2u - 1)·1 / e^-2u ≈ 2u;
  //                            O: (N + T_r)·u·Σ a|v| = 3u·2 = 6u;  l: (N + 2T_r + 1)·u·|o| = 5u·2 = 10u
  //                            total 18u (and (N + 1)(T_r + 1)·η·(1 + 3 + 2) = 36η)
  //   two key tiles (T_r = 2): D = 4u, weights ≈ 4u;  O: 4u·2 = 8u;  l: 7u·2 = 14u;  total 26u (+ 54η)
  const std::vector<double> a = {0.5, 0.5}, log_ratio = {0, 0}, ds = {0, 0};
  const std::vector<double> V = {1, 3}, dV = {0, 0};
  const double u = float32.u;
  const RowError one_tile = attention_row_error(a, log_ratio, 2, 1, ds, V.data(), dV.data(), 1, float32);
  CHECK(one_tile.o == std::vector<double>{2});
  CHECK(one_tile.d_o[0] == Approx(18 * u).epsilon(1e-6));
  const RowError two_tiles = attention_row_error(a, log_ratio, 2, 2, ds, V.data(), dV.data(), 1, float32);
  CHECK(two_tiles.d_o[0] == Approx(26 * u).epsilon(1e-6));
  // the values' own error passes through with the weights: ΔV = [4u, 2u] adds (4u + 2u)/2 = 3u
  const std::vector<double> dV_some = {4 * u, 2 * u};
  const RowError with_dV = attention_row_error(a, log_ratio, 2, 1, ds, V.data(), dV_some.data(), 1, float32);
  CHECK(with_dV.d_o[0] == Approx(21 * u).epsilon(1e-6));
  // a row with nothing to attend is exactly 0 in both engines: no bound to add
  const RowError empty =
      attention_row_error(std::vector<double>{0, 0}, log_ratio, 0, 0, ds, V.data(), dV.data(), 1, float32);
  CHECK(empty.d_o == std::vector<double>{0});
}

TEST_CASE("The weights' term bounds the true change of a softmax even where first order falls short",
          "[compare][noise]") {
  // a = [0.99, 0.01] (scores s and s - log 99), v = [0, 1]: o = 0.01. Let the small weight's score be off by
  // up to Δs_1 = 5, without rounding. First order says a_1·Δs_1·|v_1 - o| = 0.01·5·0.99 = 0.0495, but the
  // score moved up by 5 gives that key 0.01·e^5 / (0.99 + 0.01·e^5) = 1.48413 / 2.47413 = 0.59986 of the
  // weight: o moves by 0.58986. The bound of compare.hpp:
  //   Σ a_j·(e^Δs_j - 1)·|v_j - o| / Σ a_j·e^-Δs_j = 0.01·(e^5 - 1)·0.99 / (0.99 + 0.01·e^-5)
  //                                              = 1.459390 / 0.990067 = 1.474031
  const std::vector<double> a = {0.99, 0.01}, log_ratio = {0, std::log(99.0)}, ds = {0, 5};
  const std::vector<double> V = {0, 1}, dV = {0, 0};
  const RowError e = attention_row_error(a, log_ratio, 2, 1, ds, V.data(), dV.data(), 1, exact);
  CHECK(e.o[0] == Approx(0.01).epsilon(1e-12));
  CHECK(e.d_o[0] == Approx(1.474031).epsilon(1e-6));
  // the true change, from softmax's definition, for every shift of the second score within ±5
  double largest = 0;
  for (int k = -50; k <= 50; ++k) {
    const double shift = k / 10.0, w = 0.01 * std::exp(shift);
    largest = std::max(largest, std::abs(w / (0.99 + w) - 0.01));
  }
  CHECK(largest == Approx(0.58986).epsilon(1e-4));
  CHECK(largest <= e.d_o[0]);
  CHECK(0.0495 < largest);  // where a first-order bound would have failed
}

TEMPLATE_TEST_CASE("The noise floor of the worked example is 2·(12 + 3·T_r)·u, worked out by hand",
                   "[compare][noise][flash]", float, double) {
  using T = TestType;
  const double u = rounding_of<T>().u;
  // data/the_cat_sat.json: no biases, no W_o, every V value is 1 = Σ_r |X_r|·|W_v[r][c]| (one 1·1 term of
  // the four), so ΔV = (4 + 1)·u = 5u; every value is 1, so o = 1 and |v - o| = 0: the weights' errors
  // cannot move o. Each row has N = 3 keys; with Bc keys a tile they fall in T_r = 3, 2 or 1 tiles:
  //   Δo = Σ a·ΔV + (N + T_r)·u·Σ a|v| + (N + 2T_r + 1)·u·|o| = 5u + (3 + T_r)·u + (4 + 2T_r)·u = (12 + 3T_r)·u
  //   Bc = 1: 21u, noise 42u;  Bc = 2: 18u, noise 36u;  Bc = 3: 15u, noise 30u   (η terms far below)
  const Problem p = load_problem_file(ATTN_SOURCE_DIR "/data/the_cat_sat.json");
  NullObserver none;
  for (const auto& [Bc, noise] : {std::pair<std::size_t, double>{1, 42}, {2, 36}, {3, 30}, {8, 30}}) {
    INFO("Bc = " << Bc);
    const CompareRecord r = compare_engines<T>(p, {2, Bc}, none, none);
    CHECK(r.noise == Approx(noise * u).epsilon(1e-9));
    CHECK(r.pass);
  }
}

TEMPLATE_TEST_CASE("The cross-attention input that the earlier noise term failed passes at every tiling",
                   "[compare][noise][flash]", float, double) {
  // tests/data/compare/float64_tiles_3x2.json: the earlier term (twice the spacing at max|ref| + 0.3)
  // failed a correct flash there at --dtype float64 --block-q 3 --block-k 2 by 5.27e-14 > 4.86e-14.
  using T = TestType;
  const Problem p = load_problem_file(ATTN_SOURCE_DIR "/tests/data/compare/float64_tiles_3x2.json");
  NullObserver none;
  for (std::size_t Br = 1; Br <= p.n + 1; ++Br)
    for (std::size_t Bc = 1; Bc <= p.m + 1; ++Bc) {
      const CompareRecord r = compare_engines<T>(p, {Br, Bc}, none, none);
      INFO(fmt::format("tiles {} × {}: max|flash - ref| = {:.3g}, max|naive - ref| = {:.3g}, noise {:.3g}", Br, Bc,
                       r.flash_vs_ref.max_abs, r.naive_vs_ref.max_abs, r.noise));
      CHECK(r.pass);
      CHECK(r.flash_vs_ref.max_abs <= r.noise);  // the noise floor alone bounds a correct flash
    }
}
