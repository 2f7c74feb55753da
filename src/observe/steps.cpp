#include "observe/steps.hpp"

#include <algorithm>

#include "model/problem.hpp"

namespace attn {

namespace {

constexpr std::size_t slot(Step s) { return static_cast<std::size_t>(s); }

Axis axis_of(Dim dim) {
  switch (dim) {
    case Dim::query: return Axis::query;
    case Dim::key: return Axis::key;
    case Dim::head: return Axis::head;
    case Dim::kv_head: return Axis::kv_head;
    default: return Axis::feature;
  }
}

std::array<StepInfo, step_count> rows() {
  using enum Dim;
  using S = Step;
  std::array<StepInfo, step_count> steps = {{
      {S::q, "q", "Q = X·W_q + b_q", "each token's query: what it is looking for", {query, q_width}, {}, Op::projection},
      {S::k,
       "k",
       "K = C·W_k + b_k",
       "each key token's key: what it offers to be matched on",
       {key, k_width},
       {},
       Op::projection},
      {S::v, "v", "V = C·W_v + b_v", "each key token's value: the content it passes on", {key, v_width}, {},
       Op::projection},
      {S::q_heads,
       "q_heads",
       "Q_h = Q.reshape(n, h, d_k).transpose(0, 1)",
       "the query split into heads: each head sees its own d_k columns",
       {head, query, d_k},
       {S::q},
       Op::relayout},
      {S::k_heads,
       "k_heads",
       "K_h = K.reshape(m, g, d_k).transpose(0, 1)",
       "the keys split into key/value heads",
       {kv_head, key, d_k},
       {S::k},
       Op::relayout},
      {S::v_heads,
       "v_heads",
       "V_h = V.reshape(m, g, d_v).transpose(0, 1)",
       "the values split into key/value heads",
       {kv_head, key, d_v},
       {S::v},
       Op::relayout},
      {S::q_rot,
       "q_rot",
       "q_rot = RoPE(q, pos)",
       "the queries turned by their positions (RoPE): each pair of features rotates by position · θ_i",
       {head, query, d_k},
       {S::q_heads},
       Op::rotation,
       ValueClass::signed_value,
       Needs::rope},
      {S::k_rot,
       "k_rot",
       "k_rot = RoPE(k, pos)",
       "the keys turned by their positions, so that q·k depends on how far apart the two tokens are",
       {kv_head, key, d_k},
       {S::k_heads},
       Op::rotation,
       ValueClass::signed_value,
       Needs::rope},
      {S::scores,
       "scores",
       "S = Q·Kᵀ",
       "how much each query matches each key: one dot product per pair",
       {head, query, key},
       {S::q_heads, S::k_heads, S::q_rot, S::k_rot},
       Op::dot_products,
       ValueClass::signed_value,
       Needs::always,
       true},
      {S::scaled,
       "scaled",
       "S' = S · scale",
       "the scores scaled (by 1/√d_k unless set) so their spread does not grow with d_k",
       {head, query, key},
       {S::scores},
       Op::scale,
       ValueClass::signed_value,
       Needs::always,
       true},
      {S::bias,
       "bias",
       "S'' = S' - m_h·(i - j)",
       "ALiBi: each score lowered in proportion to how far the key lies behind the query, by a slope per head",
       {head, query, key},
       {S::scaled},
       Op::add_bias,
       ValueClass::signed_value,
       Needs::alibi,
       true},
      {S::masked,
       "masked",
       "S'' = S' where allowed, -inf elsewhere",
       "keys a query may not see get -inf, which the softmax turns into weight 0",
       {head, query, key},
       {S::scaled, S::bias},
       Op::mask,
       ValueClass::signed_value,
       Needs::always,
       true},
      {S::weights,
       "weights",
       "A = softmax(S'') along each row",
       "how much each query attends to each key: every row is ≥ 0 and sums to 1",
       {head, query, key},
       {S::masked},
       Op::softmax,
       ValueClass::probability,
       Needs::always,
       true},
      {S::head_outputs,
       "head_outputs",
       "O_h = A·V_h",
       "each head's output: the values averaged with the attention weights",
       {head, query, d_v},
       {S::weights, S::v_heads},
       Op::weighted_sum},
      {S::concat,
       "concat",
       "O = concat(O_1, …, O_h)",
       "the heads merged back side by side (transpose + reshape)",
       {query, o_width},
       {S::head_outputs},
       Op::relayout},
      {S::output,
       "output",
       "Y = O·W_o + b_o",
       "the result: the merged heads through the output projection",
       {query, d_out},
       {S::concat},
       Op::projection},
  }};
  for (StepInfo& info : steps)
    for (const Dim d : info.dims) info.axes.push_back(axis_of(d));
  return steps;
}

const std::array<StepInfo, step_count>& table() {
  static const std::array<StepInfo, step_count> steps = rows();
  return steps;
}

std::size_t extent(Dim dim, const Problem& p, bool one_head) {
  switch (dim) {
    case Dim::query: return p.n;
    case Dim::key: return p.m;
    case Dim::head: return one_head ? 1 : p.h;
    case Dim::kv_head: return one_head ? 1 : p.g;
    case Dim::d_k: return p.d_k;
    case Dim::d_v: return p.d_v;
    case Dim::d_out: return p.d_out;
    case Dim::q_width: return p.h * p.d_k;
    case Dim::k_width: return p.g * p.d_k;
    case Dim::v_width: return p.g * p.d_v;
    case Dim::o_width: return p.h * p.d_v;
  }
  return 0;
}

std::string_view name_of(Dim dim) {
  switch (dim) {
    case Dim::query: return "query";
    case Dim::key: return "key";
    case Dim::head: return "head";
    case Dim::kv_head: return "kv_head";
    case Dim::d_k: return "d_k";
    case Dim::d_v: return "d_v";
    case Dim::d_out: return "d_out";
    default: return "feature";
  }
}

}  // namespace

std::string_view to_string(Op op) {
  switch (op) {
    case Op::projection: return "projection";
    case Op::relayout: return "relayout";
    case Op::rotation: return "rotation";
    case Op::dot_products: return "dot_products";
    case Op::scale: return "scale";
    case Op::add_bias: return "add_bias";
    case Op::mask: return "mask";
    case Op::softmax: return "softmax";
    case Op::weighted_sum: return "weighted_sum";
  }
  return "?";
}

std::string_view to_string(ValueClass values) {
  switch (values) {
    case ValueClass::signed_value: return "signed";
    case ValueClass::non_negative: return "non_negative";
    case ValueClass::probability: return "probability";
  }
  return "?";
}

std::string_view to_string(Needs needs) {
  switch (needs) {
    case Needs::always: return "always";
    case Needs::rope: return "rope";
    case Needs::alibi: return "alibi";
  }
  return "?";
}

const StepInfo& step_info(Step step) { return table()[slot(step)]; }

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

bool is_score_step(Step step) { return step_info(step).tiled; }

bool is_position_step(Step step) { return step_info(step).needs != Needs::always; }

bool step_applies(Step step, const Problem& p) {
  switch (step_info(step).needs) {
    case Needs::rope: return p.rope.has_value();
    case Needs::alibi: return p.alibi.has_value();
    case Needs::always: return true;
  }
  return true;
}

std::vector<Step> steps_of(const Problem& p) {
  std::vector<Step> steps;
  for (const Step s : all_steps())
    if (step_applies(s, p)) steps.push_back(s);
  return steps;
}

std::vector<Step> inputs_of(Step step, const Problem& p) {
  std::vector<Step> listed;
  for (const Step s : step_info(step).inputs)
    if (step_applies(s, p)) listed.push_back(s);
  std::vector<Step> direct;
  for (const Step s : listed) {
    const bool through_another = std::any_of(listed.begin(), listed.end(), [&](Step o) { return depends_on(o, s); });
    if (!through_another) direct.push_back(s);
  }
  return direct;
}

bool depends_on(Step later, Step earlier) {
  for (const Step s : step_info(later).inputs)
    if (s == earlier || depends_on(s, earlier)) return true;
  return false;
}

std::vector<std::string> dim_names(Step step, bool batched) {
  std::vector<std::string> names;
  if (batched) names.emplace_back("batch");
  for (const Dim d : step_info(step).dims) names.emplace_back(name_of(d));
  return names;
}

Shape step_shape(Step step, const Problem& p, bool batch_axis, bool one_head) {
  Shape shape;
  if (batch_axis) shape.push_back(p.B);
  for (const Dim d : step_info(step).dims) shape.push_back(extent(d, p, one_head));
  return shape;
}

}  // namespace attn
