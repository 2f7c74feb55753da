// The walks over the rows of engine/rows.hpp, and what the naive engine's walk relies on, on the harness's
// seeded problems (row_cases.hpp: every `Needs` of the step table):
//   - each row's forward reads no step but those the step table names (inputs_of), and its backward no
//     forward value but those its row saves: the naive engine lets every other value go;
//   - each row's backward sends only to the steps it read and to the leaves;
//   - the naive engine, forward and backward, gives the walk's values bit for bit, reports every step in
//     the trace's order (the pipeline's, then the gradients' of gradient_steps_of), and holds as many
//     score-sized buffers at once as counted by hand below.

#include <algorithm>
#include <cstddef>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/backward.hpp"
#include "engine/naive.hpp"
#include "engine/rows.hpp"
#include "observe/observer.hpp"
#include "row_cases.hpp"
#include "support.hpp"

namespace attn {

namespace {

using row_cases::backward_walk;
using row_cases::forward_walk;
using test::check_close;

bool contains(const std::vector<Step>& steps, Step s) {
  return std::find(steps.begin(), steps.end(), s) != steps.end();
}

}  // namespace

TEST_CASE("Each row's forward reads only its inputs_of, its backward only what it saves and sends only to them",
          "[rows]") {
  std::mt19937 rng(20261205);
  for (const row_cases::Case& c : row_cases::cases()) {
    const Problem& p = c.p;
    const Inputs<double> in(p, DType::float64);
    const RowContext<double> ctx{p, in};
    const ForwardValues<double> x = forward_walk<double>(p, in);
    for (const Step s : steps_of(p)) {
      INFO(c.name << ": " << step_info(s).name);
      const RowMath<double>& row = row_of<double>(s);
      ForwardValues<double> read;
      for (const Step t : inputs_of(s, p)) read[slot(t)] = x[slot(t)];
      check_close("the forward from its inputs_of alone", row.forward(read, ctx), x[slot(s)], 0);

      const std::vector<Step> saved = row.saves(p);
      ForwardValues<double> kept;
      for (const Step t : saved) {
        CHECK(step_applies(t, p));
        kept[slot(t)] = x[slot(t)];
      }
      const Tensor<double> dy = test::random_tensor(rng, x[slot(s)].shape());
      Gradients<double> all, only;
      row.backward(dy, x, ctx, all);
      row.backward(dy, kept, ctx, only);
      for (std::size_t k = 0; k < table_size; ++k) {
        const Step into = static_cast<Step>(k);
        check_close(fmt::format("sent to {} from what it saves alone", step_info(into).name), only[k], all[k], 0);
        if (k < step_count && !all[k].empty()) CHECK(contains(inputs_of(s, p), into));
      }
    }
  }
}

TEST_CASE("The naive engine is the walk over the rows: the same values, reported in the trace's order", "[rows]") {
  for (const row_cases::Case& c : row_cases::cases()) {
    INFO(c.name);
    const Problem& p = c.p;
    const Inputs<double> in(p, DType::float64);
    const ForwardValues<double> x = forward_walk<double>(p, in);
    std::vector<Step> kept_order;
    const Gradients<double> d =
        backward_walk<double>(p, in, x, upstream_gradient<double>(p, DType::float64), &kept_order);

    // what the walk keeps comes in the table's order of gradients
    CHECK(kept_order == gradient_steps_of(p));

    test::StepRecorder forward_only;
    const AttentionResult<double> y = run_naive<double>(p, forward_only, DType::float64);
    check_close("the output", y.output, x[slot(Step::output)], 0);
    CHECK(forward_only.order() == steps_of(p));
    for (const Step s : forward_only.order()) check_close(step_info(s).name, forward_only.at(s), x[slot(s)], 0);

    test::StepRecorder both;
    const AttentionResult<double> yb = run_naive_backward<double>(p, both, DType::float64);
    check_close("the output", yb.output, x[slot(Step::output)], 0);
    std::vector<Step> want = steps_of(p);
    for (const Step g : gradient_steps_of(p)) want.push_back(g);
    CHECK(both.order() == want);
    for (const Step s : both.order())
      check_close(step_info(s).name, both.at(s), is_gradient_step(s) ? d[slot(s)] : x[slot(s)], 0);
  }
}

// Counted by hand from the rows' reads and saves (one buffer is B·h·n·m values):
// forward alone, two at a time: each score step is made while the one it reads is held, then that one
// goes. Backward: the weights are kept for the softmax's backward, and the weighted sum's backward makes
// dA beside them; the softmax's backward makes dS'' beside both: three (with dropout, A_drop goes once
// dV is made, before dA is). With softcap the capped scores are kept for the cap's slope: four.
TEST_CASE("The naive engine holds each value until its last reader: the score buffers counted by hand", "[rows]") {
  for (const row_cases::Case& c : row_cases::cases()) {
    INFO(c.name);
    const Problem& p = c.p;
    const std::size_t buffer = p.B * p.h * p.n * p.m * sizeof(double);
    NullObserver none;
    CHECK(run_naive<double>(p, none, DType::float64).peak_score_bytes == 2 * buffer);
    const std::size_t backward = p.softcap ? 4 : 3;
    CHECK(run_naive_backward<double>(p, none, DType::float64).peak_score_bytes == backward * buffer);
  }
}

}  // namespace attn
