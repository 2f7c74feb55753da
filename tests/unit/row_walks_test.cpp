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

#include "engine/backward.hpp"
#include "engine/naive.hpp"
#include "engine/rows.hpp"
#include "observe/observer.hpp"
#include "row_cases.hpp"

namespace attn {

namespace {

bool same(const Tensor<double>& a, const Tensor<double>& b) {
  if (a.shape() != b.shape()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double x = a.values()[k], y = b.values()[k];
    if (!(x == y || (x != x && y != y))) return false;
  }
  return true;
}

bool contains(const std::vector<Step>& steps, Step s) {
  return std::find(steps.begin(), steps.end(), s) != steps.end();
}

// Every step of `p` over the rows in float64, kept whole.
ForwardValues<double> forward_walk(const Problem& p, const Inputs<double>& in) {
  const RowContext<double> ctx{p, in};
  ForwardValues<double> x;
  walk_forward<double>(
      p, x, [&ctx](Step s, const ForwardValues<double>& v) { return row_of<double>(s).forward(v, ctx); },
      [](Step, Tensor<double> t) { return t; });
  return x;
}

// Every gradient of `p` over the rows in float64, by gradient step, and the order they were kept in.
Gradients<double> backward_walk(const Problem& p, const Inputs<double>& in, const ForwardValues<double>& x,
                                std::vector<Step>& order) {
  const RowContext<double> ctx{p, in};
  Gradients<double> d, kept;
  d[slot(Step::output)] = upstream_gradient<double>(p, DType::float64);
  walk_backward<double>(
      p, x, d,
      [&ctx](Step s, const Tensor<double>& dy, const ForwardValues<double>& v, Gradients<double>& into) {
        row_of<double>(s).backward(dy, v, ctx, into);
      },
      [&](Step g, Tensor<double> t) {
        order.push_back(g);
        kept[slot(g)] = t;
        return t;
      });
  return kept;
}

// Keeps every step an engine reports, in the order reported.
class Recorder final : public Observer {
 public:
  bool wants(Step) const override { return true; }
  void on(Step step, const Tensor<float>& value) override { seen.push_back({step, cast<double>(value)}); }
  void on(Step step, const Tensor<double>& value) override { seen.push_back({step, value}); }

  struct Seen {
    Step step;
    Tensor<double> value;
  };
  std::vector<Seen> seen;
};

Tensor<double> random_like(const Tensor<double>& t, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Tensor<double> r(t.shape());
  for (double& v : r.values()) v = u(rng);
  return r;
}

}  // namespace

TEST_CASE("Each row's forward reads only its inputs_of, its backward only what it saves and sends only to them",
          "[rows]") {
  std::mt19937 rng(20261205);
  for (const row_cases::Case& c : row_cases::cases()) {
    const Problem& p = c.p;
    const Inputs<double> in(p, DType::float64);
    const RowContext<double> ctx{p, in};
    const ForwardValues<double> x = forward_walk(p, in);
    for (const Step s : steps_of(p)) {
      INFO(c.name << ": " << step_info(s).name);
      const RowMath<double>& row = row_of<double>(s);
      ForwardValues<double> read;
      for (const Step t : inputs_of(s, p)) read[slot(t)] = x[slot(t)];
      CHECK(same(row.forward(read, ctx), x[slot(s)]));

      const std::vector<Step> saved = row.saves(p);
      ForwardValues<double> kept;
      for (const Step t : saved) {
        CHECK(step_applies(t, p));
        kept[slot(t)] = x[slot(t)];
      }
      const Tensor<double> dy = random_like(x[slot(s)], rng);
      Gradients<double> all, only;
      row.backward(dy, x, ctx, all);
      row.backward(dy, kept, ctx, only);
      for (std::size_t k = 0; k < table_size; ++k) {
        const Step into = static_cast<Step>(k);
        INFO("sent to " << step_info(into).name);
        CHECK(same(all[k], only[k]));
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
    const ForwardValues<double> x = forward_walk(p, in);
    std::vector<Step> kept_order;
    const Gradients<double> d = backward_walk(p, in, x, kept_order);

    // what the walk keeps comes in the table's order of gradients
    CHECK(kept_order == gradient_steps_of(p));

    Recorder forward_only;
    const AttentionResult<double> y = run_naive<double>(p, forward_only, DType::float64);
    CHECK(same(y.output, x[slot(Step::output)]));
    std::vector<Step> order;
    for (const Recorder::Seen& seen : forward_only.seen) {
      INFO(step_info(seen.step).name);
      order.push_back(seen.step);
      CHECK(same(seen.value, x[slot(seen.step)]));
    }
    CHECK(order == steps_of(p));

    Recorder both;
    const AttentionResult<double> yb = run_naive_backward<double>(p, both, DType::float64);
    CHECK(same(yb.output, x[slot(Step::output)]));
    std::vector<Step> want = steps_of(p), got;
    for (const Step g : gradient_steps_of(p)) want.push_back(g);
    for (const Recorder::Seen& seen : both.seen) {
      INFO(step_info(seen.step).name);
      got.push_back(seen.step);
      const Tensor<double>& value = is_gradient_step(seen.step) ? d[slot(seen.step)] : x[slot(seen.step)];
      CHECK(same(seen.value, value));
    }
    CHECK(got == want);
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
