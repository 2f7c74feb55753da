// The worked example of docs/input-format.md (data/the_cat_sat.json), checked at every step against numbers
// worked out by hand (from the spec's derivation) and the softmax formula written out here.

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/naive.hpp"
#include "io/load.hpp"
#include "support.hpp"
#include "trace/collector.hpp"

using namespace attn;
using attn::test::check_close;

namespace {

std::shared_ptr<const Problem> the_cat_sat() {
  return std::make_shared<const Problem>(load_problem_file(ATTN_SOURCE_DIR "/data/the_cat_sat.json"));
}

const StepRecord& record_of(const Trace& trace, Step step) {
  for (const StepRecord& r : trace.steps)
    if (r.step == step) return r;
  FAIL(fmt::format("the trace has no step {}", step_info(step).name));
  throw std::logic_error("unreachable");
}

// Hand calculation: with r = sqrt(2), the scaled scores are
//   The [0, 2r, r], cat [2r, 0, r], sat [r, r, r]
// so softmax gives, with Z = exp(2r) + 1 + exp(r):
//   The [1, exp(2r), exp(r)] / Z, cat [exp(2r), 1, exp(r)] / Z, sat [1/3, 1/3, 1/3].
std::vector<double> hand_weights() {
  const double r = std::sqrt(2.0);
  const double Z = std::exp(2 * r) + 1 + std::exp(r);
  return {1 / Z,
          std::exp(2 * r) / Z,
          std::exp(r) / Z,  //
          std::exp(2 * r) / Z,
          1 / Z,
          std::exp(r) / Z,  //
          1.0 / 3,
          1.0 / 3,
          1.0 / 3};
}

}  // namespace

TEST_CASE("The worked example loads as docs/input-format.md describes it", "[loader]") {
  const auto p = the_cat_sat();
  CHECK(p->description == "The cat sat: d_model = 4, d_k = 2, one head");
  CHECK_FALSE(p->batched);
  CHECK_FALSE(p->cross);
  CHECK(p->B == 1);
  CHECK(p->n == 3);
  CHECK(p->m == 3);
  CHECK(p->d_model == 4);
  CHECK(p->h == 1);
  CHECK(p->g == 1);
  CHECK(p->d_k == 2);
  CHECK(p->d_v == 2);
  CHECK(p->d_out == 2);
  CHECK_FALSE(p->has_output_projection());
  CHECK(p->scale == Approx(1 / std::sqrt(2.0)).epsilon(1e-15));  // default 1/sqrt(d_k), d_k = 2
  CHECK(p->mask.kind == MaskKind::none);
  CHECK(p->layout == Layout::in_out);
  CHECK(p->tokens == std::vector<std::vector<std::string>>{{"The", "cat", "sat"}});
}

TEMPLATE_TEST_CASE("The worked example gives the hand-computed numbers at every step", "[engine]", float, double) {
  const auto p = the_cat_sat();
  const DType dtype = sizeof(TestType) == 4 ? DType::float32 : DType::float64;
  TraceCollector collector(p, dtype);
  AttentionResult<TestType> result = run_naive<TestType>(*p, collector);
  CHECK(result.empty_rows.empty());
  const Trace trace = std::move(collector).finish(result.empty_rows);
  CHECK(trace.dtype == dtype);
  CHECK(trace.warnings.empty());

  // Rounding: the projections, scores, head outputs are sums of small integers and exact; scaling and
  // softmax round once or twice in float, so 1e-6 there.
  const double tol = sizeof(TestType) == 4 ? 1e-6 : 1e-13;
  const double r = std::sqrt(2.0);
  const std::vector<double> ones(6, 1.0);

  SECTION("all 13 steps are reported once, in the order of the trace") {
    std::vector<Step> order;
    for (const StepRecord& s : trace.steps) order.push_back(s.step);
    CHECK(order == std::vector<Step>{Step::q, Step::k, Step::v, Step::q_heads, Step::k_heads, Step::v_heads,
                                     Step::scores, Step::scaled, Step::masked, Step::weights, Step::head_outputs,
                                     Step::concat, Step::output});
  }
  SECTION("q, k and v are the hand-computed projections") {
    // Q = X·W_q: The = row0 + row2 of W_q = [2, 0]; cat = row1 + row3 = [0, 2]; sat = row0 + row1 = [1, 1]
    check_close("q", record_of(trace, Step::q).value, {3, 2}, {2, 0, 0, 2, 1, 1}, 0);
    // K = X·W_k: The = [0, 2], cat = [2, 0], sat = [1, 1]
    check_close("k", record_of(trace, Step::k).value, {3, 2}, {0, 2, 2, 0, 1, 1}, 0);
    // V = X·W_v: every row sums two rows of W_v that are [1, 0] and [0, 1]: all ones
    check_close("v", record_of(trace, Step::v).value, {3, 2}, ones, 0);
  }
  SECTION("one head is the projection with a head axis in front") {
    check_close("q_heads", record_of(trace, Step::q_heads).value, {1, 3, 2}, {2, 0, 0, 2, 1, 1}, 0);
    check_close("k_heads", record_of(trace, Step::k_heads).value, {1, 3, 2}, {0, 2, 2, 0, 1, 1}, 0);
    check_close("v_heads", record_of(trace, Step::v_heads).value, {1, 3, 2}, ones, 0);
  }
  SECTION("the scores are Q·Kᵀ, scaled by 1/sqrt(2), unchanged by the absent mask") {
    // The·[The, cat, sat] = [2·0 + 0·2, 2·2 + 0·0, 2·1 + 0·1] = [0, 4, 2], and so on
    const std::vector<double> S = {0, 4, 2, 4, 0, 2, 2, 2, 2};
    check_close("scores", record_of(trace, Step::scores).value, {1, 3, 3}, S, 0);
    const std::vector<double> scaled = {0, 2 * r, r, 2 * r, 0, r, r, r, r};
    check_close("scaled", record_of(trace, Step::scaled).value, {1, 3, 3}, scaled, 4 * tol);
    check_close("masked", record_of(trace, Step::masked).value, {1, 3, 3}, scaled, 4 * tol);
  }
  SECTION("the weights are the hand softmax, cat's row about [0.768, 0.045, 0.187]") {
    const Tensor<double>& A = record_of(trace, Step::weights).value;
    check_close("weights", A, {1, 3, 3}, hand_weights(), tol);
    // The spec's rounded numbers for "cat" (row 1)
    CHECK(A(0, 1, 0) == Approx(0.768).margin(1e-3));
    CHECK(A(0, 1, 1) == Approx(0.045).margin(1e-3));
    CHECK(A(0, 1, 2) == Approx(0.187).margin(1e-3));
  }
  SECTION("every output is one, since all values are ones and the weights sum to one") {
    check_close("head_outputs", record_of(trace, Step::head_outputs).value, {1, 3, 2}, ones, tol);
    check_close("concat", record_of(trace, Step::concat).value, {3, 2}, ones, tol);
    check_close("output", record_of(trace, Step::output).value, {3, 2}, ones, tol);
    check_close("result", cast<double>(result.output), {1, 3, 2}, ones, tol);
  }
}

TEST_CASE("A recording observer sees the worked example's 13 steps in trace order", "[engine]") {
  const auto p = the_cat_sat();
  attn::test::StepRecorder recorder;
  (void)run_naive<float>(*p, recorder);
  CHECK(recorder.order() == std::vector<Step>{Step::q, Step::k, Step::v, Step::q_heads, Step::k_heads, Step::v_heads,
                                              Step::scores, Step::scaled, Step::masked, Step::weights,
                                              Step::head_outputs, Step::concat, Step::output});
  // The engine keeps the batch axis; the collector drops it for a 2-D input.
  CHECK(recorder.at(Step::weights).shape() == Shape{1, 1, 3, 3});
  check_close("weights", recorder.at(Step::weights), {1, 1, 3, 3}, hand_weights(), 1e-6);
}

TEST_CASE("A step filter keeps only the steps it names, still in order", "[engine]") {
  const auto p = the_cat_sat();
  TraceCollector collector(p, DType::float64, StepFilter{{Step::weights, Step::scores}});
  AttentionResult<double> result = run_naive<double>(*p, collector);
  const Trace trace = std::move(collector).finish(result.empty_rows);
  REQUIRE(trace.steps.size() == 2);
  CHECK(trace.steps[0].step == Step::scores);
  CHECK(trace.steps[1].step == Step::weights);
  check_close("weights", trace.steps[1].value, {1, 3, 3}, hand_weights(), 1e-13);
}
