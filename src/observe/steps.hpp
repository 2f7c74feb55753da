#pragma once
// The steps of attention, by their stable names (docs/trace-format.md): the same name in this enum, the
// terminal heading, the JSON trace, `--steps` and the docs.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// In the order of the pipeline. q_rot and k_rot are steps of an input with `rope` only, bias of an input
// with `alibi` only (trace/trace.hpp: step_applies); every other step is in every trace.
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

struct StepInfo {
  Step step;
  std::string_view name;         // "scores"
  std::string_view formula;      // "S = Q·Kᵀ"
  std::string_view description;  // one sentence: what it means
  std::vector<Axis> axes;        // without the batch axis
};

const StepInfo& step_info(Step step);
const std::array<Step, step_count>& all_steps();
std::optional<Step> step_from_name(std::string_view name);

// The n × m steps (scores, scaled, bias, masked, weights): the matrices the flash pass never forms whole;
// its tiles hold them piece by piece.
constexpr bool is_score_step(Step step) {
  return step == Step::scores || step == Step::scaled || step == Step::bias || step == Step::masked ||
         step == Step::weights;
}

// The steps that only some inputs have: q_rot and k_rot (RoPE), bias (ALiBi).
constexpr bool is_position_step(Step step) { return step == Step::q_rot || step == Step::k_rot || step == Step::bias; }

// The dimension names of docs/trace-format.md's `dims`: "query", "key", "head", "kv_head", then the
// feature axis by its role ("d_k", "d_v", "feature").
std::vector<std::string> dim_names(Step step, bool batched);

}  // namespace attn
