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

#include "tensor/tensor.hpp"

namespace attn {

struct Problem;

// In the order of the pipeline. q_rot and k_rot are steps of an input with `rope` only, bias of an input
// with `alibi` only (step_applies); every other step is in every trace.
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
  bias,
  masked,
  weights,
  head_outputs,
  concat,
  output
};

inline constexpr std::size_t step_count = 16;

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
  mask,          // −∞ where forbidden: nothing computed
  softmax,       // exp and a sum along each row
  weighted_sum,  // A·V over the keys
};

// Which inputs have the step: every one, or only those with RoPE or ALiBi.
enum class Needs { always, rope, alibi };

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
  // The formula and the meaning as they apply to one input (bias terms only when present, the scale
  // as set, the mask by name); nullptr: `formula` and `description` as they are.
  std::string (*formula_for)(const Problem&) = nullptr;
  std::string (*description_for)(const Problem&) = nullptr;
};

// The names of the table's classes, as `attn-trace steps --json` writes them: "dot_products",
// "probability", "rope" ("always" for a step of every input).
std::string_view to_string(Op op);
std::string_view to_string(ValueClass values);
std::string_view to_string(Needs needs);

const StepInfo& step_info(Step step);
const std::array<Step, step_count>& all_steps();
std::optional<Step> step_from_name(std::string_view name);

// The n × m steps (scores, scaled, bias, masked, weights): the matrices the flash pass never forms whole;
// its tiles hold them piece by piece.
bool is_score_step(Step step);

// The steps that only some inputs have: q_rot and k_rot (RoPE), bias (ALiBi).
bool is_position_step(Step step);

// Does `later` use the value of `earlier`, directly or through other steps?
bool depends_on(Step later, Step earlier);

// The formula of `step` as it applies to `p` (bias terms only when present, and so on).
std::string step_formula(Step step, const Problem& p);
// Its one-sentence meaning for `p`.
std::string step_description(Step step, const Problem& p);

// The dimension names of docs/trace-format.md's `dims`: "batch" when `batched`, "query", "key", "head",
// "kv_head", then the feature axis by its role ("d_k", "d_v", "d_out", "feature").
std::vector<std::string> dim_names(Step step, bool batched);

// The shape of `step` for `p`: with a leading batch axis when `batch_axis`, and head axes of extent 1
// when only one head was kept (`one_head`).
Shape step_shape(Step step, const Problem& p, bool batch_axis, bool one_head = false);

}  // namespace attn
