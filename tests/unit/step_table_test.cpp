// The step table's rows of the score chain's steps, made from the chain (model/score_chain.hpp) and
// stage_steps (observe/steps.hpp): each must say what the rows written by hand said before them. The
// expected values are those hand-written rows (name, inputs, op, value class, needs, dims, tiled), so a
// change in how the rows are made that changes what `attn-trace steps` reports fails here.

#include <catch2/catch.hpp>

#include <string_view>
#include <vector>

#include "model/problem.hpp"
#include "model/score_chain.hpp"
#include "observe/steps.hpp"

namespace {

using attn::Dim;
using attn::Needs;
using attn::Op;
using attn::Step;
using attn::ValueClass;

struct Expected {
  Step step;
  std::string_view name;
  std::vector<Step> inputs;
  Op op;
  ValueClass values;
  std::string_view needs;
  std::vector<Dim> dims;
  bool tiled;
};

}  // namespace

TEST_CASE("the chain's steps: each row made from the chain says what the hand-written row said", "[steps]") {
  using S = Step;
  const std::vector<Dim> nm{Dim::head, Dim::query, Dim::key};
  const std::vector<Expected> expected{
      {S::scaled, "scaled", {S::scores}, Op::scale, ValueClass::signed_value, "always", nm, true},
      {S::capped, "capped", {S::scaled}, Op::softcap, ValueClass::signed_value, "softcap", nm, true},
      {S::bias, "bias", {S::scaled, S::capped}, Op::add_bias, ValueClass::signed_value, "alibi", nm, true},
      {S::masked, "masked", {S::scaled, S::capped, S::bias}, Op::mask, ValueClass::signed_value, "always", nm, true},
      {S::sink_weights,
       "sink_weights",
       {S::masked},
       Op::softmax,
       ValueClass::probability,
       "sinks",
       {Dim::head, Dim::query},
       false},
      {S::dropped, "dropped", {S::weights}, Op::dropout, ValueClass::non_negative, "dropout", nm, true},
  };
  for (const Expected& e : expected) {
    const attn::StepInfo& info = attn::step_info(e.step);
    INFO(e.name);
    CHECK(info.step == e.step);
    CHECK(info.name == e.name);
    CHECK(info.inputs == e.inputs);
    CHECK(info.op == e.op);
    CHECK(info.values == e.values);
    CHECK(attn::needs_name(info) == e.needs);
    CHECK(info.dims == e.dims);
    CHECK(info.tiled == e.tiled);
    CHECK(info.pass == attn::Pass::forward);
    REQUIRE(attn::step_stage(e.step).has_value());
    CHECK(attn::stage_step(*attn::step_stage(e.step)) == e.step);
    CHECK(attn::step_from_name(e.name) == e.step);
  }
}

TEST_CASE("the gradients a stage alone has need that stage's input, by its key", "[steps]") {
  CHECK(attn::needs_name(attn::step_info(Step::d_capped)) == "softcap");
  CHECK(attn::needs_name(attn::step_info(Step::d_dropped)) == "dropout");
  CHECK(attn::needs_name(attn::step_info(Step::d_sinks)) == "sinks");
  CHECK(attn::needs_name(attn::step_info(Step::d_scaled)) == "always");
  CHECK(attn::needs_name(attn::step_info(Step::q_rot)) == "rope");
  CHECK(attn::needs_name(attn::step_info(Step::d_context)) == "context");

  attn::Problem p;
  CHECK_FALSE(attn::step_applies(Step::d_capped, p));
  CHECK_FALSE(attn::step_applies(Step::capped, p));
  CHECK(attn::step_applies(Step::masked, p));
  p.softcap = 30.0;
  CHECK(attn::step_applies(Step::d_capped, p));
  CHECK(attn::step_applies(Step::capped, p));
}
