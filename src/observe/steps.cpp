#include "observe/steps.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/problem.hpp"
#include "observe/step_texts.hpp"

namespace attn {

namespace {

Axis axis_of(Dim dim) {
  switch (dim) {
    case Dim::query: return Axis::query;
    case Dim::key: return Axis::key;
    case Dim::head: return Axis::head;
    case Dim::kv_head: return Axis::kv_head;
    default: return Axis::feature;
  }
}

std::array<StepInfo, gradient_step_count> gradient_rows();

// The row of a stage's step, from the chain's description of the stage and the table's (stage_steps): an
// elementwise stage reads the steps of the stages before it (whichever the input has) or the scores, the
// sinks' column the last of them, a factor on the weights the weights.
StepInfo stage_row(const StageStep& entry) {
  using enum Dim;
  const StageInfo& chain = stage_info(entry.stage);
  std::vector<Step> inputs;
  switch (chain.kind) {
    case StageKind::elementwise:
      for (const StageStep& before : stage_steps) {
        if (before.stage == entry.stage) break;
        if (stage_info(before.stage).kind == StageKind::elementwise) inputs.push_back(before.step);
      }
      if (inputs.empty()) inputs.push_back(Step::scores);
      break;
    case StageKind::sink_column:
      for (const StageStep& before : stage_steps)
        if (stage_info(before.stage).kind == StageKind::elementwise) inputs.assign(1, before.step);
      break;
    case StageKind::weight_factor: inputs.push_back(Step::weights); break;
  }
  const bool per_key = chain.kind != StageKind::sink_column;
  StepInfo info{entry.step,
                chain.step,
                chain.formula,
                chain.description,
                per_key ? std::vector<Dim>{head, query, key} : std::vector<Dim>{head, query},
                std::move(inputs),
                entry.op,
                entry.values,
                chain.feature.empty() ? Needs::always : Needs::chain,
                per_key};
  info.stage = entry.stage;
  return info;
}

// One row per step: a table of data, which readability-function-size would count as one long function.
std::array<StepInfo, table_size> rows() {  // NOLINT(readability-function-size)
  using enum Dim;
  using S = Step;
  // std::to_array counts the rows written, so a step of the enum without its row (or its stage's,
  // stage_row) does not compile
  const auto forward = std::to_array<StepInfo>({
      {S::q,
       "q",
       "Q = X·W_q + b_q",
       "each token's query: what it is looking for",
       {query, q_width},
       {},
       Op::projection},
      {S::k,
       "k",
       "K = C·W_k + b_k",
       "each key token's key: what it offers to be matched on",
       {key, k_width},
       {},
       Op::projection},
      {S::v,
       "v",
       "V = C·W_v + b_v",
       "each key token's value: the content it passes on",
       {key, v_width},
       {},
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
       {S::weights, S::dropped, S::v_heads},
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
  });
  static_assert(std::tuple_size_v<std::remove_const_t<decltype(forward)>> + stage_count == step_count,
                "one row of the table per forward step: its own, or its stage's");
  std::array<StepInfo, table_size> steps;
  for (const StepInfo& info : forward) steps[slot(info.step)] = info;
  for (const StageStep& entry : stage_steps) steps[slot(entry.step)] = stage_row(entry);
  const std::array<StepInfo, gradient_step_count> backward = gradient_rows();
  std::copy(backward.begin(), backward.end(), steps.begin() + step_count);
  for (StepInfo& info : steps)
    for (const Dim d : info.dims) info.axes.push_back(axis_of(d));
  return steps;
}

// The backward pass, one row per gradient: each has the shape of what it is the gradient of.
// ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 2, for the names dO, dP, dS and D.
std::array<StepInfo, gradient_step_count> gradient_rows() {  // NOLINT(readability-function-size)
  using enum Dim;
  using S = Step;
  const auto grad = [](Step step, std::string_view name, std::string_view formula, std::string_view description,
                       std::vector<Dim> dims, std::vector<Step> inputs, Op op, Needs needs = Needs::always,
                       bool tiled = false, std::optional<Stage> stage = std::nullopt) {
    StepInfo info{step, name, formula, description, std::move(dims), std::move(inputs), op};
    info.needs = needs;
    info.tiled = tiled;
    info.stage = stage;
    info.pass = Pass::backward;
    return info;
  };
  const auto param = [&grad](Step step, std::string_view name, std::string_view formula, std::string_view description,
                             std::vector<Dim> dims, std::vector<Step> inputs, Op op, Needs needs,
                             std::optional<Stage> stage = std::nullopt) {
    StepInfo info = grad(step, name, formula, description, std::move(dims), std::move(inputs), op, needs, false, stage);
    info.parameter = true;
    return info;
  };
  auto backward = std::to_array<StepInfo>({
      grad(S::d_output, "d_output", "dY = ∂L/∂Y",
           "the upstream gradient: how much the loss L = Σ Y ⊙ dY changes with each output number", {query, d_out}, {},
           Op::relayout),
      grad(S::d_concat, "d_concat", "dO = dY·W_oᵀ",
           "each merged head output's gradient: dY back through the output projection", {query, o_width}, {S::d_output},
           Op::input_gradient),
      grad(S::d_head_outputs, "d_head_outputs", "dO_h = dO.reshape(n, h, d_v).transpose(0, 1)",
           "the output gradient split into heads, as the heads were merged", {head, query, d_v}, {S::d_concat},
           Op::relayout),
      grad(S::d_dropped, "d_dropped", "dA_drop = dO_h·V_hᵀ",
           "how the loss changes with each weight after dropout: dA_drop[i][j] = dO_i · v_j, for every key, dropped "
           "or not",
           {head, query, key}, {S::d_head_outputs, S::v_heads}, Op::dot_products, Needs::chain, true, Stage::dropout),
      grad(S::d_weights, "d_weights", "dA = dO_h·V_hᵀ",
           "how the loss changes with each weight: dA[i][j] = dO_i · v_j, for every key, masked or not",
           {head, query, key}, {S::d_head_outputs, S::v_heads, S::d_dropped}, Op::dot_products, Needs::always, true),
      grad(S::d_v_heads, "d_v_heads", "dV_h = Aᵀ·dO_h, summed over the query heads that share a key/value head",
           "each value's gradient: the output gradients of the queries that read it, weighted by how much they read it",
           {kv_head, key, d_v}, {S::weights, S::dropped, S::d_head_outputs}, Op::weighted_sum),
      grad(S::d_masked, "d_masked", "dS'' = A ⊙ (dA - D), D = rowsum(dA ⊙ A)",
           "the softmax backward: a score's gradient is its weight times how far its dA lies above the row's "
           "weighted mean D (D = rowsum(dA ⊙ A), so the softmax's m × m Jacobian per row is never formed)",
           {head, query, key}, {S::weights, S::d_weights}, Op::softmax_backward, Needs::always, true),
      grad(S::d_capped, "d_capped", "dS_c = dS'' where allowed, 0 elsewhere",
           "the mask's backward: a forbidden score's -inf is a constant, so its gradient is 0", {head, query, key},
           {S::d_masked}, Op::mask, Needs::chain, true, Stage::softcap),
      grad(S::d_scaled, "d_scaled", "dS' = dS'' where allowed, 0 elsewhere",
           "the mask's backward: a forbidden score's -inf is a constant, so its gradient is 0", {head, query, key},
           {S::d_masked, S::d_capped, S::capped}, Op::mask, Needs::always, true),
      grad(S::d_scores, "d_scores", "dS = dS' · scale",
           "the gradient of the unscaled scores S = Q·Kᵀ: the scale multiplies it as it multiplied S",
           {head, query, key}, {S::d_scaled}, Op::scale, Needs::always, true),
      grad(S::d_q_rot, "d_q_rot", "dq_rot = dS·K_h",
           "the turned queries' gradient: each query moves along the keys it scored, weighted by dS",
           {head, query, d_k}, {S::d_scores, S::k_rot}, Op::weighted_sum, Needs::rope),
      grad(S::d_k_rot, "d_k_rot", "dk_rot = dSᵀ·Q_h, summed over the query heads that share a key/value head",
           "the turned keys' gradient: each key moves along the queries that scored it", {kv_head, key, d_k},
           {S::d_scores, S::q_rot}, Op::weighted_sum, Needs::rope),
      grad(S::d_q_heads, "d_q_heads", "dQ_h = dS·K_h",
           "each query head's gradient: the keys it scored, weighted by the scores' gradients", {head, query, d_k},
           {S::d_scores, S::k_heads, S::d_q_rot}, Op::weighted_sum),
      grad(S::d_k_heads, "d_k_heads", "dK_h = dSᵀ·Q_h, summed over the query heads that share a key/value head",
           "each key head's gradient: the queries that scored it, weighted by the scores' gradients, summed over "
           "the query heads that read it",
           {kv_head, key, d_k}, {S::d_scores, S::q_heads, S::d_k_rot}, Op::weighted_sum),
      grad(S::d_q, "d_q", "dQ = concat(dQ_1, …, dQ_h)", "the query gradient with the heads merged back",
           {query, q_width}, {S::d_q_heads}, Op::relayout),
      grad(S::d_k, "d_k", "dK = concat(dK_1, …, dK_g)", "the key gradient with the heads merged back", {key, k_width},
           {S::d_k_heads}, Op::relayout),
      grad(S::d_v, "d_v", "dV = concat(dV_1, …, dV_g)", "the value gradient with the heads merged back", {key, v_width},
           {S::d_v_heads}, Op::relayout),
      grad(S::d_X, "d_X", "dX = dQ·W_qᵀ + dK·W_kᵀ + dV·W_vᵀ",
           "each input token's gradient: the sum of its three paths, as a query, a key and a value", {query, d_model},
           {S::d_q, S::d_k, S::d_v}, Op::input_gradient),
      grad(S::d_context, "d_context", "dC = dK·W_kᵀ + dV·W_vᵀ",
           "each context token's gradient: the sum of its two paths, as a key and a value", {key, d_ctx},
           {S::d_k, S::d_v}, Op::input_gradient, Needs::cross),
      param(S::d_W_q, "d_W_q", "dW_q = Σ Xᵀ·dQ", "W_q's gradient: every token's input times its query's gradient",
            {d_model, q_width}, {S::d_q}, Op::weight_gradient, Needs::always),
      param(S::d_W_k, "d_W_k", "dW_k = Σ Xᵀ·dK", "W_k's gradient: every key token's input times its key's gradient",
            {d_ctx, k_width}, {S::d_k}, Op::weight_gradient, Needs::always),
      param(S::d_W_v, "d_W_v", "dW_v = Σ Xᵀ·dV", "W_v's gradient: every key token's input times its value's gradient",
            {d_ctx, v_width}, {S::d_v}, Op::weight_gradient, Needs::always),
      param(S::d_W_o, "d_W_o", "dW_o = Σ Oᵀ·dY", "W_o's gradient: every merged head output times the output's gradient",
            {o_width, d_out}, {S::d_output, S::concat}, Op::weight_gradient, Needs::w_o),
      param(S::d_b_q, "d_b_q", "db_q = Σ dQ", "b_q's gradient: the query gradients summed over every token", {q_width},
            {S::d_q}, Op::bias_gradient, Needs::b_q),
      param(S::d_b_k, "d_b_k", "db_k = Σ dK", "b_k's gradient: the key gradients summed over every key token",
            {k_width}, {S::d_k}, Op::bias_gradient, Needs::b_k),
      param(S::d_b_v, "d_b_v", "db_v = Σ dV", "b_v's gradient: the value gradients summed over every key token",
            {v_width}, {S::d_v}, Op::bias_gradient, Needs::b_v),
      param(S::d_b_o, "d_b_o", "db_o = Σ dY", "b_o's gradient: the output's gradients summed over every token", {d_out},
            {S::d_output}, Op::bias_gradient, Needs::b_o),
      param(S::d_sinks, "d_sinks", "dsink_h = -Σ a_sink · D, D = rowsum(dA ⊙ A)",
            "each sink's gradient: the softmax backward at the sink's column, whose dA is 0 (it has no value), "
            "summed over every query of every batch item",
            {head}, {S::sink_weights, S::weights, S::d_weights}, Op::softmax_backward, Needs::chain, Stage::sinks),
  });
  static_assert(std::tuple_size_v<decltype(backward)> == gradient_step_count, "one row of the table per gradient step");
  return backward;
}

const std::array<StepInfo, table_size>& table() {
  static const std::array<StepInfo, table_size> steps = [] {
    std::array<StepInfo, table_size> t = rows();
    set_texts(t);
    return t;
  }();
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
    case Dim::d_model: return p.d_model;
    case Dim::d_ctx: return p.d_context;
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
    case Op::softcap: return "softcap";
    case Op::mask: return "mask";
    case Op::softmax: return "softmax";
    case Op::weighted_sum: return "weighted_sum";
    case Op::dropout: return "dropout";
    case Op::softmax_backward: return "softmax_backward";
    case Op::input_gradient: return "input_gradient";
    case Op::weight_gradient: return "weight_gradient";
    case Op::bias_gradient: return "bias_gradient";
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
    case Needs::chain: return "chain";
    case Needs::cross: return "context";
    case Needs::w_o: return "W_o";
    case Needs::b_q: return "b_q";
    case Needs::b_k: return "b_k";
    case Needs::b_v: return "b_v";
    case Needs::b_o: return "b_o";
  }
  return "?";
}

std::string_view needs_name(const StepInfo& info) {
  return info.needs == Needs::chain && info.stage ? stage_info(*info.stage).feature : to_string(info.needs);
}

std::string_view to_string(Pass pass) { return pass == Pass::forward ? "forward" : "backward"; }

const StepInfo& step_info(Step step) { return table()[slot(step)]; }

const std::array<Step, step_count>& all_steps() {
  static const std::array<Step, step_count> steps = [] {
    std::array<Step, step_count> out{};
    for (std::size_t i = 0; i < step_count; ++i) out[i] = table()[i].step;
    return out;
  }();
  return steps;
}

const std::array<Step, gradient_step_count>& gradient_steps() {
  static const std::array<Step, gradient_step_count> steps = [] {
    std::array<Step, gradient_step_count> out{};
    for (std::size_t i = 0; i < gradient_step_count; ++i) out[i] = table()[step_count + i].step;
    return out;
  }();
  return steps;
}

Step stage_step(Stage stage) { return stage_steps[static_cast<std::size_t>(stage)].step; }

std::optional<Stage> step_stage(Step step) {
  for (const StageStep& s : stage_steps)
    if (s.step == step) return s.stage;
  return std::nullopt;
}

bool is_gradient_step(Step step) { return step_info(step).pass == Pass::backward; }

std::optional<Step> step_from_name(std::string_view name) {
  for (const StepInfo& info : table())
    if (info.name == name) return info.step;
  return std::nullopt;
}

bool is_score_step(Step step) { return step_info(step).tiled; }

bool is_position_step(Step step) { return !is_gradient_step(step) && step_info(step).needs != Needs::always; }

bool depends_on(Step later, Step earlier) {
  for (const Step s : step_info(later).inputs)
    if (s == earlier || depends_on(s, earlier)) return true;
  return false;
}

std::string step_formula(Step step, const Problem& p) {
  const StepInfo& info = step_info(step);
  return info.formula_for ? info.formula_for(p) : std::string(info.formula);
}

std::string step_description(Step step, const Problem& p) {
  const StepInfo& info = step_info(step);
  return info.description_for ? info.description_for(p) : std::string(info.description);
}

std::vector<std::string> dim_names(Step step, bool batched, Layout layout) {
  const StepInfo& info = step_info(step);
  std::vector<std::string> names;
  if (batched && !info.parameter) names.emplace_back("batch");
  for (const Dim d : info.dims) names.emplace_back(name_of(d));
  if (info.parameter && names.size() == 2 && layout == Layout::out_in) std::swap(names[0], names[1]);
  return names;
}

Shape step_shape(Step step, const Problem& p, bool batch_axis, bool one_head) {
  const StepInfo& info = step_info(step);
  Shape shape;
  if (batch_axis && !info.parameter) shape.push_back(p.B);
  for (const Dim d : info.dims) shape.push_back(extent(d, p, one_head));
  if (info.parameter && shape.size() == 2 && p.layout == Layout::out_in) std::swap(shape[0], shape[1]);
  return shape;
}

}  // namespace attn
