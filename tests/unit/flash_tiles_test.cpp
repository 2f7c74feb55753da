// Flash attention (engine/flash.hpp) where the mask empties rows and tiles (zero output, lse -inf, the
// tiles it skips, each tile listed once in order) and the worked example's tiles, whose m, l and alpha
// are worked out by hand. Which keys a mask allows is worked out from the formulas of input-format.md
// (mask_spec.hpp), independently of Mask::allows. The seeded sweep against naive is in flash_test.cpp.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/compare.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "flash_recorder.hpp"
#include "io/load.hpp"
#include "model/mask.hpp"
#include "mask_spec.hpp"
#include "support.hpp"

using namespace attn;
using attn::test::any_nan;
using attn::test::check_close;
using attn::test::Config;
using attn::test::describe;
using attn::test::Dims;
using attn::test::FlashRecorder;
using attn::test::install_mask;
using attn::test::MaskSpec;
using attn::test::pick;
using attn::test::random_config;
using attn::test::random_mask;
using attn::test::random_problem;
using attn::test::spec_band_allows;
using attn::test::StepRecorder;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// The worked example, data/the_cat_sat.json.
std::shared_ptr<const Problem> the_cat_sat() {
  return std::make_shared<const Problem>(load_problem_file(ATTN_SOURCE_DIR "/data/the_cat_sat.json"));
}

}  // namespace

// ------------------------------------------------------------------------- masked rows and tiles

TEMPLATE_TEST_CASE("A custom mask with an all-false row gives that row zero output and lse -inf in flash, as in naive",
                   "[flash][mask]", float, double) {
  using T = TestType;
  std::mt19937 rng(31);
  Dims d;
  d.n = 5;
  d.m = 7;
  d.h = 2;
  d.d_model = 4;
  Problem p = random_problem(rng, d);
  // query 2 may attend nothing; the others a checkerboard with key 0 always allowed
  p.mask.kind = MaskKind::custom;
  p.mask.allow = Tensor<std::uint8_t>({1, 5, 7});
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 7; ++j) p.mask.allow(0, i, j) = i != 2 && (j == 0 || (i + j) % 2 == 0) ? 1 : 0;

  StepRecorder naive_steps;
  const AttentionResult<T> naive = run_naive<T>(p, naive_steps);
  CHECK(naive.empty_rows == std::vector<EmptyRow>{{0, 2}});
  for (const auto& [Br, Bc] : {std::pair<std::size_t, std::size_t>{1, 1}, {2, 3}, {5, 7}, {4, 2}, {3, 9}}) {
    INFO("Br " << Br << ", Bc " << Bc);
    FlashRecorder flash_steps({Step::head_outputs});
    const AttentionResult<T> flash = run_flash<T>(p, flash_steps, {Br, Bc});
    CHECK(flash.empty_rows == std::vector<EmptyRow>{{0, 2}});
    const Tensor<double>& O_h = flash_steps.at(Step::head_outputs);
    CHECK_FALSE(any_nan(O_h));
    CHECK_FALSE(any_nan(cast<double>(flash.lse)));
    for (std::size_t hd = 0; hd < 2; ++hd) {
      for (std::size_t e = 0; e < p.d_v; ++e) CHECK(O_h(0, hd, 2, e) == 0);
      CHECK(flash.lse(0, hd, 2) == -std::numeric_limits<T>::infinity());
      CHECK(std::isfinite(flash.lse(0, hd, 1)));
    }
    check_close("head_outputs", O_h, naive_steps.at(Step::head_outputs), sizeof(T) == 4 ? 1e-6 : 1e-14);
    NullObserver none;
    CHECK(compare_engines<T>(p, {Br, Bc}, none, none).pass);
  }
}

TEMPLATE_TEST_CASE("Padding that masks every key of an item skips all its tiles and gives zeros and lse -inf",
                   "[flash][mask]", float, double) {
  using T = TestType;
  std::mt19937 rng(32);
  Dims d;
  d.B = 2;
  d.n = 4;
  d.m = 6;
  d.h = 2;
  d.g = 1;
  d.d_out = 3;
  d.biases = true;
  Problem p = random_problem(rng, d);
  p.mask.kind = MaskKind::padding;
  // item 0 keeps no key; item 1 keeps keys 1, 2 and 5
  p.mask.keep = Tensor<std::uint8_t>({2, 6}, std::vector<std::uint8_t>{0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1});
  FlashRecorder flash_steps({Step::head_outputs, Step::output});
  const AttentionResult<T> flash = run_flash<T>(p, flash_steps, {3, 2});
  CHECK(flash.empty_rows == std::vector<EmptyRow>{{0, 0}, {0, 1}, {0, 2}, {0, 3}});
  // by hand: Tr = ceil(4/3) = 2, Tc = ceil(6/2) = 3, so 2 items × 2 heads × 2 × 3 = 24 tiles, in order;
  // all 12 of item 0 are skipped, and of item 1 the key tile j = 1 (keys 2, 3) holds key 2: none skipped
  REQUIRE(flash_steps.tiles.size() == 24);
  std::size_t k = 0;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t hd = 0; hd < 2; ++hd)
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j, ++k) {
          const auto& t = flash_steps.tiles[k];
          INFO("tile " << k);
          CHECK(std::tie(t.batch, t.head, t.i, t.j) == std::tie(b, hd, i, j));
          CHECK(t.skipped == (b == 0));
          CHECK((t.skipped ? t.has_no_matrices : t.has_matrices));
        }
  const Tensor<double>& O_h = flash_steps.at(Step::head_outputs);
  const Tensor<double>& Y = flash_steps.at(Step::output);
  CHECK_FALSE(any_nan(O_h));
  CHECK_FALSE(any_nan(Y));
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t hd = 0; hd < 2; ++hd) {
      CHECK(flash.lse(0, hd, i) == -std::numeric_limits<T>::infinity());
      CHECK(std::isfinite(flash.lse(1, hd, i)));
      for (std::size_t e = 0; e < p.d_v; ++e) CHECK(O_h(0, hd, i, e) == 0);
    }
    // output = 0·W_o + b_o
    for (std::size_t e = 0; e < p.d_out; ++e) CHECK(Y(0, i, e) == static_cast<double>(static_cast<T>(p.b_o[e])));
  }
  // a padded key in a tile of item 1 is -inf in S and contributes P = 0
  for (const auto& t : flash_steps.tiles) {
    if (t.skipped) continue;
    for (std::size_t r = 0; r < t.S.dim(0); ++r)
      for (std::size_t c = 0; c < t.S.dim(1); ++c) {
        const bool kept = p.mask.keep(1, t.col_begin + c) != 0;
        CHECK((kept ? std::isfinite(t.S(r, c)) : t.S(r, c) == -inf));
        if (!kept) CHECK(t.P(r, c) == 0);
      }
  }
  NullObserver none;
  CHECK(compare_engines<T>(p, {3, 2}, none, none).pass);
}

TEST_CASE("Flash skips exactly the tiles that the mask rules out, and lists every tile once in order",
          "[flash][mask][property]") {
  std::mt19937 rng(4242);
  std::size_t skipped_total = 0, run_total = 0;
  std::size_t skipped_by_kind[5] = {};
  for (std::size_t k = 0; k < 400; ++k) {
    Config c = random_config(rng, 24);
    // the band masks are the ones that skip whole tiles most; give them half the draws
    if (k % 2 == 0)
      c.spec = install_mask(rng, c.p, k % 4 == 0 ? MaskKind::causal : MaskKind::sliding_window,
                            pick(rng, 0, 1) == 0 ? Align::top_left : Align::bottom_right);
    const Problem& p = c.p;
    INFO("config " << k << ": " << describe(c));
    FlashRecorder rec;
    run_flash<double>(p, rec, c.blocks);

    // expected, from the tile grid and the mask formulas: Tr × Tc tiles per (item, head), in order
    const std::size_t Br = c.blocks.Br, Bc = c.blocks.Bc;
    const std::size_t Tr = (p.n + Br - 1) / Br, Tc = (p.m + Bc - 1) / Bc;
    REQUIRE(rec.tiles.size() == p.B * p.h * Tr * Tc);
    std::size_t at = 0, mismatches = 0;
    for (std::size_t b = 0; b < p.B; ++b)
      for (std::size_t hd = 0; hd < p.h; ++hd)
        for (std::size_t i = 0; i < Tr; ++i)
          for (std::size_t j = 0; j < Tc; ++j, ++at) {
            const auto& t = rec.tiles[at];
            const std::size_t r0 = i * Br, r1 = std::min(p.n, r0 + Br), c0 = j * Bc, c1 = std::min(p.m, c0 + Bc);
            const bool ruled_out = c.spec.rules_out(p, b, r0, r1, c0, c1);
            const bool where_ok = std::tie(t.batch, t.head, t.i, t.j, t.row_begin, t.row_end, t.col_begin, t.col_end) ==
                                  std::tie(b, hd, i, j, r0, r1, c0, c1);
            const bool skip_ok = t.skipped == ruled_out && (t.skipped ? t.has_no_matrices : t.has_matrices);
            if (!where_ok || !skip_ok) {
              ++mismatches;
              FAIL_CHECK(
                  fmt::format("tile #{}: expected b {} h {} i {} j {} rows [{}, {}) cols [{}, {}) skipped {}; "
                              "got b {} h {} i {} j {} rows [{}, {}) cols [{}, {}) skipped {}",
                              at, b, hd, i, j, r0, r1, c0, c1, ruled_out, t.batch, t.head, t.i, t.j, t.row_begin,
                              t.row_end, t.col_begin, t.col_end, t.skipped));
              continue;
            }
            if (t.skipped) {
              ++skipped_total;
              ++skipped_by_kind[static_cast<int>(c.spec.kind)];
              continue;
            }
            ++run_total;
            // S holds -inf exactly where the mask forbids
            REQUIRE(t.S.shape() == Shape{r1 - r0, c1 - c0});
            for (std::size_t r = 0; r < r1 - r0; ++r)
              for (std::size_t col = 0; col < c1 - c0; ++col)
                if ((t.S(r, col) == -inf) == c.spec.allows(p, b, r0 + r, c0 + col)) {
                  ++mismatches;
                  FAIL_CHECK(fmt::format("tile #{} S[{}, {}] = {}, but the mask {} key {} for query {}", at, r, col,
                                         t.S(r, col), c.spec.allows(p, b, r0 + r, c0 + col) ? "allows" : "forbids",
                                         c0 + col, r0 + r));
                }
          }
    CHECK(mismatches == 0);
    // one final per query tile
    CHECK(rec.finals.size() == p.B * p.h * Tr);
  }
  INFO(fmt::format("tile sweep: {} tiles run, {} skipped (causal {}, sliding_window {}, padding {}, custom {})",
                   run_total, skipped_total, skipped_by_kind[1], skipped_by_kind[2], skipped_by_kind[3],
                   skipped_by_kind[4]));
  CHECK(skipped_total > 1000);
  CHECK(skipped_by_kind[0] == 0);  // no mask rules nothing out
  for (int kind = 1; kind < 5; ++kind) CHECK(skipped_by_kind[kind] > 0);
}

// ------------------------------------------------------------------------------- worked example

TEMPLATE_TEST_CASE(
    "The worked example in flash with its default 2 × 1 tiles, whose m, l and alpha are worked out by hand", "[flash]",
    float, double) {
  using T = TestType;
  const double tol = sizeof(T) == 4 ? 1e-6 : 1e-14;
  const auto p = the_cat_sat();
  const TileSize blocks = default_tiles(p->n, p->m);
  // n = m = 3: Br = round(√3) = 2, Bc = floor(√3) = 1
  REQUIRE(blocks.Br == 2);
  REQUIRE(blocks.Bc == 1);

  FlashRecorder rec({Step::head_outputs, Step::output});
  const AttentionResult<T> flash = run_flash<T>(*p, rec, blocks);

  // By hand (input-format.md's derivation), with r = √2 and scale 1/√2:
  //   Q: The (2, 0), cat (0, 2), sat (1, 1);  K: The (0, 2), cat (2, 0), sat (1, 1);  V: all ones
  //   scaled scores S: The [0, 4/√2 = 2r, 2/√2 = r], cat [2r, 0, r], sat [r, r, r]
  // Query tile 0 holds The and cat, query tile 1 holds sat; each key tile holds one key.
  // The online softmax, row by row, key tile by key tile:
  //   m_new = max(m_prev, S);  alpha = exp(m_prev - m_new);  P = exp(S - m_new);  l_new = alpha·l_prev + P
  // and, V being all ones, every column of O equals l_new.
  const double r = std::sqrt(2.0);
  const double S[3][3] = {{0, 2 * r, r}, {2 * r, 0, r}, {r, r, r}};
  struct Expect {
    double S, m_prev, m_new, alpha, P, l_prev, l_new;
  };
  // Worked out from the update rule, starting from m = -inf, l = 0:
  std::vector<std::vector<Expect>> rows(3);  // [query][key tile]
  for (std::size_t q = 0; q < 3; ++q) {
    double m = -inf, l = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      const double m_new = std::max(m, S[q][j]);
      const double alpha = std::exp(m - m_new);  // exp(-inf) = 0 on the first tile
      const double P = std::exp(S[q][j] - m_new);
      const double l_new = alpha * l + P;
      rows[q].push_back({S[q][j], m, m_new, alpha, P, l, l_new});
      m = m_new;
      l = l_new;
    }
  }
  // ... which for "The" are the numbers of the walkthrough: j = 0: S = 0, m -inf -> 0, alpha 0, l 0 -> 1;
  // j = 1: S = 2√2, m -> 2√2, alpha = exp(-2√2) ≈ 0.0591, l -> 1 + exp(-2√2);
  // j = 2: S = √2, m stays 2√2, alpha = 1, l -> 1 + exp(-2√2) + exp(√2 - 2√2).
  CHECK(rows[0][0].m_new == 0);
  CHECK(rows[0][0].alpha == 0);
  CHECK(rows[0][0].l_new == 1);
  CHECK(rows[0][1].m_new == 2 * r);
  CHECK(rows[0][1].alpha == Approx(std::exp(-2 * r)).epsilon(1e-15));
  CHECK(rows[0][1].alpha == Approx(0.0591).margin(5e-5));
  CHECK(rows[0][1].l_new == Approx(1 + std::exp(-2 * r)).epsilon(1e-15));
  CHECK(rows[0][2].m_new == 2 * r);
  CHECK(rows[0][2].alpha == 1);
  CHECK(rows[0][2].l_new == Approx(1 + std::exp(-2 * r) + std::exp(r - 2 * r)).epsilon(1e-15));
  // "cat" meets its largest score first: alpha stays 1 after the first tile
  CHECK(rows[1][1].alpha == 1);
  CHECK(rows[1][2].alpha == 1);
  // "sat" sees three equal scores: l = 1, 2, 3
  CHECK(rows[2][2].l_new == 3);

  // the engine: 6 tiles (2 query tiles × 3 key tiles), none skipped, in order
  REQUIRE(rec.tiles.size() == 6);
  std::size_t k = 0;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j, ++k) {
      const auto& t = rec.tiles[k];
      INFO("query tile " << i << ", key tile " << j);
      CHECK(t.batch == 0);
      CHECK(t.head == 0);
      CHECK(t.i == i);
      CHECK(t.j == j);
      CHECK(t.row_begin == 2 * i);
      CHECK(t.row_end == std::min<std::size_t>(3, 2 * i + 2));
      CHECK(t.col_begin == j);
      CHECK(t.col_end == j + 1);
      CHECK_FALSE(t.skipped);
      REQUIRE(t.has_matrices);
      const std::size_t n_rows = t.row_end - t.row_begin;
      std::vector<double> eS, em_prev, em_new, ealpha, eP, el_prev, el_new, eO;
      for (std::size_t q = t.row_begin; q < t.row_end; ++q) {
        const Expect& e = rows[q][j];
        eS.push_back(e.S);
        em_prev.push_back(e.m_prev);
        em_new.push_back(e.m_new);
        ealpha.push_back(e.alpha);
        eP.push_back(e.P);
        el_prev.push_back(e.l_prev);
        el_new.push_back(e.l_new);
        eO.insert(eO.end(), {e.l_new, e.l_new});
      }
      check_close("S", t.S, {n_rows, 1}, eS, tol);
      check_close("m_prev", t.m_prev, {n_rows}, em_prev, tol);
      check_close("m_new", t.m_new, {n_rows}, em_new, tol);
      check_close("alpha", t.alpha, {n_rows}, ealpha, tol);
      check_close("P", t.P, {n_rows, 1}, eP, tol);
      check_close("l_prev", t.l_prev, {n_rows}, el_prev, tol);
      check_close("l_new", t.l_new, {n_rows}, el_new, tol);
      check_close("O", t.O, {n_rows, 2}, eO, tol);
    }

  // the end of each query tile: O / l = 1 (V is all ones), lse = m + log l
  const double lse_The = 2 * r + std::log(1 + std::exp(-2 * r) + std::exp(-r));
  const double lse_sat = r + std::log(3.0);
  REQUIRE(rec.finals.size() == 2);
  check_close("O / l of tile 0", rec.finals[0].O, {2, 2}, {1, 1, 1, 1}, tol);
  check_close("lse of tile 0", rec.finals[0].lse, {2}, {lse_The, lse_The}, tol * 4);
  check_close("O / l of tile 1", rec.finals[1].O, {1, 2}, {1, 1}, tol);
  check_close("lse of tile 1", rec.finals[1].lse, {1}, {lse_sat}, tol * 4);
  CHECK(lse_The == Approx(3.0925).margin(5e-5));  // what the walkthrough prints
  check_close("lse", rec.lse(), {1, 1, 3}, {lse_The, lse_The, lse_sat}, tol * 4);
  check_close("result lse", cast<double>(flash.lse), {1, 1, 3}, {lse_The, lse_The, lse_sat}, tol * 4);

  // the output equals naive's: all ones
  check_close("flash output", rec.at(Step::output), {1, 3, 2}, {1, 1, 1, 1, 1, 1}, tol);
  const auto naive = test::run_recorded<T>(*p);
  check_close("flash output vs naive", rec.at(Step::output), naive.steps.at(Step::output), 0);
  NullObserver none;
  CHECK(compare_engines<T>(*p, blocks, none, none).pass);
}
