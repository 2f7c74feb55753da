#include "observe/steps.hpp"

namespace attn {

namespace {

const std::array<StepInfo, step_count>& table() {
  using enum Axis;
  static const std::array<StepInfo, step_count> steps = {{
      {Step::q, "q", "Q = X·W_q + b_q", "each token's query: what it is looking for", {query, feature}},
      {Step::k, "k", "K = C·W_k + b_k", "each key token's key: what it offers to be matched on", {key, feature}},
      {Step::v, "v", "V = C·W_v + b_v", "each key token's value: the content it passes on", {key, feature}},
      {Step::q_heads,
       "q_heads",
       "Q_h = Q.reshape(n, h, d_k).transpose(0, 1)",
       "the query split into heads: each head sees its own d_k columns",
       {head, query, feature}},
      {Step::k_heads,
       "k_heads",
       "K_h = K.reshape(m, g, d_k).transpose(0, 1)",
       "the keys split into key/value heads",
       {kv_head, key, feature}},
      {Step::v_heads,
       "v_heads",
       "V_h = V.reshape(m, g, d_v).transpose(0, 1)",
       "the values split into key/value heads",
       {kv_head, key, feature}},
      {Step::q_rot,
       "q_rot",
       "q_rot = RoPE(q, pos)",
       "the queries turned by their positions (RoPE): each pair of features rotates by position · θ_i",
       {head, query, feature}},
      {Step::k_rot,
       "k_rot",
       "k_rot = RoPE(k, pos)",
       "the keys turned by their positions, so that q·k depends on how far apart the two tokens are",
       {kv_head, key, feature}},
      {Step::scores,
       "scores",
       "S = Q·Kᵀ",
       "how much each query matches each key: one dot product per pair",
       {head, query, key}},
      {Step::scaled,
       "scaled",
       "S' = S · scale",
       "the scores scaled (by 1/√d_k unless set) so their spread does not grow with d_k",
       {head, query, key}},
      {Step::bias,
       "bias",
       "S'' = S' - m_h·(i - j)",
       "ALiBi: each score lowered in proportion to how far the key lies behind the query, by a slope per head",
       {head, query, key}},
      {Step::masked,
       "masked",
       "S'' = S' where allowed, -inf elsewhere",
       "keys a query may not see get -inf, which the softmax turns into weight 0",
       {head, query, key}},
      {Step::weights,
       "weights",
       "A = softmax(S'') along each row",
       "how much each query attends to each key: every row is ≥ 0 and sums to 1",
       {head, query, key}},
      {Step::head_outputs,
       "head_outputs",
       "O_h = A·V_h",
       "each head's output: the values averaged with the attention weights",
       {head, query, feature}},
      {Step::concat,
       "concat",
       "O = concat(O_1, …, O_h)",
       "the heads merged back side by side (transpose + reshape)",
       {query, feature}},
      {Step::output,
       "output",
       "Y = O·W_o + b_o",
       "the result: the merged heads through the output projection",
       {query, feature}},
  }};
  return steps;
}

}  // namespace

const StepInfo& step_info(Step step) { return table()[static_cast<std::size_t>(step)]; }

const std::array<Step, step_count>& all_steps() {
  static const std::array<Step, step_count> steps = [] {
    std::array<Step, step_count> out{};
    for (std::size_t i = 0; i < step_count; ++i) out[i] = table()[i].step;
    return out;
  }();
  return steps;
}

std::optional<Step> step_from_name(std::string_view name) {
  for (const StepInfo& info : table())
    if (info.name == name) return info.step;
  return std::nullopt;
}

std::vector<std::string> dim_names(Step step, bool batched) {
  std::vector<std::string> names;
  if (batched) names.emplace_back("batch");
  for (const Axis axis : step_info(step).axes) {
    switch (axis) {
      case Axis::query: names.emplace_back("query"); break;
      case Axis::key: names.emplace_back("key"); break;
      case Axis::head: names.emplace_back("head"); break;
      case Axis::kv_head: names.emplace_back("kv_head"); break;
      case Axis::feature:
        switch (step) {
          case Step::q_heads:
          case Step::k_heads:
          case Step::q_rot:
          case Step::k_rot: names.emplace_back("d_k"); break;
          case Step::v_heads:
          case Step::head_outputs: names.emplace_back("d_v"); break;
          case Step::output: names.emplace_back("d_out"); break;
          default: names.emplace_back("feature"); break;
        }
        break;
    }
  }
  return names;
}

}  // namespace attn
