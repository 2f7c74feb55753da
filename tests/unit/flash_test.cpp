// Flash attention (engine/flash.hpp) against naive attention: a seeded sweep over sizes, heads, masks
// and tile sizes judged by the tolerance rule of docs/cli.md, tiles of one row and one column, the
// memory each engine holds, and lse against the naive trace's `masked` step. Which keys a mask allows is
// worked out from the formulas of input-format.md (mask_spec.hpp), independently of Mask::allows; expected
// numbers come from computations written in this file. Masked rows and tiles and the worked example's
// tiles are in flash_tiles_test.cpp.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
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

// ------------------------------------------------------------------------------------- observers

// Asks only for `steps`, so that a sweep pays for nothing else.
class SomeSteps final : public Observer {
 public:
  explicit SomeSteps(std::vector<Step> steps) : steps_(std::move(steps)) {}
  bool wants(Step step) const override { return std::find(steps_.begin(), steps_.end(), step) != steps_.end(); }
  void on(Step step, const Tensor<float>& value) override { recorder_.on(step, value); }
  void on(Step step, const Tensor<double>& value) override { recorder_.on(step, value); }
  const Tensor<double>& at(Step step) const { return recorder_.at(step); }

 private:
  std::vector<Step> steps_;
  StepRecorder recorder_;
};

// The rows (b, i) that the mask, by the formulas above, leaves with no key.
std::vector<EmptyRow> empty_rows_of(const Config& c) {
  std::vector<EmptyRow> rows;
  for (std::size_t b = 0; b < c.p.B; ++b)
    for (std::size_t i = 0; i < c.p.n; ++i)
      if (!c.spec.row_has_key(c.p, b, i)) rows.push_back({b, i});
  return rows;
}

// Every value of the head outputs (B, h, n, d_v) of the rows in `rows` is exactly 0.
std::size_t nonzero_in_rows(const Tensor<double>& O_h, const std::vector<EmptyRow>& rows) {
  std::size_t bad = 0;
  for (const EmptyRow& r : rows)
    for (std::size_t hd = 0; hd < O_h.dim(1); ++hd)
      for (std::size_t e = 0; e < O_h.dim(3); ++e)
        if (O_h(r.batch, hd, r.query, e) != 0) ++bad;
  return bad;
}

// How close the sweep came to the verdict's limits, per dtype: the largest |flash - ref| as a share of
// the bound, and of the noise floor alone (which is derived to bound a correct flash by itself).
struct Margins {
  double of_bound = 0, of_noise = 0;
};

// One config in T: flash judged by compare_engines' verdict, rows with nothing to attend zero in both
// engines (with lse -inf), the memory bounds, no NaN anywhere. Returns whether everything held; prints
// the config and the numbers when not.
template <class T>
bool check_config(const Config& c, double& max_logit, Margins& margins) {
  const std::vector<EmptyRow> empty = empty_rows_of(c);
  SomeSteps naive_steps({Step::scaled, Step::head_outputs});
  FlashRecorder flash_steps({Step::head_outputs}, /*keep_tiles=*/false);
  const CompareRecord record = compare_engines<T>(c.p, c.blocks, naive_steps, flash_steps);
  const char* dtype = sizeof(T) == 4 ? "float32" : "float64";
  bool ok = true;
  const auto fail = [&](const std::string& what) {
    ok = false;
    FAIL_CHECK(fmt::format("{}: {}\n  config: {}", dtype, what, describe(c)));
  };
  if (!record.pass)
    fail(
        fmt::format("flash fails the tolerance rule: max|flash - ref| = {:.3g} > 2·{:.3g} + {:.3g} = {:.3g} "
                    "(max|flash - naive| = {:.3g})",
                    record.flash_vs_ref.max_abs, record.naive_vs_ref.max_abs, record.noise, record.bound,
                    record.flash_vs_naive.max_abs));
  // the record states the rule it applied: bound = 2·naive + noise, pass = flash <= bound
  if (record.bound != 2 * record.naive_vs_ref.max_abs + record.noise ||
      record.pass != (record.flash_vs_ref.max_abs <= record.bound))
    fail(fmt::format(
        "the record does not follow its rule: flash {:.17g}, naive {:.17g}, noise {:.17g}, bound {:.17g}, pass {}",
        record.flash_vs_ref.max_abs, record.naive_vs_ref.max_abs, record.noise, record.bound, record.pass));
  // the noise floor alone is derived to bound a correct flash, whatever naive's own error
  if (!(record.flash_vs_ref.max_abs <= record.noise))
    fail(fmt::format("flash is farther from the reference than the noise floor: {:.3g} > {:.3g}",
                     record.flash_vs_ref.max_abs, record.noise));
  if (any_nan(record.naive) || any_nan(record.flash)) fail("NaN in an output");
  if (record.bound > 0) margins.of_bound = std::max(margins.of_bound, record.flash_vs_ref.max_abs / record.bound);
  if (record.noise > 0) margins.of_noise = std::max(margins.of_noise, record.flash_vs_ref.max_abs / record.noise);
  for (const double x : naive_steps.at(Step::scaled).values()) max_logit = std::max(max_logit, std::abs(x));

  const Tensor<double>& naive_O = naive_steps.at(Step::head_outputs);
  const Tensor<double>& flash_O = flash_steps.at(Step::head_outputs);
  if (const std::size_t bad = nonzero_in_rows(naive_O, empty))
    fail(fmt::format("naive: {} nonzero values in rows with nothing to attend", bad));
  if (const std::size_t bad = nonzero_in_rows(flash_O, empty))
    fail(fmt::format("flash: {} nonzero values in rows with nothing to attend", bad));
  if (any_nan(flash_O)) fail("NaN in flash's head outputs");
  // lse: -inf exactly for the empty rows, finite for every other
  const Tensor<double>& lse = flash_steps.lse();
  std::size_t bad_lse = 0;
  for (std::size_t b = 0; b < c.p.B; ++b)
    for (std::size_t hd = 0; hd < c.p.h; ++hd)
      for (std::size_t i = 0; i < c.p.n; ++i) {
        const bool is_empty = !c.spec.row_has_key(c.p, b, i);
        const double x = lse(b, hd, i);
        if ((is_empty ? x != -inf : !std::isfinite(x)) && bad_lse++ == 0)  // the first one says enough
          fail(fmt::format("lse[{}, {}, {}] = {} for a row {}", b, hd, i, x,
                           is_empty ? "with nothing to attend" : "with keys"));
      }
  // memory: flash holds one S tile and one P tile; naive two full (B, h, n, m) buffers
  const std::size_t flash_limit = 2 * c.blocks.Br * c.blocks.Bc * sizeof(T);
  if (record.flash_peak_bytes > flash_limit)
    fail(fmt::format("flash held {} bytes, more than 2·Br·Bc·sizeof(T) = {}", record.flash_peak_bytes, flash_limit));
  const std::size_t naive_bytes = 2 * c.p.B * c.p.h * c.p.n * c.p.m * sizeof(T);
  if (record.naive_peak_bytes != naive_bytes)
    fail(fmt::format("naive held {} bytes, expected 2·B·h·n·m·sizeof(T) = {}", record.naive_peak_bytes, naive_bytes));
  return ok;
}

// ------------------------------------------------------------------------------ lse from `masked`

// log Σ_j exp(x_j) of each row of `masked` (B, h, n, m), in long double with the row max taken out;
// -inf for a row of only -inf.
Tensor<double> lse_of(const Tensor<double>& masked) {
  const std::size_t B = masked.dim(0), h = masked.dim(1), n = masked.dim(2), m = masked.dim(3);
  Tensor<double> out({B, h, n});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i) {
        long double mx = -INFINITY;
        for (std::size_t j = 0; j < m; ++j) mx = std::max<long double>(mx, masked(b, hd, i, j));
        if (mx == -INFINITY) {
          out(b, hd, i) = -inf;
          continue;
        }
        long double sum = 0;
        for (std::size_t j = 0; j < m; ++j) sum += std::exp(static_cast<long double>(masked(b, hd, i, j)) - mx);
        out(b, hd, i) = static_cast<double>(mx + std::log(sum));
      }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------- the sweep

// record.pass is compare_engines' verdict, the rule of docs/cli.md: a float64 reference for float32 and a
// long double one for float64 (a float64 reference would be naive itself there), and the noise floor
// derived in compare.hpp in place of the earlier |(ref + 0.3) - 0.3 - ref|, which can be exactly 0 and
// so failed correct runs on a harmless change of summation order.

TEST_CASE(
    "Flash equals naive by the tolerance rule of docs/cli.md over 2,000 seeded random configurations, in float32 "
    "and float64",
    "[flash][compare][property]") {
  const auto start = std::chrono::steady_clock::now();
  std::mt19937 rng(20230717);
  // Under the sanitizers the sweep is there to check memory, not numbers, and runs ten times slower: it
  // takes the first fifth of the same configurations (the release suite runs all 2,000), and what it must
  // cover shrinks with it.
#ifdef ATTN_SANITIZED
  constexpr std::size_t configs = 400;
#else
  constexpr std::size_t configs = 2000;
#endif
  constexpr std::size_t part = 2000 / configs;  // 1 in release, 5 under the sanitizers
  std::size_t failed = 0;
  double max_logit = 0;
  Margins margins[2];  // float32, float64
  // what the sweep covered, so that a change of the generator cannot quietly narrow it
  std::size_t by_kind[5] = {}, by_align[2] = {}, cross = 0, gqa = 0, mqa = 0, batched = 0, ragged_tiles = 0,
              with_empty_rows = 0, one_by_one = 0, long_rows = 0;
  for (std::size_t k = 0; k < configs; ++k) {
    const Config c = random_config(rng, 70);
    INFO("config " << k << ": " << describe(c));
    if (!check_config<float>(c, max_logit, margins[0])) ++failed;
    if (!check_config<double>(c, max_logit, margins[1])) ++failed;

    ++by_kind[static_cast<int>(c.spec.kind)];
    if (c.spec.kind == MaskKind::causal || c.spec.kind == MaskKind::sliding_window)
      ++by_align[c.spec.align == Align::bottom_right ? 1 : 0];
    cross += c.p.cross;
    gqa += c.p.g > 1 && c.p.g < c.p.h;
    mqa += c.p.g == 1 && c.p.h > 1;
    batched += c.p.B > 1;
    ragged_tiles += c.p.n % c.blocks.Br != 0 && c.p.m % c.blocks.Bc != 0;
    with_empty_rows += !empty_rows_of(c).empty();
    one_by_one += c.blocks.Br == 1 && c.blocks.Bc == 1;
    long_rows += c.p.n >= 50 && c.p.m >= 50;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(fmt::format(
      "flash sweep: {} configs × 2 dtypes in {:.1f} s; largest |logit| {:.3g}; masks none {} causal {} "
      "sliding_window {} padding {} custom {}; top_left {} bottom_right {}; cross {}; GQA {} MQA {}; "
      "batched {}; tiles dividing neither length {}; with empty rows {}; 1×1 tiles {}; n, m >= 50 {}; "
      "largest |flash - ref| / bound: float32 {:.3g}, float64 {:.3g}; / noise: float32 {:.3g}, float64 {:.3g}",
      configs, seconds, max_logit, by_kind[0], by_kind[1], by_kind[2], by_kind[3], by_kind[4], by_align[0], by_align[1],
      cross, gqa, mqa, batched, ragged_tiles, with_empty_rows, one_by_one, long_rows, margins[0].of_bound,
      margins[1].of_bound, margins[0].of_noise, margins[1].of_noise));
  CHECK(failed == 0);
  // and the bound is not vacuous: somewhere flash comes within a factor 100 of it (0.078 and 0.072 measured)
  CHECK(margins[0].of_bound > 0.01);
  CHECK(margins[1].of_bound > 0.01);
  for (const std::size_t count : by_kind) CHECK(count > 100 / part);
  CHECK(by_align[0] > 100 / part);
  CHECK(by_align[1] > 100 / part);
  CHECK(cross > 100 / part);
  CHECK(gqa > 100 / part);
  CHECK(mqa > 100 / part);
  CHECK(batched > 100 / part);
  CHECK(ragged_tiles > 100 / part);
  CHECK(with_empty_rows > 50 / part);
  CHECK(one_by_one > (part == 1 ? 5 : 0));  // 1 of the first 400
  CHECK(long_rows > 20 / part);
  CHECK(max_logit >= 3e3);
  CHECK(max_logit <= 3e4);
}

TEMPLATE_TEST_CASE("Tiles of one row and one column (Br = Bc = 1) match naive", "[flash]", float, double) {
  using T = TestType;
  const double tol = sizeof(T) == 4 ? 2e-6 : 1e-13;
  for (unsigned seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(500 + seed);
    Config c = random_config(rng, 12);
    c.blocks = {1, 1};
    INFO("seed " << seed << ": " << describe(c));
    StepRecorder naive_steps;
    run_naive<T>(c.p, naive_steps);
    FlashRecorder flash_steps({Step::head_outputs, Step::output});
    run_flash<T>(c.p, flash_steps, c.blocks);
    // one tile per (item, head, query, key): n·m each
    CHECK(flash_steps.tiles.size() == c.p.B * c.p.h * c.p.n * c.p.m);
    check_close("head_outputs", flash_steps.at(Step::head_outputs), naive_steps.at(Step::head_outputs), tol);
    NullObserver none;
    const CompareRecord record = compare_engines<T>(c.p, c.blocks, none, none);
    CHECK(record.pass);
    // one score and one weight at a time; nothing at all when the mask rules out every tile
    const bool any_run =
        std::any_of(flash_steps.tiles.begin(), flash_steps.tiles.end(), [](const auto& t) { return !t.skipped; });
    CHECK(record.flash_peak_bytes == (any_run ? 2 * sizeof(T) : 0));
  }
}

// ---------------------------------------------------------------------------------------- memory

TEMPLATE_TEST_CASE("Flash holds at most 2·Br·Bc scores whatever n·m, naive holds 2·B·h·n·m", "[flash][memory]", float,
                   double) {
  using T = TestType;
  for (const auto& [Br, Bc] : {std::pair<std::size_t, std::size_t>{4, 3}, {1, 1}, {2, 5}, {7, 7}}) {
    std::vector<std::size_t> flash_peaks;
    for (const std::size_t length : {14, 70}) {  // 14 is a multiple of neither 3 nor 4: partial tiles too
      INFO("Br " << Br << ", Bc " << Bc << ", n = m = " << length);
      std::mt19937 rng(static_cast<unsigned>(length * 100 + Br * 10 + Bc));
      Dims d;
      d.B = 2;
      d.n = length;
      d.h = 3;
      d.d_model = 6;
      d.d_k = 4;
      d.d_v = 3;
      const Problem p = random_problem(rng, d);
      NullObserver none;
      const AttentionResult<T> flash = run_flash<T>(p, none, {Br, Bc});
      const AttentionResult<T> naive = run_naive<T>(p, none);
      CHECK(flash.peak_score_bytes <= 2 * Br * Bc * sizeof(T));
      CHECK(flash.peak_score_bytes > 0);
      CHECK(naive.peak_score_bytes == 2 * p.B * p.h * length * length * sizeof(T));
      flash_peaks.push_back(flash.peak_score_bytes);
    }
    // a 25 times longer n·m, the same flash peak
    CHECK(flash_peaks[0] == flash_peaks[1]);
  }
}

// ------------------------------------------------------------------------------------------- lse

TEMPLATE_TEST_CASE("Flash's lse is log Σ exp of each row of naive's masked scores", "[flash][mask][property]", float,
                   double) {
  using T = TestType;
  // float: l sums up to 40 terms in float, and log turns its relative error into an absolute error of
  // the same size (~1e-7 measured); the scores themselves are the same floats in both engines.
  const double tol = sizeof(T) == 4 ? 1e-6 : 1e-13;
  for (unsigned seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(9000 + seed);
    const Config c = random_config(rng, 40);
    INFO("seed " << seed << ": " << describe(c));
    const auto naive = test::run_recorded<T>(c.p);
    NullObserver none;
    const AttentionResult<T> flash = run_flash<T>(c.p, none, c.blocks);
    const Tensor<double> expected = lse_of(naive.steps.at(Step::masked));
    const Tensor<double> got = cast<double>(flash.lse);
    REQUIRE(got.shape() == expected.shape());
    std::size_t bad = 0;
    for (std::size_t at = 0; at < got.size(); ++at) {
      const double e = expected.values()[at], g = got.values()[at];
      const bool ok = std::isinf(e) ? g == e : std::abs(g - e) <= tol * std::max(1.0, std::abs(e));
      if (!ok) {
        ++bad;
        FAIL_CHECK(fmt::format("lse at {}: flash {}, log Σ exp(masked) {}", test::index_of(got.shape(), at), g, e));
      }
    }
    CHECK(bad == 0);
  }
}
