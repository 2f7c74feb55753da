#pragma once
// The steps of attention, by their stable names (docs/trace-format.md): the same name in this enum, the
// terminal heading, the JSON trace, `--steps` and the docs.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

enum class Step { q, k, v, q_heads, k_heads, v_heads, scores, scaled, masked, weights, head_outputs, concat, output };

inline constexpr std::size_t step_count = 13;

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

// The n × m steps (scores, scaled, masked, weights): the matrices the flash pass never forms whole;
// its tiles hold them piece by piece.
constexpr bool is_score_step(Step step) {
  return step == Step::scores || step == Step::scaled || step == Step::masked || step == Step::weights;
}

// The dimension names of docs/trace-format.md's `dims`: "query", "key", "head", "kv_head", then the
// feature axis by its role ("d_k", "d_v", "feature").
std::vector<std::string> dim_names(Step step, bool batched);

}  // namespace attn
