// The pipeline described once (src/observe/steps.hpp) and the one catalogue of mistakes
// (src/lessons/catalogue.hpp, src/lessons/mistaken_forward.hpp). Expected shapes and values are worked out by hand
// for the worked example: X (3, 4), W_q (4, 2), one head of d_k = 2, Q = [[2,0],[0,2],[1,1]],
// K = [[0,2],[2,0],[1,1]], scores [[0,4,2],[4,0,2],[2,2,2]]; the intended forward pass is held to the
// naive engine, an implementation of its own.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/naive.hpp"
#include "io/load.hpp"
#include "lessons/mistaken_forward.hpp"
#include "observe/steps.hpp"
#include "trace/trace.hpp"
#include "support.hpp"

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

std::vector<std::string> names(const std::vector<Step>& steps) {
  std::vector<std::string> out;
  for (const Step s : steps) out.emplace_back(step_info(s).name);
  return out;
}

}  // namespace

TEST_CASE("Every step's inputs come before it in the pipeline, and no step reads itself", "[pipeline]") {
  for (const Step s : all_steps()) {
    INFO("step " << step_info(s).name);
    CHECK(step_info(s).step == s);
    CHECK(step_from_name(step_info(s).name) == s);
    CHECK(step_info(s).axes.size() == step_info(s).dims.size());
    for (const Step in : step_info(s).inputs) CHECK(static_cast<int>(in) < static_cast<int>(s));
    CHECK_FALSE(depends_on(s, s));
  }
}

TEST_CASE("The graph: scores read the heads, or the turned heads with RoPE, and the mask reads ALiBi's bias",
          "[pipeline]") {
  const Problem plain = worked_example();
  CHECK(names(inputs_of(Step::scores, plain)) == std::vector<std::string>{"q_heads", "k_heads"});
  CHECK(names(inputs_of(Step::masked, plain)) == std::vector<std::string>{"scaled"});
  CHECK(names(inputs_of(Step::head_outputs, plain)) == std::vector<std::string>{"weights", "v_heads"});
  CHECK(inputs_of(Step::q, plain).empty());

  const Problem positioned = worked_example(R"("rope": {}, "alibi": true)");
  CHECK(names(inputs_of(Step::scores, positioned)) == std::vector<std::string>{"q_rot", "k_rot"});
  CHECK(names(inputs_of(Step::masked, positioned)) == std::vector<std::string>{"bias"});
  CHECK(names(inputs_of(Step::q_rot, positioned)) == std::vector<std::string>{"q_heads"});

  CHECK(depends_on(Step::output, Step::q));
  CHECK(depends_on(Step::weights, Step::k_rot));
  CHECK_FALSE(depends_on(Step::scores, Step::v_heads));
  CHECK_FALSE(depends_on(Step::v_heads, Step::weights));
}

TEST_CASE("Shapes and dims come from the table: the worked example's by hand", "[pipeline]") {
  const Problem p = worked_example();
  CHECK(step_shape(Step::q, p, false) == Shape{3, 2});
  CHECK(step_shape(Step::q_heads, p, false) == Shape{1, 3, 2});
  CHECK(step_shape(Step::scores, p, true) == Shape{1, 1, 3, 3});
  CHECK(step_shape(Step::output, p, false) == Shape{3, 2});
  CHECK(dim_names(Step::q, false) == std::vector<std::string>{"query", "feature"});
  CHECK(dim_names(Step::k_heads, true) == std::vector<std::string>{"batch", "kv_head", "key", "d_k"});
  CHECK(dim_names(Step::head_outputs, false) == std::vector<std::string>{"head", "query", "d_v"});
  CHECK(step_info(Step::weights).values == ValueClass::probability);
  CHECK(step_info(Step::scores).values == ValueClass::signed_value);
  CHECK(is_score_step(Step::masked));
  CHECK_FALSE(is_score_step(Step::head_outputs));
  CHECK(is_position_step(Step::bias));
  CHECK_FALSE(is_position_step(Step::scaled));
}

TEST_CASE("The forward pass with no mistake is the naive engine's, bit for bit", "[pipeline][mistakes]") {
  const Problem p = worked_example(R"("mask": {"type": "causal"})");
  test::StepRecorder naive;
  run_naive<float>(p, naive);
  const ForwardRun<float> run = forward<float>(p, Mistake::none, DType::float32);
  for (const Step s : steps_of(p)) {
    INFO("step " << step_info(s).name);
    const Tensor<double> ours = cast<double>(run.computed[static_cast<std::size_t>(s)]);
    CHECK(ours.shape() == naive.at(s).shape());
    const std::vector<double> a(ours.values().begin(), ours.values().end());
    const std::vector<double> b(naive.at(s).values().begin(), naive.at(s).values().end());
    CHECK(a == b);
  }
}

TEST_CASE("The forward pass makes the catalogue's mistakes: no scale keeps the scores by hand",
          "[pipeline][mistakes]") {
  const Problem p = worked_example();
  const ForwardRun<double> none = forward<double>(p, Mistake::none, DType::float64);
  const ForwardRun<double> no_scale = forward<double>(p, Mistake::no_scale, DType::float64);
  const ForwardRun<double> twice = forward<double>(p, Mistake::scale_twice, DType::float64);
  const std::size_t scaled = static_cast<std::size_t>(Step::scaled);
  const std::vector<double> by_hand = {0, 4, 2, 4, 0, 2, 2, 2, 2};
  for (std::size_t k = 0; k < by_hand.size(); ++k) {
    CHECK(no_scale.computed[scaled].values()[k] == by_hand[k]);
    CHECK(none.computed[scaled].values()[k] == Approx(by_hand[k] / std::sqrt(2.0)));
    CHECK(twice.computed[scaled].values()[k] == Approx(by_hand[k] / 2));
  }
  // K not transposed: S = Q·K with K (3, 2) read as (2, 3) needs m == d_k, which 3 ≠ 2 refuses.
  CHECK_FALSE(changes_something(Mistake::k_untransposed, p));
  CHECK(changes_something(Mistake::w_k_transposed, p) == false);  // W_k is (4, 2): not square
}

TEST_CASE("diff tries the catalogue's mistakes in the order of their codes", "[pipeline][mistakes]") {
  const Problem p = worked_example(R"("mask": {"type": "causal"})");
  const std::vector<Mistake> tried = diagnosable(p);
  REQUIRE_FALSE(tried.empty());
  for (std::size_t k = 1; k < tried.size(); ++k)
    CHECK(*mistake_info(tried[k - 1]).code <= *mistake_info(tried[k]).code);
  CHECK(tried.front() == Mistake::no_scale);
  CHECK(std::find(tried.begin(), tried.end(), Mistake::no_mask) != tried.end());
  CHECK(std::find(tried.begin(), tried.end(), Mistake::shared_qkv) == tried.end());  // run --mistake only
  for (const MistakeInfo& m : all_mistakes()) CHECK(m.offered);
  CHECK(mistake_from_name("scale-twice") == std::nullopt);  // diff's alone: not offered by --mistake
}
