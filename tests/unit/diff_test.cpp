// attn-trace diff's judge (src/check/diff.hpp) on dumps worked out by hand for the worked example:
// Q = [[2,0],[0,2],[1,1]], K = [[0,2],[2,0],[1,1]], scores [[0,4,2],[4,0,2],[2,2,2]], scale 1/√2.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>

#include "check/diff.hpp"
#include "io/load.hpp"
#include "trace/record.hpp"

using namespace attn;

namespace {

const char* const cat_sat = R"({
  "tokens": ["The", "cat", "sat"],
  "X":   [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
  "W_q": [[1, 0], [0, 1], [1, 0], [0, 1]],
  "W_k": [[0, 1], [1, 0], [0, 1], [1, 0]],
  "W_v": [[1, 0], [0, 1], [0, 1], [1, 0]]
})";

Problem worked_example(const std::string& extra = "") {
  std::string text = cat_sat;
  if (!extra.empty()) text.insert(text.rfind('}'), ",\n" + extra);
  return load_problem(text, "cat_sat.json");
}

// The scores by hand, as a (3, 3) dump without the batch and head axes, times `factor`.
DumpedStep scores_times(Step step, double factor) {
  const std::vector<double> s = {0, 4, 2, 4, 0, 2, 2, 2, 2};
  DumpedStep d{step, std::string(step_info(step).name) + ".json", {3, 3}, {}, DType::float64};
  for (const double x : s) d.values.push_back(x * factor);
  return d;
}

std::vector<std::string> codes(const Divergence& d) {
  std::vector<std::string> c;
  for (const Diagnosis& g : d.diagnosis) c.emplace_back(to_string(g.code));
  return c;
}

}  // namespace

TEST_CASE("A head step fits with or without the batch axis, heads first or tokens first", "[diff]") {
  const Problem p = worked_example(R"("n_heads": 2)");
  // Two heads of d_k = 1: q_heads is (1, 2, 3, 1) heads first.
  REQUIRE(canonical_shape(Step::q_heads, p) == Shape{1, 2, 3, 1});
  CHECK(layouts_that_fit(Step::q_heads, p, {1, 2, 3, 1}).size() == 1);
  CHECK(layouts_that_fit(Step::q_heads, p, {2, 3, 1}).size() == 1);
  const std::vector<DumpLayout> tokens_first = layouts_that_fit(Step::q_heads, p, {1, 3, 2, 1});
  REQUIRE(tokens_first.size() == 1);
  CHECK(tokens_first[0].order == HeadOrder::tokens_first);
  CHECK(tokens_first[0].dims == std::vector<std::string>{"batch", "query", "head", "d_k"});
  CHECK(layouts_that_fit(Step::q_heads, p, {3, 2}).empty());
  CHECK(layouts_that_fit(Step::q, p, {3, 2}).size() == 1);
  CHECK(layouts_that_fit(Step::q, p, {2, 3}).empty());
  // (n, h, d) = [[t0h0, t0h1], [t1h0, t1h1], [t2h0, t2h1]] read back as (h, n, d).
  const Tensor<double> t = to_canonical(Step::q_heads, p, tokens_first[0], std::vector<double>{10, 11, 20, 21, 30, 31});
  CHECK(std::vector<double>(t.values().begin(), t.values().end()) == std::vector<double>{10, 20, 30, 11, 21, 31});
}

TEST_CASE("Hand-worked scores and scaled scores of the worked example agree", "[diff]") {
  const Problem p = worked_example();
  const DiffResult r =
      diff_dump(p, {scores_times(Step::scores, 1), scores_times(Step::scaled, 1 / std::sqrt(2.0))}, DType::float64);
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].verdict == Verdict::agrees);
  CHECK(r.steps[1].verdict == Verdict::agrees);
  CHECK_FALSE(r.first.has_value());
}

TEST_CASE("Scaled scores left unscaled differ at scaled, by √2, and the diagnosis is the scale", "[diff]") {
  const Problem p = worked_example();
  const DiffResult r = diff_dump(p, {scores_times(Step::scores, 1), scores_times(Step::scaled, 1)}, DType::float32);
  REQUIRE(r.first.has_value());
  const Divergence& d = *r.first;
  CHECK(d.step == Step::scaled);
  CHECK(d.out_of_tolerance == 7);  // every score but the two zeros
  // The largest difference: 4 against 4/√2 at (The, cat) and (cat, The); the first of them.
  CHECK(d.index == std::vector<std::size_t>{0, 0, 0, 1});
  CHECK(d.labels == std::vector<std::string>{"0", "0", "The", "cat"});
  CHECK(d.dumped == 4);
  CHECK(d.ours == Approx(4 / std::sqrt(2.0)).epsilon(1e-7));
  CHECK(codes(d) == std::vector<std::string>{"scale"});
  REQUIRE_FALSE(d.diagnosis.empty());
  CHECK(d.diagnosis[0].finding.find("1.41421 times ours") != std::string::npos);
}

TEST_CASE("Scores scaled twice are diagnosed as the scale applied twice", "[diff]") {
  const Problem p = worked_example();
  const DiffResult r = diff_dump(p, {scores_times(Step::scaled, 0.5)}, DType::float64);
  REQUIRE(r.first.has_value());
  CHECK(r.first->step == Step::scaled);
  REQUIRE(codes(*r.first) == std::vector<std::string>{"scale"});
  CHECK(r.first->diagnosis[0].mistake == "the scale applied twice");
}

TEST_CASE("A step right for the dump's wrong earlier step follows it", "[diff]") {
  // masked without a mask is scaled itself: right given the dump's scaled, wrong against the input.
  const Problem p = worked_example();
  const DiffResult r = diff_dump(p, {scores_times(Step::scaled, 1), scores_times(Step::masked, 1)}, DType::float64);
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].verdict == Verdict::differs);
  CHECK(r.steps[1].verdict == Verdict::follows);
  CHECK(r.steps[1].follows == Step::scaled);
  CHECK(r.first->step == Step::scaled);
}

TEST_CASE("A causal mask written as -1e9 is read as masked, and its absence is the mask mistake", "[diff]") {
  const Problem p = worked_example(R"("mask": "causal")");
  const double r2 = 1 / std::sqrt(2.0);
  // scaled by hand: [[0, 4, 2], [4, 0, 2], [2, 2, 2]] / √2; causal keeps j <= i.
  DumpedStep masked{
      Step::masked, "masked.json", {3, 3}, {0, -1e9, -1e9, 4 * r2, 0, -1e9, 2 * r2, 2 * r2, 2 * r2}, DType::float64};
  const DiffResult ok = diff_dump(p, {masked}, DType::float64);
  CHECK_FALSE(ok.first.has_value());
  REQUIRE(ok.steps.size() == 1);
  CHECK(ok.steps[0].large_negatives == 3);

  DumpedStep unmasked = scores_times(Step::masked, r2);
  const DiffResult bad = diff_dump(p, {unmasked}, DType::float64);
  REQUIRE(bad.first.has_value());
  CHECK(bad.first->step == Step::masked);
  CHECK(bad.first->out_of_tolerance == 3);
  CHECK(codes(*bad.first) == std::vector<std::string>{"mask"});
}

TEST_CASE("A dump whose shape fits no reading of its step is refused, naming the shapes that fit", "[diff]") {
  const Problem p = worked_example();
  DumpedStep q{Step::q, "q.npy", {2, 3}, std::vector<double>(6, 0.0), DType::float32};
  try {
    (void)diff_dump(p, {q}, DType::float32);
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) ==
          "q.npy: shape (2, 3) does not fit step q of this input: (batch 1, query 3, feature 2), or without the "
          "batch axis");
  }
}

TEST_CASE("diff computes every step as the naive engine does, bit for bit, in every dtype", "[diff]") {
  // A dump of our own naive run must agree exactly: diff's computation from the dump's steps is the
  // engine's own model (inputs and stored steps rounded to the dtype, float32 sums for the half types).
  std::vector<std::filesystem::path> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ATTN_SOURCE_DIR) + "/data"))
    inputs.push_back(entry.path());
  REQUIRE(inputs.size() >= 10);
  // RoPE (both styles, partial, offset positions, cross-attention) and ALiBi (standard and given slopes).
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ATTN_SOURCE_DIR) + "/tests/data/positions"))
    inputs.push_back(entry.path());
  REQUIRE(inputs.size() >= 13);
  for (const auto& path : inputs)
    for (const DType dtype : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
      DYNAMIC_SECTION(path.filename().string() << " in " << name_of(dtype)) {
        const auto problem = std::make_shared<const Problem>(load_problem_file(path.string()));
        const Trace trace = record_run(problem, {.dtype = dtype});
        std::vector<DumpedStep> dump;
        for (const StepRecord& r : trace.steps)
          dump.push_back({r.step, std::string(step_info(r.step).name), r.value.shape(),
                          std::vector<double>(r.value.values().begin(), r.value.values().end()), dtype});
        const DiffResult result = diff_dump(*problem, dump, dtype);
        CHECK_FALSE(result.first.has_value());
        REQUIRE(result.steps.size() == steps_of(*problem).size());
        for (const StepJudgement& j : result.steps) {
          INFO(step_info(j.step).name);
          CHECK(j.verdict == Verdict::agrees);
          CHECK(j.max_abs == 0);
          CHECK(j.max_abs_resumed == 0);
        }
      }
    }
}

TEST_CASE("Scores already scaled are read as scaled, with one note, and judged there", "[diff]") {
  // scores/√2 by hand under the name scores: our scaled.
  const Problem p = worked_example();
  const DiffResult r = diff_dump(p, {scores_times(Step::scores, 1 / std::sqrt(2.0))}, DType::float64);
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].step == Step::scaled);
  CHECK(r.steps[0].named == Step::scores);
  CHECK(r.steps[0].fusion == Fusion::later_step);
  CHECK(r.steps[0].verdict == Verdict::agrees);
  CHECK(r.notes == std::vector<std::string>{"scores.json: your scores already include 1/√d_k: read as our `scaled`"});
  // Not when scaled is dumped under its own name: then scores is judged as scores, and differs.
  const DiffResult both =
      diff_dump(p, {scores_times(Step::scores, 1 / std::sqrt(2.0)), scores_times(Step::scaled, 1 / std::sqrt(2.0))},
                DType::float64);
  CHECK(both.steps[0].step == Step::scores);
  REQUIRE(both.first.has_value());
  CHECK(both.first->step == Step::scores);
}

TEST_CASE("The fused steps come from the step graph", "[diff]") {
  const Problem p = worked_example();
  CHECK(fused_steps(Step::q, p) == std::vector<Step>{Step::q_heads});
  CHECK(fused_steps(Step::scores, p) == std::vector<Step>{Step::scaled, Step::masked});
  CHECK(fused_steps(Step::head_outputs, p) == std::vector<Step>{Step::concat});
  CHECK(fused_steps(Step::weights, p).empty());
  const std::vector<Step> dumped = {Step::scores, Step::masked};
  CHECK(fused_steps(Step::scores, p, dumped) == std::vector<Step>{Step::scaled});
}

TEST_CASE("Weights before the division, exp(S'' - max), are read as weights once divided by the row sums", "[diff]") {
  // By hand: the scaled scores are [[0, 4, 2], [4, 0, 2], [2, 2, 2]] / √2; each row minus its max, exp'd.
  const Problem p = worked_example();
  const std::vector<double> s = {0, 4, 2, 4, 0, 2, 2, 2, 2};
  DumpedStep w{Step::weights, "weights.json", {3, 3}, {}, DType::float64};
  for (std::size_t i = 0; i < 3; ++i) {
    const double top = std::max({s[3 * i], s[3 * i + 1], s[3 * i + 2]});
    for (std::size_t j = 0; j < 3; ++j) w.values.push_back(std::exp((s[3 * i + j] - top) / std::sqrt(2.0)));
  }
  const DiffResult r = diff_dump(p, {w}, DType::float64);
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].fusion == Fusion::unnormalised);
  CHECK(r.steps[0].verdict == Verdict::agrees);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("your weights are exp(S'' − max) before the division") != std::string::npos);
  // Halved, every row's largest value is 1/2: no longer that form, and judged as weights, which it is not.
  for (double& x : w.values) x /= 2;
  const DiffResult half = diff_dump(p, {w}, DType::float64);
  CHECK(half.steps[0].fusion == Fusion::none);
  CHECK(half.steps[0].verdict == Verdict::differs);
}

TEST_CASE("A row's figures are over its tolerance exactly when its verdict is not agrees", "[diff]") {
  // scores dumped as zeros, scaled right: scaled differs given the dump's scores, by 4/√2 at most,
  // while against ours from the input it has no difference at all.
  const Problem p = worked_example();
  const DiffResult r =
      diff_dump(p, {scores_times(Step::scores, 0), scores_times(Step::scaled, 1 / std::sqrt(2.0))}, DType::float64);
  REQUIRE(r.steps.size() == 2);
  const StepJudgement& scaled = r.steps[1];
  CHECK(scaled.verdict == Verdict::differs);
  CHECK(scaled.max_abs == 0);
  CHECK(scaled.judged_max_abs == Approx(4 / std::sqrt(2.0)).epsilon(1e-15));
  CHECK(scaled.judged_max_abs > scaled.judged_tolerance);
  CHECK_FALSE(scaled.judged_against_input);
}
