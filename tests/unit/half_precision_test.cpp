// float16 and bfloat16 runs (docs/precision.md): T = float with every input and stored step rounded to
// the half type. The worked example is checked against values rounded by hand; the other checks are
// properties that a missed rounding, or a rounding too many, would break.

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/compare.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"
#include "support.hpp"
#include "tensor/half.hpp"
#include "trace/record.hpp"

using namespace attn;
using attn::test::check_close;

namespace {

std::shared_ptr<const Problem> data_problem(const std::string& name) {
  return std::make_shared<const Problem>(load_problem_file(fmt::format("{}/data/{}", ATTN_SOURCE_DIR, name)));
}

std::vector<std::string> data_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(ATTN_SOURCE_DIR) / "data"))
    if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

const StepRecord& record_of(const Trace& trace, Step step) {
  for (const StepRecord& r : trace.steps)
    if (r.step == step) return r;
  FAIL(fmt::format("the trace has no step {}", step_info(step).name));
  throw std::logic_error("unreachable");
}

// Widening the half type's rounding of x gives x back: x is a value of the half type (or ±inf, NaN).
bool representable(double x, DType dtype) {
  if (std::isnan(x) || std::isinf(x)) return true;
  const auto f = static_cast<float>(x);
  if (static_cast<double>(f) != x) return false;  // not even a float
  const float back =
      dtype == DType::float16 ? float16_to_float(float_to_float16(f)) : bfloat16_to_float(float_to_bfloat16(f));
  return back == f;
}

// The first value of `t` that the half type cannot hold, reported with where it is.
void check_representable(const std::string& what, const Tensor<double>& t, DType dtype) {
  for (std::size_t k = 0; k < t.size(); ++k)
    if (!representable(t.values()[k], dtype)) {
      FAIL_CHECK(fmt::format("{} in {}: value {} at {} is not a {} value", what, name_of(dtype), t.values()[k],
                             test::index_of(t.shape(), k), name_of(dtype)));
      return;
    }
}

}  // namespace

TEST_CASE("The worked example in float16 and bfloat16 stores the values rounded by hand", "[half][engine]") {
  const auto p = data_problem("the_cat_sat.json");
  const DType dtype = GENERATE(DType::float16, DType::bfloat16);
  INFO(name_of(dtype));
  RunRequest request;
  request.dtype = dtype;
  const Trace trace = record_run(p, request);
  CHECK(trace.dtype == dtype);
  CHECK(trace.warnings.empty());

  // The inputs are 0s and 1s and the projections small integers: exact in both types.
  check_close("q", record_of(trace, Step::q).value, {3, 2}, {2, 0, 0, 2, 1, 1}, 0);
  check_close("k", record_of(trace, Step::k).value, {3, 2}, {0, 2, 2, 0, 1, 1}, 0);
  check_close("scores", record_of(trace, Step::scores).value, {1, 3, 3}, {0, 4, 2, 4, 0, 2, 2, 2, 2}, 0);

  // scaled = round(S · float32(1/√2)). 4/√2 = 2.8284271…: float16's step in [2, 4) is 2^-9, and
  // 2.8284271 / 2^-9 = 1448.15, so 1448 · 2^-9 = 2.828125; bfloat16's step there is 2^-6, 2.8284271 / 2^-6
  // = 181.02, so 181 · 2^-6 = 2.828125 too. 2/√2 = 1.4142136: float16's step in [1, 2) is 2^-10, 1448.15
  // steps, so 1.4140625; bfloat16's 2^-7, 181.02 steps, so 1.4140625 again.
  const double a = 2.828125, b = 1.4140625;
  const std::vector<double> scaled = {0, a, b, a, 0, b, b, b, b};
  check_close("scaled", record_of(trace, Step::scaled).value, {1, 3, 3}, scaled, 0);
  check_close("masked", record_of(trace, Step::masked).value, {1, 3, 3}, scaled, 0);

  // The softmax of the row [0, 2.828125, 1.4140625], in exact arithmetic (30 digits, then rounded here):
  //   1 / Z = 0.0454001748, e^2.828125 / Z = 0.7678857467, e^1.4140625 / Z = 0.1867140785,
  // with Z = 1 + e^2.828125 + e^1.4140625; the row of sat is 1/3 three times. Rounded by hand:
  //   float16 steps: 2^-15 in [2^-5, 2^-4), 2^-11 in [0.5, 1), 2^-13 in [0.125, 0.25), 2^-12 in [0.25, 0.5)
  //     0.0454001748 / 2^-15 = 1487.67 -> 1488 · 2^-15 = 0.04541015625
  //     0.7678857467 / 2^-11 = 1572.63 -> 1573 · 2^-11 = 0.76806640625   (cat→The: still 0.768)
  //     0.1867140785 / 2^-13 = 1529.56 -> 1530 · 2^-13 = 0.186767578125
  //     1/3 / 2^-12 = 1365.33          -> 1365 · 2^-12 = 0.333251953125
  //   bfloat16 steps: 2^-12, 2^-8, 2^-10, 2^-9 in the same ranges
  //     0.0454001748 / 2^-12 = 185.96 -> 186 · 2^-12 = 0.04541015625
  //     0.7678857467 / 2^-8 = 196.58  -> 197 · 2^-8 = 0.76953125
  //     0.1867140785 / 2^-10 = 191.20 -> 191 · 2^-10 = 0.1865234375
  //     1/3 / 2^-9 = 170.67           -> 171 · 2^-9 = 0.333984375
  // No quotient is within 0.05 of a tie, so float32's softmax rounds to the same values.
  const bool f16 = dtype == DType::float16;
  const double w_the = 0.04541015625, w_cat = f16 ? 0.76806640625 : 0.76953125,
               w_sat = f16 ? 0.186767578125 : 0.1865234375, third = f16 ? 0.333251953125 : 0.333984375;
  const Tensor<double>& A = record_of(trace, Step::weights).value;
  check_close("weights", A, {1, 3, 3}, {w_the, w_cat, w_sat, w_cat, w_the, w_sat, third, third, third}, 0);
  CHECK(A(0, 1, 0) == Approx(0.768).margin(f16 ? 1e-3 : 2e-3));

  // Every value is 1, so a head output is the float32 sum of the row's stored weights, rounded:
  //   float16: 0.04541015625 + 0.76806640625 + 0.186767578125 = 1 + 2^-12, below the tie 1 + 2^-11 (the
  //            step above 1 is 2^-10) -> 1;  3 · 0.333251953125 = 1 - 2^-12, the tie between 1 - 2^-11
  //            (odd) and 1 (the step below 1 is 2^-11) -> to even, 1.
  //   bfloat16: 0.04541015625 + 0.76953125 + 0.1865234375 = 1.00146484375 and 3 · 0.333984375 =
  //            1.001953125, both below the tie 1 + 2^-8 = 1.00390625 (the step above 1 is 2^-7) -> 1.
  check_close("head_outputs", record_of(trace, Step::head_outputs).value, {1, 3, 2}, std::vector<double>(6, 1.0), 0);
}

TEST_CASE("Flash in a half type rounds P before P·V and sums l from the unrounded P", "[half][flash]") {
  // One query tile and one key tile holding the whole row of "The": S = [0, 4, 2] · float32(1/√2) in
  // float32, m = 2.8284271, P = exp(S - m) = [e^-2√2, 1, e^-√2] = [0.0591057, 1, 0.2431167] (to 7
  // digits). Rounded to float16 (steps 2^-15 in [2^-5, 2^-4), 2^-13 in [0.125, 0.25)):
  //   0.0591057 / 2^-15 = 1936.78 -> 1937 · 2^-15 = 0.059112548828125
  //   0.2431167 / 2^-13 = 1991.61 -> 1992 · 2^-13 = 0.2431640625
  // l = 1 + 0.0591057 + 0.2431167 = 1.3022224 (float32), not the sum of the rounded P, 1.3022766.
  const auto p = data_problem("the_cat_sat.json");
  RunRequest request;
  request.engine = Engine::flash;
  request.dtype = DType::float16;
  request.tile_size = {3, 3};
  const Trace trace = record_run(p, request);
  REQUIRE(trace.flash);
  REQUIRE(trace.flash->tiles.size() == 1);
  const FlashTile& tile = trace.flash->tiles.front();
  const double r = std::sqrt(2.0);
  const double p0 = std::exp(-2 * r), p2 = std::exp(-r);
  CHECK(tile.P(0, 0) == static_cast<double>(float16_to_float(double_to_float16(p0))));
  CHECK(tile.P(0, 1) == 1.0);
  CHECK(tile.P(0, 2) == static_cast<double>(float16_to_float(double_to_float16(p2))));
  CHECK(tile.P(0, 0) == 0.059112548828125);
  CHECK(tile.P(0, 2) == 0.2431640625);
  // l from the unrounded P: within float32's rounding of the exact 1 + e^-2√2 + e^-√2, and farther from
  // the sum of the stored P than that.
  const double l_exact = 1 + p0 + p2;
  CHECK(tile.l_new(0) == Approx(l_exact).epsilon(1e-6));
  const double l_rounded = tile.P(0, 0) + tile.P(0, 1) + tile.P(0, 2);
  CHECK(std::fabs(l_rounded - l_exact) > 1e-6);
  // The final O / l is stored in float16: the tile's O is not, the query tile's result is.
  CHECK(representable(trace.flash->finals.front().O(0, 0), DType::float16));
}

TEST_CASE("Every stored step of a half run, naive or flash, is a value of the half type", "[half][engine]") {
  // A property that a missed rounding breaks: float32 arithmetic almost never lands on a half value by
  // itself. Over every bundled input and seeded random problems with biases, cross-attention and GQA.
  std::vector<std::shared_ptr<const Problem>> problems;
  for (const std::string& name : data_names()) problems.push_back(data_problem(name));
  std::mt19937 rng(2024);
  for (int k = 0; k < 12; ++k) {
    test::Dims d;
    d.B = test::pick(rng, 1, 2);
    d.n = test::pick(rng, 1, 7);
    d.m = test::pick(rng, 0, 6);
    d.d_model = test::pick(rng, 2, 6);
    d.h = test::pick(rng, 1, 3);
    d.g = d.h % 2 == 0 && k % 2 == 0 ? d.h / 2 : d.h;
    d.d_k = test::pick(rng, 1, 4);
    d.d_v = test::pick(rng, 1, 4);
    d.d_out = k % 3 == 0 ? 0 : test::pick(rng, 1, 5);
    d.biases = k % 2 == 1;
    problems.push_back(std::make_shared<const Problem>(test::random_problem(rng, d)));
  }
  std::size_t checked = 0;
  for (const DType dtype : {DType::float16, DType::bfloat16})
    for (const auto& p : problems)
      for (const Engine engine : {Engine::naive, Engine::flash}) {
        RunRequest request;
        request.engine = engine;
        request.dtype = dtype;
        request.tile_size = {2, 2};
        const Trace trace = record_run(p, request);
        const std::string run = fmt::format("{} {} (n = {}, m = {})", name_of(engine), p->description, p->n, p->m);
        for (const StepRecord& s : trace.steps) {
          check_representable(fmt::format("{}: {}", run, step_info(s.step).name), s.value, dtype);
          ++checked;
        }
        if (!trace.flash) continue;
        for (const FlashTile& t : trace.flash->tiles)
          if (!t.skipped) check_representable(run + ": tile P", t.P, dtype);
        for (const FlashFinal& f : trace.flash->finals) check_representable(run + ": O / l", f.O, dtype);
      }
  CHECK(checked > 500);
}

TEST_CASE("A half run is not a float32 run: its stored steps differ where float32 is not a half value",
          "[half][engine]") {
  // Guards the property above from passing vacuously: the same random problem in float32 has steps that
  // float16 cannot hold.
  std::mt19937 rng(7);
  test::Dims d;
  d.n = 5;
  d.d_model = 6;
  d.h = 2;
  d.d_out = 4;
  d.biases = true;
  const auto p = std::make_shared<const Problem>(test::random_problem(rng, d));
  const Trace f32 = record_run(p, RunRequest{});
  std::size_t not_half = 0;
  for (const StepRecord& s : f32.steps)
    for (const double x : s.value.values()) not_half += representable(x, DType::float16) ? 0 : 1;
  CHECK(not_half > 100);
}

TEST_CASE("The float16 ULP of compare is the gap between neighbouring float16 values", "[half][compare]") {
  // 1 and 1 + 2^-10 are neighbours in float16 (1 ULP), 2^13 ULPs apart in float32.
  const std::vector<double> a = {1.0 + 0x1p-10}, b = {1.0};
  CHECK(error_stats<float, double>(a, b).max_ulp == 8192);
  CHECK(error_stats<float, double>(a, b, DType::float16).max_ulp == 1);
  // In bfloat16 both round to 1 (1 + 2^-10 is below the tie 1 + 2^-8): 0 ULPs.
  CHECK(error_stats<float, double>(a, b, DType::bfloat16).max_ulp == 0);
  // Across zero: -2^-24 and 2^-24 are the smallest float16 subnormals, 2 ULPs apart.
  CHECK(
      error_stats<float, double>(std::vector<double>{-0x1p-24}, std::vector<double>{0x1p-24}, DType::float16).max_ulp ==
      2);
}

TEST_CASE("rounded_inputs rounds to the half type, and keeps the scale a float32 number", "[half][compare]") {
  Problem p = *data_problem("the_cat_sat.json");
  p.X(0, 0, 0) = 0.1;  // float16: 1638 · 2^-14 = 0.0999755859375; bfloat16: 0.1 / 2^-11 = 204.8 -> 205 · 2^-11
  const Problem h = rounded_inputs<float>(p, DType::float16);
  const Problem bf = rounded_inputs<float>(p, DType::bfloat16);
  CHECK(h.X(0, 0, 0) == 0.0999755859375);
  CHECK(bf.X(0, 0, 0) == 0.10009765625);
  CHECK(h.scale == static_cast<double>(static_cast<float>(1 / std::sqrt(2.0))));
  CHECK(bf.scale == h.scale);
}

TEST_CASE("rounded_inputs rounds the sinks as the engines hold them, so the reference sees the engines' sinks",
          "[half][compare][sinks]") {
  // The engines hold a sink logit as an input, rounded to the run's type (float16: 1638 · 2^-14 for 0.1);
  // a reference on the unrounded logit would judge the engines against another problem.
  Problem p = *data_problem("sinks.json");
  p.sinks[0] = 0.1;
  CHECK(rounded_inputs<float>(p, DType::float32).sinks[0] == static_cast<double>(0.1f));
  CHECK(rounded_inputs<float>(p, DType::float16).sinks[0] == 0.0999755859375);
  CHECK(rounded_inputs<float>(p, DType::bfloat16).sinks[0] == 0.10009765625);
  CHECK(rounded_inputs<double>(p, DType::float64).sinks[0] == 0.1);
  CHECK(rounded_inputs<float>(p, DType::float32).sinks[1] == -2);
}

TEST_CASE("compare in float16 and bfloat16 passes on every bundled input, judged in the half type", "[half][compare]") {
  for (const DType dtype : {DType::float16, DType::bfloat16})
    for (const std::string& name : data_names()) {
      const auto p = data_problem(name);
      RunRequest request;
      request.dtype = dtype;
      request.tile_size = default_tiles(p->n, p->m);
      const Trace trace = record_compare(p, request);
      REQUIRE(trace.compare);
      const CompareRecord& c = *trace.compare;
      INFO(fmt::format("{} in {}: flash error {}, naive error {}, noise {}, bound {}", name, name_of(dtype),
                       c.flash_vs_ref.max_abs, c.naive_vs_ref.max_abs, c.noise, c.bound));
      CHECK(c.dtype == dtype);
      CHECK(trace.dtype == dtype);
      CHECK(c.pass);
      // Both engines store the output rounded to the half type.
      check_representable(name + ": naive output", c.naive, dtype);
      check_representable(name + ": flash output", c.flash, dtype);
      // A half engine is within a few of its own ULPs of float64 on the small hand-written inputs. (The
      // layers imported from random weights, *_layer.json, have outputs near 0, where a few ULPs of the
      // larger values are many of theirs: only the absolute bound above holds for them.)
      if (name.find("_layer.json") == std::string::npos) {
        CHECK(c.naive_vs_ref.max_ulp <= 8);
        CHECK(c.flash_vs_ref.max_ulp <= 8);
      }
    }
}

TEST_CASE("A half storage type is refused for a double computation", "[half][engine]") {
  const auto p = data_problem("the_cat_sat.json");
  NullObserver none;
  CHECK_THROWS_AS(run_naive<double>(*p, none, DType::float16), std::invalid_argument);
  CHECK_THROWS_AS(run_flash<double>(*p, none, {1, 1}, DType::bfloat16), std::invalid_argument);
}
