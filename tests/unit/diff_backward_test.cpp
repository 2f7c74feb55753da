// attn-trace diff on dumps of gradients (docs/diff.md, "Gradient dumps"): the names, the layouts, the
// verdicts and the diagnoses of the backward's mistakes. The expected values are worked out by hand (the
// worked example, where every value row is [1, 1]), or are the naive engine's own backward
// (engine/backward.hpp), which the plain backward of lessons/mistaken_backward.cpp that diff judges with does not
// share code with beyond the ops. tests/cli/diff_test.cpp runs PyTorch-made dumps through the binary.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "check/diff.hpp"
#include "engine/backward.hpp"
#include "engine/compare_backward.hpp"
#include "io/load.hpp"
#include "lessons/mistaken_backward.hpp"
#include "lessons/mistaken_forward.hpp"
#include "trace/record.hpp"
#include "trace/trace.hpp"

using namespace attn;

namespace {

const char* const cat_sat = R"({
  "tokens": ["The", "cat", "sat"],
  "X":   [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
  "W_q": [[1, 0], [0, 1], [1, 0], [0, 1]],
  "W_k": [[0, 1], [1, 0], [0, 1], [1, 0]],
  "W_v": [[1, 0], [0, 1], [0, 1], [1, 0]]
})";

// data/gqa.json with a bias: 4 query heads share 2 key/value heads, causal, n = m = 4, d_k = 2, W_o.
const char* const gqa = R"({
  "tokens": ["I", "like", "green", "tea"],
  "n_heads": 4,
  "n_kv_heads": 2,
  "mask": "causal",
  "X":   [[1, 0, 0, 0.5], [0, 1, 0.5, 0], [0, 0, 1, 0.5], [0.5, 0, 0, 1]],
  "W_q": [[1, 0, 0, 1, 1, 0, 0, -1],
          [0, 1, 1, 0, 0, 1, 1, 0],
          [1, 0, 0, -1, 0, 1, -1, 0],
          [0, 1, 1, 0, 1, 0, 0, 1]],
  "W_k": [[1, 0, 0, 1], [0, 1, 1, 0], [0.5, 0.5, 0, 1], [0, 0.5, 1, 0]],
  "W_v": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
  "W_o": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1],
          [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 0.5, 0], [0, 0, 0, 0.5]],
  "b_q": [0.1, 0, 0, 0.2, 0, 0, -0.1, 0]
})";

Problem gqa_problem() { return with_grad_seed(load_problem(gqa, "gqa.json"), 7); }

DumpedStep dumped(Step s, const Tensor<double>& t, DType dtype = DType::float64, std::string name = "") {
  if (name.empty()) name = std::string(step_info(s).name) + ".npy";
  return {s, name, t.shape(), std::vector<double>(t.values().begin(), t.values().end()), dtype};
}

// Every gradient of the naive engine's traced backward in float64, with the batch axis.
StepKeeper<double> naive_gradients(const Problem& p) {
  NullObserver none;
  StepKeeper<double> kept(none);
  run_naive_backward<double>(p, kept, DType::float64);
  return kept;
}

std::vector<DumpedStep> every_gradient(const Problem& p, const StepKeeper<double>& kept) {
  std::vector<DumpedStep> out;
  for (const Step s : gradient_steps_of(p)) out.push_back(dumped(s, kept[s]));
  return out;
}

std::vector<std::string> codes(const Divergence& d) {
  std::vector<std::string> c;
  for (const Diagnosis& g : d.diagnosis) c.emplace_back(to_string(g.code));
  return c;
}

const StepJudgement* row(const DiffResult& r, Step s) {
  for (const StepJudgement& j : r.steps)
    if (j.step == s) return &j;
  return nullptr;
}

}  // namespace

TEST_CASE("Hand-worked gradients of the worked example agree, and a wrong d_q differs", "[diff][backward]") {
  // dY = 1 and no W_o: dO_h = 1; every row of V is [1, 1], so dA = dO_h·Vᵀ = 2 everywhere, and
  // dS'' = A ⊙ (2 - 2·Σ_j A) = 0: the queries' gradient is 0.
  const Problem p = load_problem(cat_sat, "cat_sat.json");
  const Tensor<double> twos({1, 1, 3, 3}, 2.0), zeros({3, 2}, 0.0);
  const DiffResult ok = diff_dump(p, {dumped(Step::d_weights, twos), dumped(Step::d_q, zeros)}, DType::float64);
  CHECK_FALSE(ok.first.has_value());
  REQUIRE(ok.steps.size() == 2);
  CHECK(ok.steps[0].step == Step::d_weights);  // the backward's order: d_weights before d_q
  CHECK(ok.steps[1].step == Step::d_q);
  CHECK(ok.upstream == "ones");

  const Tensor<double> off({3, 2}, 0.1);
  const DiffResult bad = diff_dump(p, {dumped(Step::d_weights, twos), dumped(Step::d_q, off)}, DType::float64);
  REQUIRE(bad.first.has_value());
  CHECK(bad.first->step == Step::d_q);
  CHECK(bad.first->out_of_tolerance == 6);
  CHECK(bad.first->dumped == 0.1);
}

TEST_CASE("Every gradient of the naive engine's backward agrees, in float64 and rounded to float32",
          "[diff][backward]") {
  const Problem p = gqa_problem();
  const StepKeeper<double> kept = naive_gradients(p);
  const DiffResult r = diff_dump(p, every_gradient(p, kept), DType::float64);
  CHECK_FALSE(r.first.has_value());
  CHECK(r.steps.size() == gradient_steps_of(p).size());
  for (const StepJudgement& j : r.steps) {
    INFO(step_info(j.step).name);
    CHECK(j.verdict == Verdict::agrees);
  }
  CHECK(r.upstream == "grad_seed");
  // The float64 values rounded once to float32, judged as a float32 dump: within the rule.
  std::vector<DumpedStep> rounded = every_gradient(p, kept);
  for (DumpedStep& d : rounded) {
    for (double& x : d.values) x = static_cast<double>(static_cast<float>(x));
    d.dtype = DType::float32;
  }
  const DiffResult f = diff_dump(p, rounded, DType::float32);
  CHECK_FALSE(f.first.has_value());
}

TEST_CASE("The naive engine's float32 backward, dumped, agrees in float32", "[diff][backward]") {
  const Problem p = gqa_problem();
  NullObserver none;
  StepKeeper<double> kept(none);
  run_naive_backward<float>(p, kept, DType::float32);
  std::vector<DumpedStep> dump;
  for (const Step s : gradient_steps_of(p)) dump.push_back(dumped(s, kept[s], DType::float32));
  const DiffResult r = diff_dump(p, dump, DType::float32);
  CHECK_FALSE(r.first.has_value());
}

TEST_CASE("Each backward mistake of the catalogue is found at the first gradient it changes and named",
          "[diff][backward][mistakes]") {
  // The dumps are the plain backward with the mistake made; the expected step is the first gradient of
  // the backward's order that the mistake moves out of tolerance, and the code is the catalogue's.
  const Problem p = gqa_problem();
  const ForwardRun<double> f = forward<double>(p, Mistake::none, DType::float64);
  const BackwardRun<double> truth = backward<double>(p, f.carry, Mistake::none, DType::float64);
  const std::vector<Mistake> tried = diagnosable(p, true);
  REQUIRE(tried.size() == 9);  // every backward mistake changes something here: h > g, scale ≠ 1, n = m
  for (const Mistake m : tried) {
    DYNAMIC_SECTION(mistake_info(m).name) {
      const BackwardRun<double> made = backward<double>(p, f.carry, m, DType::float64);
      std::vector<DumpedStep> dump;
      std::optional<Step> first;
      for (const Step s : gradient_steps_of(p)) {
        dump.push_back(dumped(s, made.computed[static_cast<std::size_t>(s)]));
        const std::span<const double> a = made.computed[static_cast<std::size_t>(s)].values();
        const std::span<const double> b = truth.computed[static_cast<std::size_t>(s)].values();
        double largest = 0;
        for (std::size_t k = 0; k < a.size(); ++k) largest = std::max(largest, std::fabs(a[k] - b[k]));
        if (!first && largest > 1e-9) first = s;
      }
      REQUIRE(first.has_value());
      const DiffResult r = diff_dump(p, dump, DType::float64);
      REQUIRE(r.first.has_value());
      CHECK(r.first->step == *first);
      const std::vector<std::string> found = codes(*r.first);
      CHECK(std::find(found.begin(), found.end(), std::string(to_string(*mistake_info(m).code))) != found.end());
    }
  }
}

TEST_CASE("The scale left out of the backward is measured as 1/scale at d_scores", "[diff][backward][mistakes]") {
  const Problem p = gqa_problem();
  const ForwardRun<double> f = forward<double>(p, Mistake::none, DType::float64);
  const BackwardRun<double> made = backward<double>(p, f.carry, Mistake::backward_no_scale, DType::float64);
  const DiffResult r = diff_dump(p,
                                 {dumped(Step::d_scaled, made.computed[static_cast<std::size_t>(Step::d_scaled)]),
                                  dumped(Step::d_scores, made.computed[static_cast<std::size_t>(Step::d_scores)]),
                                  dumped(Step::d_q, made.computed[static_cast<std::size_t>(Step::d_q)])},
                                 DType::float64);
  REQUIRE(r.first.has_value());
  CHECK(r.first->step == Step::d_scores);
  REQUIRE(codes(*r.first) == std::vector<std::string>{"scale"});
  // d_k = 2: the dump's values are √2 = 1.41421 times ours.
  CHECK(r.first->diagnosis[0].finding.find("1.41421 times ours") != std::string::npos);
  const StepJudgement* d_q = row(r, Step::d_q);
  REQUIRE(d_q != nullptr);
  CHECK(d_q->verdict == Verdict::follows);
  CHECK(d_q->follows == Step::d_scores);
}

TEST_CASE("Gradients computed from a wrong upstream gradient follow it", "[diff][backward]") {
  const Problem p = gqa_problem();
  const ForwardRun<double> f = forward<double>(p, Mistake::none, DType::float64);
  BackwardRun<double> truth = backward<double>(p, f.carry, Mistake::none, DType::float64);
  Tensor<double> dA = truth.computed[static_cast<std::size_t>(Step::d_weights)];
  dA(0, 1, 2, 1) += 0.5;  // head 1, query "green", key "like": allowed by the causal mask
  GivenSteps given;
  given[static_cast<std::size_t>(Step::d_weights)] = dA;
  const BackwardRun<double> after = backward<double>(p, f.carry, Mistake::none, DType::float64, given);
  std::vector<DumpedStep> dump = {dumped(Step::d_weights, dA)};
  for (const Step s : {Step::d_masked, Step::d_scores, Step::d_q, Step::d_k, Step::d_X, Step::d_v})
    dump.push_back(dumped(s, after.computed[static_cast<std::size_t>(s)]));
  const DiffResult r = diff_dump(p, dump, DType::float64);
  REQUIRE(r.first.has_value());
  CHECK(r.first->step == Step::d_weights);
  CHECK(r.first->out_of_tolerance == 1);
  for (const Step s : {Step::d_masked, Step::d_scores, Step::d_q, Step::d_k, Step::d_X}) {
    const StepJudgement* j = row(r, s);
    REQUIRE(j != nullptr);
    INFO(step_info(s).name);
    CHECK(j->verdict == Verdict::follows);
    CHECK(j->follows.has_value());
  }
  // dV = Aᵀ·dO does not read dA: untouched, it agrees.
  CHECK(row(r, Step::d_v)->verdict == Verdict::agrees);
}

TEST_CASE("PyTorch-style gradient names resolve to their steps", "[diff][backward]") {
  CHECK(gradient_alias("grad_q") == Step::d_q);
  CHECK(gradient_alias("q.grad") == Step::d_q);
  CHECK(gradient_alias("dq") == Step::d_q);
  CHECK(gradient_alias("k.grad") == Step::d_k);
  CHECK(gradient_alias("dv") == Step::d_v);
  CHECK(gradient_alias("x.grad") == Step::d_X);
  CHECK(gradient_alias("dx") == Step::d_X);
  CHECK(gradient_alias("grad_output") == Step::d_output);
  CHECK(gradient_alias("dy") == Step::d_output);
  CHECK(gradient_alias("q_proj.weight.grad") == Step::d_W_q);
  CHECK(gradient_alias("out_proj.weight.grad") == Step::d_W_o);
  CHECK(gradient_alias("W_v.grad") == Step::d_W_v);
  CHECK(gradient_alias("q_proj.bias.grad") == Step::d_b_q);
  CHECK_FALSE(gradient_alias("q").has_value());
  CHECK_FALSE(gradient_alias("grad").has_value());
  // No alias is a step's own name, and each is listed once.
  for (const auto& [alias, step] : gradient_aliases()) {
    CHECK_FALSE(step_from_name(alias).has_value());
    CHECK(is_gradient_step(step));
  }
}

TEST_CASE("Gradients dumped tokens first, without the batch axis, or in the out_in layout are read",
          "[diff][backward]") {
  const Problem p = gqa_problem();
  const StepKeeper<double> kept = naive_gradients(p);
  // d_v_heads (1, 2, 4, 2) tokens first and without the batch axis: (4, 2, 2).
  const Tensor<double>& dV = kept[Step::d_v_heads];
  Tensor<double> tokens_first({4, 2, 2});
  for (std::size_t kv = 0; kv < 2; ++kv)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t c = 0; c < 2; ++c) tokens_first(j, kv, c) = dV(0, kv, j, c);
  const Tensor<double>& dX = kept[Step::d_X];
  const Tensor<double> dX_unbatched({4, 4}, std::vector<double>(dX.values().begin(), dX.values().end()));
  const DiffResult r =
      diff_dump(p, {dumped(Step::d_v_heads, tokens_first), dumped(Step::d_X, dX_unbatched)}, DType::float64);
  CHECK_FALSE(r.first.has_value());
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].layout.order == HeadOrder::tokens_first);
  CHECK(r.steps[0].layout.dims == std::vector<std::string>{"key", "kv_head", "d_v"});
  CHECK_FALSE(r.steps[1].layout.batch_axis);

  // A weight's gradient in nn.Linear's layout, (out, in), for an out_in input; the other way round is refused.
  Problem out_in = p;
  out_in.layout = Layout::out_in;
  const StepKeeper<double> kept_out_in = naive_gradients(out_in);
  REQUIRE(kept_out_in[Step::d_W_q].shape() == Shape{8, 4});
  const DiffResult w = diff_dump(out_in, {dumped(Step::d_W_q, kept_out_in[Step::d_W_q])}, DType::float64);
  CHECK_FALSE(w.first.has_value());
  CHECK(w.steps[0].dumped_shape == Shape{8, 4});
  CHECK(layouts_that_fit(Step::d_W_q, out_in, {4, 8}).empty());
  CHECK(layouts_that_fit(Step::d_W_q, p, {4, 8}).size() == 1);
}

TEST_CASE("dY comes from the input, else the dump's d_output, else 1 everywhere", "[diff][backward]") {
  Problem p = load_problem(gqa, "gqa.json");
  // Without the input's dY and without d_output: 1 everywhere, what the naive engine uses too.
  const StepKeeper<double> ones = naive_gradients(p);
  const DiffResult a = diff_dump(p, {dumped(Step::d_q, ones[Step::d_q])}, DType::float64);
  CHECK(a.upstream == "ones");
  CHECK_FALSE(a.first.has_value());
  // A dumped d_output defines dY: gradients made with a seeded dY agree given it.
  const Problem seeded = with_grad_seed(p, 3);
  const StepKeeper<double> drawn = naive_gradients(seeded);
  const DiffResult b = diff_dump(
      p, {dumped(Step::d_output, drawn[Step::d_output]), dumped(Step::d_q, drawn[Step::d_q])}, DType::float64);
  CHECK(b.upstream == "dump");
  CHECK_FALSE(b.first.has_value());
  CHECK(std::any_of(b.notes.begin(), b.notes.end(),
                    [](const std::string& n) { return n.find("the dump's own d_output") != std::string::npos; }));
  // The input's (here --grad-seed's) dY wins: the dump's d_output of 1 everywhere then differs.
  const DiffResult c = diff_dump(seeded, {dumped(Step::d_output, ones[Step::d_output])}, DType::float64);
  CHECK(c.upstream == "grad_seed");
  REQUIRE(c.first.has_value());
  CHECK(c.first->step == Step::d_output);
}

TEST_CASE("The GQA sum and the transposes are tried only where they change something", "[diff][backward][mistakes]") {
  const Problem cat = load_problem(cat_sat, "cat_sat.json");  // h = g = 1, n = m = 3, scale 1/√2
  CHECK_FALSE(changes_something(Mistake::gqa_first_head, cat));
  CHECK_FALSE(changes_something(Mistake::gqa_last_head, cat));
  CHECK(changes_something(Mistake::backward_no_scale, cat));
  CHECK(changes_something(Mistake::dv_untransposed, cat));
  const Problem g = load_problem(gqa, "gqa.json");
  CHECK(changes_something(Mistake::gqa_first_head, g));
  // No backward mistake is tried on a forward step, nor a forward one on a gradient.
  for (const Mistake m : diagnosable(g)) CHECK_FALSE(mistake_info(m).backward);
  for (const Mistake m : diagnosable(g, true)) CHECK(mistake_info(m).backward);
  for (const Mistake m : diagnosable(g, true)) CHECK_FALSE(mistake_info(m).offered);
}

TEST_CASE("Our own gradients of scores near the largest double agree: a zero magnitude's tolerance is not NaN",
          "[diff][backward][bounds]") {
  // tests/data/fuzz/gradient_bound_overflow.json: logits of about 1e308 made the rule's count infinite,
  // and inf · 0 on a gradient whose magnitude is 0 gave a NaN tolerance that nothing is within.
  const Problem p = load_problem_file(ATTN_SOURCE_DIR "/tests/data/fuzz/gradient_bound_overflow.json");
  const StepKeeper<double> kept = naive_gradients(p);
  const DiffResult r = diff_dump(p, every_gradient(p, kept), DType::float64);
  CHECK_FALSE(r.first.has_value());
  for (const StepJudgement& j : r.steps) {
    INFO(step_info(j.step).name);
    CHECK(j.verdict == Verdict::agrees);
  }
}
