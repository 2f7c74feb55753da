#pragma once
// The pipeline, described once: every step of attention by its stable name (docs/trace-format.md),
// with what it is computed from, its shape as a function of the problem, what its values are, and which
// engine forms it whole. The trace, diff, explain, the pictures and the docs all read this table;
// adding a step is one row here (steps.cpp) and its op (docs/architecture.md, "Adding a step").

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/problem.hpp"
#include "model/score_chain.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// In the order of the pipeline. q_rot and k_rot are steps of an input with `rope` only, capped of an input
// with `softcap` only, bias of an input with `alibi` only, sink_weights of one with `sinks`, dropped of one
// with `dropout` (step_applies); every other forward step is in every trace. The backward steps
// follow (`d_` + what each is the gradient of, in the order of docs/backward.md), each where it applies.
enum class Step {
  q,
  k,
  v,
  q_heads,
  k_heads,
  v_heads,
  q_rot,
  k_rot,
  scores,
  scaled,
  capped,
  bias,
  masked,
  weights,
  sink_weights,
  dropped,
  head_outputs,
  concat,
  output,
  // the backward pass: ∂L/∂ each of these, L = Σ Y ⊙ dY
  d_output,
  d_concat,
  d_head_outputs,
  d_dropped,
  d_weights,
  d_v_heads,
  d_masked,
  d_capped,
  d_scaled,
  d_scores,
  d_q_rot,
  d_k_rot,
  d_q_heads,
  d_k_heads,
  d_q,
  d_k,
  d_v,
  d_X,
  d_context,
  d_W_q,
  d_W_k,
  d_W_v,
  d_W_o,
  d_b_q,
  d_b_k,
  d_b_v,
  d_b_o,
  d_sinks
};

// A step's place in the table, and in every array kept by step (one value or one row per step).
constexpr std::size_t slot(Step s) { return static_cast<std::size_t>(s); }

// The forward steps, q … output: the first step_count of the table, in every forward trace.
inline constexpr std::size_t step_count = 19;
// The backward steps, d_output … d_sinks, after them.
inline constexpr std::size_t gradient_step_count = 28;
inline constexpr std::size_t table_size = step_count + gradient_step_count;

// What each axis of a step is, so a printer knows which labels go where.
enum class Axis { query, key, head, kv_head, feature };

// One axis of a step with its extent: the token and head axes, and the feature axis by its role.
enum class Dim {
  query,    // n
  key,      // m
  head,     // h (1 when one head was kept)
  kv_head,  // g (1 when one head was kept)
  d_k,      // one head's query/key width
  d_v,      // one head's value width
  d_out,    // the output's width
  q_width,  // h·d_k: every query head side by side
  k_width,  // g·d_k
  v_width,  // g·d_v
  o_width,  // h·d_v: the heads' outputs side by side
  d_model,  // the width of X
  d_ctx,    // the width of the context (d_model for self-attention)
};

// What a step's values can be, for the colour that shows them (render/draw/colormap.hpp).
enum class ValueClass {
  signed_value,  // any real number: a diverging map about 0
  non_negative,  // 0 or more: a sequential map from 0
  probability,   // in [0, 1], rows summing to 1: a sequential map from 0 to 1
};

// What computes a step from its inputs: diff's error model and the pictures read it.
enum class Op {
  projection,    // a row of inputs times a weight matrix, plus a bias
  relayout,      // the same values in another order: nothing computed
  rotation,      // RoPE: each pair of features turned by an angle
  dot_products,  // Q·Kᵀ over d_k
  scale,         // times one number
  add_bias,      // plus a number per (query, key)
  softcap,       // c·tanh(x/c) of each number: a smooth cap at ±c
  mask,          // −∞ where forbidden: nothing computed
  softmax,       // exp and a sum along each row
  weighted_sum,  // A·V over the keys
  dropout,       // kept × 1/(1 − p), 0 where dropped: the keep mask of model/dropout.hpp
  // the backward pass's own
  softmax_backward,  // A ⊙ (dA − rowsum(dA ⊙ A)) along each row
  input_gradient,    // dY·Wᵀ: a row of gradients back through a weight matrix (summed over the paths)
  weight_gradient,   // Xᵀ·dY: a weight's gradient, summed over every token of every batch item
  bias_gradient,     // Σ dY: a bias's gradient, summed over every token of every batch item
};

// Which inputs have the step: every one, or only those with RoPE, the step's stage of the score chain (its
// `feature` in model/score_chain.hpp: ALiBi, soft-capping, sinks, dropout), a context (cross-attention), an
// output projection, or the bias it is the gradient of.
enum class Needs { always, rope, chain, cross, w_o, b_q, b_k, b_v, b_o };

// Which pass computes the step.
enum class Pass { forward, backward };

struct StepInfo {
  Step step;
  std::string_view name;         // "scores"
  std::string_view formula;      // "S = Q·Kᵀ"
  std::string_view description;  // one sentence: what it means
  std::vector<Dim> dims;         // its axes, without the batch axis
  std::vector<Step> inputs;      // the steps it is computed from; an optional one stands in for its own input
  Op op;
  ValueClass values = ValueClass::signed_value;
  Needs needs = Needs::always;
  bool tiled = false;        // the flash pass never forms it whole: its tiles hold it piece by piece (n × m)
  std::vector<Axis> axes{};  // dims as a printer labels them (filled from dims)
  Pass pass = Pass::forward;
  // A parameter's gradient (d_W_q … d_b_o): no batch axis (summed over the batch), and a weight's in the
  // input file's layout (out_in swaps its two axes).
  bool parameter = false;
  // The formula and the meaning as they apply to one input (bias terms only when present, the scale
  // as set, the mask by name); nullptr: `formula` and `description` as they are.
  std::string (*formula_for)(const Problem&) = nullptr;
  std::string (*description_for)(const Problem&) = nullptr;
  // The stage of the score chain whose step this is, or whose input alone has it (d_capped: softcap).
  std::optional<Stage> stage{};
};

// What the step table adds to the chain's description of each stage's step (model/score_chain.hpp: its
// name, formula, meaning and the input's key that turns it on): the op that computes it and the class of
// its values. Entry k is Stage k; steps.cpp makes the stages' rows of the table from the two (and checks,
// with tests/unit/steps_test.cpp, that each entry's step is the stage's).
struct StageStep {
  Stage stage;
  Step step;  // named as the chain names it (StageInfo::step)
  Op op;
  ValueClass values;
};
inline constexpr auto stage_steps = std::to_array<StageStep>({
    {Stage::scale, Step::scaled, Op::scale, ValueClass::signed_value},
    {Stage::softcap, Step::capped, Op::softcap, ValueClass::signed_value},
    {Stage::alibi, Step::bias, Op::add_bias, ValueClass::signed_value},
    {Stage::mask, Step::masked, Op::mask, ValueClass::signed_value},
    {Stage::sinks, Step::sink_weights, Op::softmax, ValueClass::probability},
    {Stage::dropout, Step::dropped, Op::dropout, ValueClass::non_negative},
});
static_assert(stage_steps.size() == stage_count, "one entry per stage of the score chain");
static_assert(
    [] {
      for (std::size_t k = 0; k < stage_count; ++k)
        if (static_cast<std::size_t>(stage_steps[k].stage) != k) return false;
      return true;
    }(),
    "entry k of stage_steps is Stage k");

// The names of the table's classes, as `attn-trace steps --json` writes them: "dot_products",
// "probability", "rope" ("always" for a step of every input).
std::string_view to_string(Op op);
std::string_view to_string(ValueClass values);
std::string_view to_string(Needs needs);
// What the step needs, by name: "rope", the chain's feature ("softcap"), "context", "always", …
std::string_view needs_name(const StepInfo& info);

std::string_view to_string(Pass pass);

const StepInfo& step_info(Step step);
// The forward steps, q … output, in pipeline order.
const std::array<Step, step_count>& all_steps();
// The backward steps, d_output … d_b_o, in the order the backward pass reports them.
const std::array<Step, gradient_step_count>& gradient_steps();
// Every step of either pass by its name.
std::optional<Step> step_from_name(std::string_view name);

// The step a stage of the score chain makes (model/score_chain.hpp): scaled for the scale, …, dropped for
// dropout; and the stage that makes a step, if one does.
Step stage_step(Stage stage);
std::optional<Stage> step_stage(Step step);

// d_output … d_b_o.
bool is_gradient_step(Step step);

// The n × m steps (scores, scaled, capped, bias, masked, weights): the matrices the flash pass never forms whole;
// its tiles hold them piece by piece.
bool is_score_step(Step step);

// The forward steps that only some inputs have: q_rot and k_rot (RoPE), capped (softcap), bias (ALiBi),
// sink_weights (sinks), dropped (dropout).
bool is_position_step(Step step);

// The steps a decode step computes for its new token alone (q … k_rot); the rest are its row against the cache.
inline bool is_decode_token_step(Step step) { return step <= Step::k_rot; }

// Does `later` use the value of `earlier`, directly or through other steps?
bool depends_on(Step later, Step earlier);

// What a trace of `p` holds, from the table's `needs` and `inputs`.
// Whether `p` has `step`: q_rot and k_rot with `rope`, bias with `alibi`, every other step always.
bool step_applies(Step step, const Problem& p);
// The steps of `p`, in pipeline order: every forward step that applies to this input.
std::vector<Step> steps_of(const Problem& p);
// The backward steps of `p` (run --backward), in the order the backward pass reports them.
std::vector<Step> gradient_steps_of(const Problem& p);
// The steps `step` of `p` is computed from directly: its inputs that apply, without one that reaches it
// only through another (with RoPE, scores reads q_rot and k_rot, not q_heads and k_heads).
std::vector<Step> inputs_of(Step step, const Problem& p);

// The formula of `step` as it applies to `p` (bias terms only when present, and so on).
std::string step_formula(Step step, const Problem& p);
// Its one-sentence meaning for `p`.
std::string step_description(Step step, const Problem& p);

// The dimension names of docs/trace-format.md's `dims`: "batch" when `batched`, "query", "key", "head",
// "kv_head", then the feature axis by its role ("d_k", "d_v", "d_out", "feature"). A parameter's gradient
// has no batch axis, and a weight's has its two axes swapped in the out_in layout.
std::vector<std::string> dim_names(Step step, bool batched, Layout layout = Layout::in_out);

// The shape of `step` for `p`: with a leading batch axis when `batch_axis` (never for a parameter's
// gradient), head axes of extent 1 when only one head was kept (`one_head`), and a weight's gradient in
// the input's layout.
Shape step_shape(Step step, const Problem& p, bool batch_axis, bool one_head = false);

}  // namespace attn
