// The online softmax of FlashAttention (ops/online_softmax.hpp) on its own: folding the columns of a
// row into the running state (m, l, O) tile by tile, in any split, ends where one plain softmax of the
// whole row ends. The plain softmax is written out here, in long double, independently of the code
// under test; the small cases are worked out by hand.

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/online_softmax.hpp"
#include "support.hpp"

using namespace attn;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// A block of rows to fold: scores (rows, L), -inf where masked, and the values (L, d_v).
struct Rows {
  std::size_t rows = 0, L = 0, d_v = 0;
  std::vector<std::vector<double>> S;  // [r][c]
  std::vector<std::vector<double>> V;  // [c][e]
};

// The plain softmax of each whole row, computed in long double from the definition:
//   w_c = exp(s_c - max) / Σ exp(s - max),  O = Σ_c w_c V_c,  l = Σ exp(s - max),  lse = max + log l.
// A row with no finite score has O = 0, l = 0, lse = -inf.
struct Plain {
  std::vector<std::vector<double>> O;  // [r][e]
  std::vector<double> m, l, lse;       // [r]
};

Plain plain_softmax(const Rows& x) {
  Plain p;
  for (std::size_t r = 0; r < x.rows; ++r) {
    long double mx = -INFINITY;
    for (const double s : x.S[r]) mx = std::max<long double>(mx, s);
    std::vector<long double> o(x.d_v, 0.0L);
    long double l = 0;
    if (mx != -INFINITY) {
      for (std::size_t c = 0; c < x.L; ++c) {
        const long double e = std::exp(static_cast<long double>(x.S[r][c]) - mx);
        l += e;
        for (std::size_t k = 0; k < x.d_v; ++k) o[k] += e * x.V[c][k];
      }
    }
    std::vector<double> out(x.d_v, 0.0);
    for (std::size_t k = 0; k < x.d_v; ++k) out[k] = l == 0 ? 0.0 : static_cast<double>(o[k] / l);
    p.O.push_back(out);
    p.m.push_back(static_cast<double>(mx));
    p.l.push_back(static_cast<double>(l));
    p.lse.push_back(l == 0 ? -inf : static_cast<double>(mx + std::log(l)));
  }
  return p;
}

// What folding the tiles gave: O / l and lse from finish_rows, and the final running m and l.
template <class T>
struct Folded {
  Tensor<T> O, lse, m, l;
  bool saw_nan = false;  // any NaN in any intermediate
};

template <class T>
bool has_nan(const Tensor<T>& t) {
  for (const auto x : t.values())
    if (std::isnan(x)) return true;
  return false;
}

// Folds the columns of `x` in tiles of the given widths (summing to L), then finishes the rows.
template <class T>
Folded<T> fold(const Rows& x, const std::vector<std::size_t>& widths) {
  Folded<T> f;
  Tensor<T> m({x.rows}, -std::numeric_limits<T>::infinity());
  Tensor<T> l({x.rows}, T{0});
  Tensor<T> O({x.rows, x.d_v}, T{0});
  std::size_t c0 = 0;
  for (const std::size_t w : widths) {
    Tensor<T> S({x.rows, w});
    Tensor<T> V({w, x.d_v});
    for (std::size_t r = 0; r < x.rows; ++r)
      for (std::size_t c = 0; c < w; ++c) S(r, c) = static_cast<T>(x.S[r][c0 + c]);
    for (std::size_t c = 0; c < w; ++c)
      for (std::size_t e = 0; e < x.d_v; ++e) V(c, e) = static_cast<T>(x.V[c0 + c][e]);
    OnlineSoftmaxStep<T> step = online_softmax_update(S, m, l, O, V);
    f.saw_nan = f.saw_nan || has_nan(step.m_new) || has_nan(step.alpha) || has_nan(step.P) || has_nan(step.l_new) ||
                has_nan(step.O);
    m = std::move(step.m_new);
    l = std::move(step.l_new);
    O = std::move(step.O);
    c0 += w;
  }
  REQUIRE(c0 == x.L);
  f.m = m;
  f.l = l;
  finish_rows(O, f.lse, m, l);
  f.O = std::move(O);
  f.saw_nan = f.saw_nan || has_nan(f.O) || has_nan(f.lse);
  return f;
}

// Random rows of length L with scores of magnitude up to `spread` and a fraction of entries -inf.
// The first `dead` columns (up to the whole row) are -inf in the odd rows, or in every row when
// `all_dead`: then the first tiles hold nothing at all, as flash sees a fully masked tile.
Rows random_rows(std::mt19937& rng, std::size_t rows, std::size_t L, std::size_t d_v, double spread,
                 double masked_fraction, bool all_dead = false) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::bernoulli_distribution masked(masked_fraction);
  Rows x{rows, L, d_v, {}, {}};
  x.S.assign(rows, std::vector<double>(L));
  x.V.assign(L, std::vector<double>(d_v));
  const std::size_t dead = attn::test::pick(rng, 0, L);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < L; ++c)
      x.S[r][c] = (c < dead && (all_dead || r % 2 == 1)) || masked(rng) ? -inf : spread * uniform(rng);
  for (auto& row : x.V)
    for (double& v : row) v = uniform(rng);
  return x;
}

// Every way to cut L columns into consecutive non-empty tiles: the 2^(L-1) compositions of L.
std::vector<std::vector<std::size_t>> all_splits(std::size_t L) {
  std::vector<std::vector<std::size_t>> splits;
  for (std::size_t cuts = 0; cuts < (std::size_t{1} << (L - 1)); ++cuts) {
    std::vector<std::size_t> widths;
    std::size_t width = 1;
    for (std::size_t k = 0; k + 1 < L; ++k) {
      if (cuts & (std::size_t{1} << k)) {
        widths.push_back(width);
        width = 1;
      } else {
        ++width;
      }
    }
    widths.push_back(width);
    splits.push_back(widths);
  }
  return splits;
}

std::vector<std::size_t> random_split(std::mt19937& rng, std::size_t L) {
  std::vector<std::size_t> widths;
  const std::size_t widest = attn::test::pick(rng, 1, L);
  for (std::size_t left = L; left > 0;) {
    const std::size_t w = attn::test::pick(rng, 1, std::min(left, widest));
    widths.push_back(w);
    left -= w;
  }
  return widths;
}

// The folded result equals the plain softmax: O / l and l within `tol` relative to 1 (values lie in
// [-1, 1]), lse within `tol` relative to its size, exact zeros and -inf for the rows with nothing.
template <class T>
void check_fold(const Rows& x, const Folded<T>& f, const Plain& p, double tol, const std::string& what) {
  INFO(what);
  CHECK_FALSE(f.saw_nan);
  std::size_t bad = 0;
  for (std::size_t r = 0; r < x.rows; ++r) {
    const double lse = static_cast<double>(f.lse(r));
    const double l = static_cast<double>(f.l(r));
    if (p.l[r] == 0) {
      if (!(lse == -inf && l == 0)) {
        ++bad;
        FAIL_CHECK(fmt::format("row {} has nothing to attend: lse {} (expected -inf), l {} (expected 0)", r, lse, l));
      }
    } else {
      // the final running max is the row max exactly, so l is comparable with the plain sum
      if (static_cast<double>(f.m(r)) != static_cast<double>(static_cast<T>(p.m[r]))) {
        ++bad;
        FAIL_CHECK(fmt::format("row {}: m = {}, the row max is {}", r, static_cast<double>(f.m(r)), p.m[r]));
      }
      if (!(std::abs(l - p.l[r]) <= tol * p.l[r])) {
        ++bad;
        FAIL_CHECK(fmt::format("row {}: l = {}, plain sum {}", r, l, p.l[r]));
      }
      if (!(std::abs(lse - p.lse[r]) <= tol * std::max(1.0, std::abs(p.lse[r])))) {
        ++bad;
        FAIL_CHECK(fmt::format("row {}: lse = {}, plain {}", r, lse, p.lse[r]));
      }
    }
    for (std::size_t e = 0; e < x.d_v; ++e) {
      const double o = static_cast<double>(f.O(r, e));
      const bool ok = p.l[r] == 0 ? o == 0 : std::abs(o - p.O[r][e]) <= tol;
      if (!ok) {
        ++bad;
        FAIL_CHECK(fmt::format("row {}: (O / l)[{}] = {}, plain softmax gives {}", r, e, o, p.O[r][e]));
      }
    }
  }
  CHECK(bad == 0);
}

// The inputs as T sees them, so that the plain softmax works on exactly the same numbers.
template <class T>
Rows rounded(Rows x) {
  for (auto& row : x.S)
    for (double& s : row) s = static_cast<double>(static_cast<T>(s));
  for (auto& row : x.V)
    for (double& v : row) v = static_cast<double>(static_cast<T>(v));
  return x;
}

template <class T>
double tolerance() {
  return sizeof(T) == 4 ? 1e-6 : 1e-12;
}

}  // namespace

TEMPLATE_TEST_CASE("Folding a short row in every possible split into tiles gives the plain softmax's O / l, l and lse",
                   "[online-softmax][property]", float, double) {
  std::size_t folds = 0;
  for (std::size_t L = 1; L <= 9; ++L) {
    const auto splits = all_splits(L);
    CHECK(splits.size() == (std::size_t{1} << (L - 1)));
    for (unsigned seed = 0; seed < 6; ++seed) {
      std::mt19937 rng(100 * static_cast<unsigned>(L) + seed);
      // a run of -inf first (possibly the whole row) in the odd rows, or in all rows for odd seeds; a
      // few scattered -inf everywhere; spreads from 1 to 1e4 so that later tiles beat earlier maxima by a lot
      const double spread = std::vector<double>{1.0, 10.0, 100.0, 1e4}[seed % 4];
      const Rows x = rounded<TestType>(random_rows(rng, 4, L, 3, spread, seed < 3 ? 0.2 : 0.5, seed % 2 == 1));
      const Plain p = plain_softmax(x);
      for (const auto& widths : splits) {
        const Folded<TestType> f = fold<TestType>(x, widths);
        check_fold(x, f, p, tolerance<TestType>(),
                   fmt::format("L {} seed {} spread {} tiles [{}]", L, seed, spread, fmt::join(widths, ", ")));
        ++folds;
      }
    }
  }
  CHECK(folds == 6 * ((1u << 9) - 1));
}

TEMPLATE_TEST_CASE(
    "Folding long rows in random splits, with -inf entries and all -inf first tiles, gives the plain softmax",
    "[online-softmax][property]", float, double) {
  for (unsigned seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(7000 + seed);
    const std::size_t L = attn::test::pick(rng, 10, 200);
    const double spread = std::vector<double>{0.5, 5.0, 50.0, 1e3, 1e4}[seed % 5];
    const Rows x = rounded<TestType>(random_rows(rng, attn::test::pick(rng, 1, 5), L, attn::test::pick(rng, 1, 8),
                                                 spread, std::vector<double>{0.0, 0.3, 0.9}[seed % 3], seed % 4 == 1));
    const Plain p = plain_softmax(x);
    for (int attempt = 0; attempt < 4; ++attempt) {
      const auto widths = random_split(rng, L);
      check_fold(x, fold<TestType>(x, widths), p, tolerance<TestType>(),
                 fmt::format("seed {} L {} spread {} tiles [{}]", seed, L, spread, fmt::join(widths, ", ")));
    }
    // one tile holding the whole row, and one column at a time
    check_fold(x, fold<TestType>(x, {L}), p, tolerance<TestType>(), fmt::format("seed {} L {}: one tile", seed, L));
    check_fold(x, fold<TestType>(x, std::vector<std::size_t>(L, 1)), p, tolerance<TestType>(),
               fmt::format("seed {} L {}: one column per tile", seed, L));
  }
}

TEST_CASE("Rows whose first tiles are all -inf start their state at the first finite score", "[online-softmax]") {
  // row 0: [-inf, -inf | -inf | 1, 2], row 1: [-inf, 3 | -inf | -inf, -inf]; values V_c = (c, 1)
  Rows x{2, 5, 2, {{-inf, -inf, -inf, 1, 2}, {-inf, 3, -inf, -inf, -inf}}, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}}};
  const Folded<double> f = fold<double>(x, {2, 1, 2});
  CHECK_FALSE(f.saw_nan);
  // by hand: row 0 is softmax over keys 3, 4 of [1, 2]: weights 1/(1+e), e/(1+e)
  const double e = std::exp(1.0);
  CHECK(f.O(0, 0) == Approx((3 + 4 * e) / (1 + e)).epsilon(1e-14));
  CHECK(f.O(0, 1) == Approx(1.0).epsilon(1e-14));
  CHECK(f.lse(0) == Approx(2 + std::log(1 + 1 / e)).epsilon(1e-14));
  // row 1 attends key 1 only
  CHECK(f.O(1, 0) == 1.0);
  CHECK(f.O(1, 1) == 1.0);
  CHECK(f.lse(1) == 3.0);
}

TEMPLATE_TEST_CASE("alpha = exp(m_prev - m_new) on a small case worked out by hand", "[online-softmax]", float,
                   double) {
  using T = TestType;
  const double tol = sizeof(T) == 4 ? 1e-6 : 1e-15;
  // Two rows, two tiles of two keys, values V = [[1, 0], [0, 1]] then [[2, 2], [-1, 3]].
  //   row 0: tile 1 [1, 2], tile 2 [3, 0]   - the max grows from 2 to 3: a real rescale
  //   row 1: tile 1 [5, 4], tile 2 [1, 2]   - the max stays 5: alpha = 1
  const T ninf = -std::numeric_limits<T>::infinity();
  Tensor<T> m0({2}, ninf), l0({2}, T{0}), O0({2, 2}, T{0});
  const Tensor<T> S1({2, 2}, std::vector<T>{1, 2, 5, 4});
  const Tensor<T> V1({2, 2}, std::vector<T>{1, 0, 0, 1});
  const Tensor<T> S2({2, 2}, std::vector<T>{3, 0, 1, 2});
  const Tensor<T> V2({2, 2}, std::vector<T>{2, 2, -1, 3});

  const auto step1 = online_softmax_update(S1, m0, l0, O0, V1);
  // tile 1: m = max(-inf, 1, 2) = 2 and 5; alpha = exp(-inf) = 0 (nothing earlier to shrink)
  CHECK(step1.m_new(0) == 2);
  CHECK(step1.m_new(1) == 5);
  CHECK(step1.alpha(0) == 0);
  CHECK(step1.alpha(1) == 0);
  // P = exp(S - m): row 0 [e^-1, 1], row 1 [1, e^-1]; l = rowsum P; O = P·V1
  const double em1 = std::exp(-1.0);
  CHECK(static_cast<double>(step1.P(0, 0)) == Approx(em1).epsilon(tol));
  CHECK(step1.P(0, 1) == 1);
  CHECK(step1.P(1, 0) == 1);
  CHECK(static_cast<double>(step1.P(1, 1)) == Approx(em1).epsilon(tol));
  CHECK(static_cast<double>(step1.l_new(0)) == Approx(1 + em1).epsilon(tol));
  CHECK(static_cast<double>(step1.l_new(1)) == Approx(1 + em1).epsilon(tol));
  CHECK(static_cast<double>(step1.O(0, 0)) == Approx(em1).epsilon(tol));
  CHECK(static_cast<double>(step1.O(0, 1)) == Approx(1).epsilon(tol));
  CHECK(static_cast<double>(step1.O(1, 0)) == Approx(1).epsilon(tol));
  CHECK(static_cast<double>(step1.O(1, 1)) == Approx(em1).epsilon(tol));

  const auto step2 = online_softmax_update(S2, step1.m_new, step1.l_new, step1.O, V2);
  // row 0: m 2 -> 3, alpha = exp(2 - 3) = e^-1; P = [1, e^-3]
  //   l = e^-1·(1 + e^-1) + 1 + e^-3;  O = e^-1·(e^-1, 1) + 1·(2, 2) + e^-3·(-1, 3)
  const double em3 = std::exp(-3.0);
  CHECK(step2.m_new(0) == 3);
  CHECK(static_cast<double>(step2.alpha(0)) == Approx(em1).epsilon(tol));
  CHECK(step2.P(0, 0) == 1);
  CHECK(static_cast<double>(step2.P(0, 1)) == Approx(em3).epsilon(tol));
  CHECK(static_cast<double>(step2.l_new(0)) == Approx(em1 * (1 + em1) + 1 + em3).epsilon(tol));
  CHECK(static_cast<double>(step2.O(0, 0)) == Approx(em1 * em1 + 2 - em3).epsilon(tol));
  CHECK(static_cast<double>(step2.O(0, 1)) == Approx(em1 + 2 + 3 * em3).epsilon(tol));
  // row 1: m stays 5, alpha = exp(0) = 1; P = [e^-4, e^-3]
  //   l = (1 + e^-1) + e^-4 + e^-3;  O = (1, e^-1) + e^-4·(2, 2) + e^-3·(-1, 3)
  const double em4 = std::exp(-4.0);
  CHECK(step2.m_new(1) == 5);
  CHECK(step2.alpha(1) == 1);
  CHECK(static_cast<double>(step2.P(1, 0)) == Approx(em4).epsilon(tol));
  CHECK(static_cast<double>(step2.P(1, 1)) == Approx(em3).epsilon(tol));
  CHECK(static_cast<double>(step2.l_new(1)) == Approx(1 + em1 + em4 + em3).epsilon(tol));
  CHECK(static_cast<double>(step2.O(1, 0)) == Approx(1 + 2 * em4 - em3).epsilon(tol));
  CHECK(static_cast<double>(step2.O(1, 1)) == Approx(em1 + 2 * em4 + 3 * em3).epsilon(tol));

  // finish: O / l and lse = m + log l
  Tensor<T> O = step2.O, lse;
  finish_rows(O, lse, step2.m_new, step2.l_new);
  const double l0_hand = em1 * (1 + em1) + 1 + em3, l1_hand = 1 + em1 + em4 + em3;
  CHECK(static_cast<double>(O(0, 0)) == Approx((em1 * em1 + 2 - em3) / l0_hand).epsilon(tol));
  CHECK(static_cast<double>(O(1, 1)) == Approx((em1 + 2 * em4 + 3 * em3) / l1_hand).epsilon(tol));
  CHECK(static_cast<double>(lse(0)) == Approx(3 + std::log(l0_hand)).epsilon(tol));
  CHECK(static_cast<double>(lse(1)) == Approx(5 + std::log(l1_hand)).epsilon(tol));
  // and lse is log Σ exp of the whole row, computed directly
  CHECK(static_cast<double>(lse(0)) ==
        Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + 1)).epsilon(tol));
  CHECK(static_cast<double>(lse(1)) ==
        Approx(std::log(std::exp(5.0) + std::exp(4.0) + std::exp(1.0) + std::exp(2.0))).epsilon(tol));
}

TEMPLATE_TEST_CASE("A row of only -inf gives zero output and lse = -inf, never NaN", "[online-softmax][mask]", float,
                   double) {
  using T = TestType;
  const T ninf = -std::numeric_limits<T>::infinity();
  // row 0 is all -inf in both tiles; row 1 is ordinary, so the tile is not skipped as a whole
  Tensor<T> m({2}, ninf), l({2}, T{0}), O({2, 3}, T{0});
  const Tensor<T> V({2, 3}, std::vector<T>{1, 2, 3, 4, 5, 6});
  for (int tile = 0; tile < 2; ++tile) {
    const Tensor<T> S({2, 2}, std::vector<T>{ninf, ninf, 0, 1});
    auto step = online_softmax_update(S, m, l, O, V);
    // nothing seen yet: m stays -inf, alpha is 1 (the header's rule: nothing to rescale), P and l are 0
    CHECK(step.m_new(0) == ninf);
    CHECK(step.alpha(0) == 1);
    CHECK(step.P(0, 0) == 0);
    CHECK(step.P(0, 1) == 0);
    CHECK(step.l_new(0) == 0);
    for (std::size_t c = 0; c < 3; ++c) CHECK(step.O(0, c) == 0);
    CHECK_FALSE(has_nan(step.alpha));
    CHECK_FALSE(has_nan(step.P));
    CHECK_FALSE(has_nan(step.O));
    m = step.m_new;
    l = step.l_new;
    O = step.O;
  }
  Tensor<T> lse;
  finish_rows(O, lse, m, l);
  CHECK(lse(0) == ninf);
  for (std::size_t c = 0; c < 3; ++c) CHECK(O(0, c) == 0);
  CHECK_FALSE(has_nan(O));
  // row 1 twice saw [0, 1] against the same values: softmax weights 1/(1+e), e/(1+e)
  const double e = std::exp(1.0);
  const double tol = sizeof(T) == 4 ? 1e-6 : 1e-14;
  CHECK(static_cast<double>(O(1, 0)) == Approx((1 + 4 * e) / (1 + e)).epsilon(tol));
  CHECK(static_cast<double>(lse(1)) == Approx(1 + std::log(2 * (1 + 1 / e))).epsilon(tol));
}

TEMPLATE_TEST_CASE("finish_rows of a row with l = 0 writes zeros and -inf even over garbage in O",
                   "[online-softmax][mask]", float, double) {
  using T = TestType;
  Tensor<T> O({1, 2}, std::vector<T>{7, -7});
  Tensor<T> lse;
  finish_rows(O, lse, Tensor<T>({1}, -std::numeric_limits<T>::infinity()), Tensor<T>({1}, T{0}));
  CHECK(O(0, 0) == 0);
  CHECK(O(0, 1) == 0);
  CHECK(lse(0) == -std::numeric_limits<T>::infinity());
}
