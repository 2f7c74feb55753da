// Dropout's keep mask: Philox4x32-10 against Random123's known answers, and one mask for every engine,
// tiling, thread count and pass. The expected numbers are Random123's published kat_vectors; every
// other check compares our engines with each other or with the mask itself, never with a stored output.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/backward.hpp"
#include "engine/fast.hpp"
#include "engine/fast_backward.hpp"
#include "model/dropout.hpp"
#include "support.hpp"
#include "trace/record.hpp"

using namespace attn;
using attn::test::StepRecorder;

namespace {

bool same_values(const Tensor<double>& a, const Tensor<double>& b) {
  return std::ranges::equal(a.values(), b.values());
}

Problem dropout_problem(std::uint64_t seed, double p = 0.3) {
  std::mt19937 rng(23);
  test::Dims d;
  d.B = 2;
  d.n = 7;
  d.d_model = 6;
  d.h = 4;
  d.g = 2;
  d.d_k = 3;
  d.d_v = 3;
  d.d_out = 5;
  Problem problem = test::random_problem(rng, d);
  problem.mask.kind = MaskKind::causal;
  problem.dropout = Dropout{p, seed};
  return problem;
}

// Every tile pair of a flash trace: where the tile's P is not 0, P_drop is P times the mask's factor.
void check_tiles(const Trace& trace, const DropoutMask& mask, const std::string& run) {
  REQUIRE(trace.flash);
  std::size_t seen = 0;
  for (const FlashTile& t : trace.flash->tiles) {
    if (t.skipped) continue;
    REQUIRE(t.P_drop.shape() == t.P.shape());
    for (std::size_t r = 0; r < t.P.dim(0); ++r)
      for (std::size_t c = 0; c < t.P.dim(1); ++c) {
        const double want = t.P(r, c) * mask.factor<double>(t.batch, t.head, t.row_begin + r, t.col_begin + c);
        if (t.P_drop(r, c) != want)
          FAIL_CHECK(fmt::format("{}: tile ({}, {}) of batch {} head {}: P_drop[{}][{}] = {}, P·Z/(1-p) = {}", run, t.i,
                                 t.j, t.batch, t.head, r, c, t.P_drop(r, c), want));
        ++seen;
      }
  }
  CHECK(seen > 0);
}

}  // namespace

TEST_CASE("Philox4x32-10 gives Random123's known answers", "[dropout]") {
  // Random123 1.14, tests/kat_vectors: philox4x32 10 rounds
  CHECK(philox4x32_10({0, 0, 0, 0}, 0, 0) == Philox4x32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff) ==
        Philox4x32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0) ==
        Philox4x32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("the keep mask keeps about 1 - p of the weights, and each weight keeps its expected value", "[dropout]") {
  for (const double p : {0.1, 0.5, 0.9}) {
    const DropoutMask mask(Dropout{p, 12345});
    std::size_t kept = 0, all = 0;
    for (std::size_t hd = 0; hd < 4; ++hd)
      for (std::size_t i = 0; i < 100; ++i)
        for (std::size_t j = 0; j < 100; ++j, ++all) kept += mask.keeps(0, hd, i, j) ? 1 : 0;
    const double share = static_cast<double>(kept) / static_cast<double>(all);
    INFO(fmt::format("p = {}: kept {} of {}", p, kept, all));
    // 40000 draws: the standard deviation of the share is at most 0.0025; 4 of them is far out
    CHECK(std::abs(share - (1 - p)) < 0.01);
    CHECK(mask.factor<double>(0, 0, 0, 0) * (1 - p) == Approx(mask.keeps(0, 0, 0, 0) ? 1.0 : 0.0));
  }
  // p = 0 keeps everything: the threshold is 0
  const DropoutMask none(Dropout{0, 7});
  for (std::size_t j = 0; j < 64; ++j) CHECK(none.keeps(0, 0, 0, j));
}

TEST_CASE("naive's dropped step is the weights times the keep mask's factor, and a seed changes it", "[dropout]") {
  const Problem p = dropout_problem(42);
  StepRecorder got;
  run_naive<double>(p, got);
  const Tensor<double>& A = got.at(Step::weights);
  const Tensor<double>& dropped = got.at(Step::dropped);
  const DropoutMask mask(*p.dropout);
  std::size_t zeros = 0, kept = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) {
          CHECK(dropped(b, hd, i, j) == A(b, hd, i, j) * mask.factor<double>(b, hd, i, j));
          if (A(b, hd, i, j) == 0) continue;
          (mask.keeps(b, hd, i, j) ? kept : zeros) += 1;
        }
  CHECK(zeros > 0);  // the test would prove nothing if the mask kept every weight it met
  CHECK(kept > 0);

  StepRecorder other;
  run_naive<double>(dropout_problem(43), other);
  CHECK(same_values(other.at(Step::weights), A));
  CHECK_FALSE(same_values(other.at(Step::dropped), dropped));
  CHECK_FALSE(same_values(other.at(Step::output), got.at(Step::output)));
}

TEST_CASE(
    "one seed, one mask: naive, flash at three tilings and the fast path on 1 and 2 threads agree, forward "
    "and backward",
    "[dropout][flash][fast]") {
  const Problem p = dropout_problem(2024);
  const DropoutMask mask(*p.dropout);
  StepRecorder naive;
  run_naive_backward<double>(p, naive);
  Problem without = p;
  without.dropout.reset();
  StepRecorder plain;
  run_naive<double>(without, plain);
  REQUIRE_FALSE(same_values(plain.at(Step::output), naive.at(Step::output)));  // dropout changed the output

  const std::vector<Step> gradients = {Step::d_X, Step::d_W_q, Step::d_W_k, Step::d_W_v, Step::d_W_o};
  for (const TileSize tiles : {TileSize{1, 1}, TileSize{3, 2}, TileSize{4, 8}}) {
    const std::string run = fmt::format("flash Br={} Bc={}", tiles.Br, tiles.Bc);
    INFO(run);
    StepRecorder flash;
    run_flash_backward<double>(p, flash, tiles);
    test::check_close(run + " output", flash.at(Step::output), naive.at(Step::output), 1e-12);
    for (const Step s : gradients)
      test::check_close(fmt::format("{} {}", run, step_info(s).name), flash.at(s), naive.at(s), 1e-12);

    RunRequest request{Engine::flash, DType::float64, tiles, {}, true};
    check_tiles(record_run(std::make_shared<const Problem>(p), request), mask, run);
  }
  for (const std::size_t threads : {std::size_t{1}, std::size_t{2}})
    for (const Engine engine : {Engine::naive, Engine::flash}) {
      const std::string run = fmt::format("fast {} on {} thread(s)", name_of(engine), threads);
      FastOptions o;
      o.threads = threads;
      o.tiles = {2, 4};
      o.backward_tiles = {4, 2};
      test::check_close(run + " output", cast<double>(run_fast<double>(p, engine, o).output), naive.at(Step::output),
                        1e-12);
      if (engine == Engine::naive) continue;  // the fast backward is flash's
      const FastBackward<double> g = run_fast_backward<double>(p, o);
      for (const auto& [step, value] : g.gradients)
        if (std::find(gradients.begin(), gradients.end(), step) != gradients.end())
          test::check_close(fmt::format("{} {}", run, step_info(step).name), value, naive.at(step), 1e-12);
    }
}

TEST_CASE("dropout with p = 0 is no dropout: the same steps and the same numbers", "[dropout]") {
  Problem p = dropout_problem(5);
  const Problem none = [&] {
    Problem q = p;
    q.dropout.reset();
    return q;
  }();
  // the loader turns p = 0 into no dropout; an engine given p = 0 directly keeps every weight
  p.dropout = Dropout{0, 5};
  StepRecorder zero, plain;
  run_naive<double>(p, zero);
  run_naive<double>(none, plain);
  CHECK(same_values(zero.at(Step::output), plain.at(Step::output)));
}
