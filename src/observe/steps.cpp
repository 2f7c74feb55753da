#include "observe/steps.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// One row per step: a table of data, which readability-function-size would count as one long function.
std::array<StepInfo, step_count> rows() {  // NOLINT(readability-function-size)
  using enum Dim;
  using S = Step;
  std::array<StepInfo, step_count> steps = {{
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

void set_texts(std::array<StepInfo, step_count>& steps);

const std::array<StepInfo, step_count>& table() {
  static const std::array<StepInfo, step_count> steps = [] {
    std::array<StepInfo, step_count> t = rows();
    set_texts(t);
    return t;
  }();
  return steps;
}

// ------------------------------------------------------------------ formulas and meanings for one input

// "0…4", or the list when the positions do not count up by one: "5, 6, 9".
std::string positions_text(const std::vector<double>& pos) {
  bool counting = true;
  for (std::size_t t = 1; t < pos.size() && counting; ++t) counting = pos[t] == pos[t - 1] + 1;
  if (counting && pos.size() > 2) return fmt::format("{}…{}", pos.front(), pos.back());
  return fmt::format("{}", fmt::join(pos, ", "));
}

// "q_rot = RoPE(q, pos): pairs (i, i + 2) turn by pos·θ_i, θ_i = 10000^(-2i/4), pos = 0…2".
std::string rope_formula(const Problem& p, bool keys) {
  const Rope& r = *p.rope;
  const std::string pairs = r.style == RopeStyle::half ? fmt::format("(i, i + {})", r.dims / 2) : "(2i, 2i + 1)";
  const std::string rest =
      r.dims < p.d_k ? fmt::format("; features {}…{} pass through", r.dims, p.d_k - 1) : std::string();
  return fmt::format("{} = RoPE({}, pos): pairs {} turn by pos·θ_i, θ_i = {}^(-2i/{}), pos = {}{}",
                     keys ? "k_rot" : "q_rot", keys ? "k" : "q", pairs, r.theta, r.dims,
                     positions_text(keys ? r.context_positions : r.positions), rest);
}

std::string plus_bias(const std::vector<double>& b, std::string_view name) {
  return b.empty() ? std::string() : fmt::format(" + {}", name);
}

std::string_view source_of(const Problem& p) { return p.cross ? "C" : "X"; }

std::string q_formula(const Problem& p) { return fmt::format("Q = X·W_q{}", plus_bias(p.b_q, "b_q")); }
std::string k_formula(const Problem& p) { return fmt::format("K = {}·W_k{}", source_of(p), plus_bias(p.b_k, "b_k")); }
std::string v_formula(const Problem& p) { return fmt::format("V = {}·W_v{}", source_of(p), plus_bias(p.b_v, "b_v")); }
std::string q_rot_formula(const Problem& p) { return rope_formula(p, false); }
std::string k_rot_formula(const Problem& p) { return rope_formula(p, true); }

std::string scale_formula(const Problem& p) {
  return p.scale_given ? fmt::format("S' = S · {}", p.scale) : fmt::format("S' = S / √{}", p.d_k);
}

std::string alibi_formula(const Problem& p) {
  return fmt::format("S' + B, B[i][j] = -m_h·(pos_i - pos_j), m = {:.4g}{}, pos_i = {}, pos_j = {}",
                     fmt::join(p.alibi->slopes, ", "), p.alibi->standard ? " (ALiBi's standard slopes)" : "",
                     positions_text(p.alibi->query_positions), positions_text(p.alibi->key_positions));
}

std::string mask_formula(const Problem& p) {
  const std::string_view before = p.alibi ? "S' + B" : "S'";
  return p.mask.kind == MaskKind::none
             ? fmt::format("S'' = {} (mask: none)", before)
             : fmt::format("S'' = {} where allowed, -inf elsewhere (mask: {})", before, p.mask.summary());
}

std::string output_formula(const Problem& p) {
  return p.has_output_projection() ? fmt::format("Y = O·W_o{}", plus_bias(p.b_o, "b_o"))
                                   : "Y = O (no W_o: the output is the merged heads)";
}

// How many query rows (over every batch item) the mask leaves with no key to attend.
std::size_t rows_the_mask_empties(const Problem& p) {
  if (p.mask.kind == MaskKind::none) return 0;
  std::size_t empty = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      const auto [first, last] = p.mask.band(i);
      bool any = false;
      for (std::size_t j = first; j < last && !any; ++j) any = p.mask.allows(b, i, j);
      if (!any) ++empty;
    }
  return empty;
}

std::string mask_description(const Problem& p) {
  if (p.mask.kind != MaskKind::none) return std::string(table()[slot(Step::masked)].description);
  return p.alibi ? "no mask: every query may see every key, so this is the biased scores unchanged"
                 : "no mask: every query may see every key, so this is the scaled scores unchanged";
}

std::string softmax_description(const Problem& p) {
  const std::size_t empty = rows_the_mask_empties(p);
  if (empty == 0) return std::string(table()[slot(Step::weights)].description);
  return fmt::format(
      "how much each query attends to each key: every row is ≥ 0 and sums to 1, except the {} row{} that the mask "
      "left with no key, whose weights are all 0",
      empty, empty == 1 ? "" : "s");
}

std::string output_description(const Problem& p) {
  if (p.has_output_projection()) return std::string(table()[slot(Step::output)].description);
  return "the result: the merged heads as they are, since the input has no output projection";
}

// The rows whose formula or meaning depends on the input.
void set_texts(std::array<StepInfo, step_count>& steps) {
  const auto row = [&steps](Step s) -> StepInfo& { return steps[slot(s)]; };
  row(Step::q).formula_for = q_formula;
  row(Step::k).formula_for = k_formula;
  row(Step::v).formula_for = v_formula;
  row(Step::q_rot).formula_for = q_rot_formula;
  row(Step::k_rot).formula_for = k_rot_formula;
  row(Step::scaled).formula_for = scale_formula;
  row(Step::bias).formula_for = alibi_formula;
  row(Step::masked).formula_for = mask_formula;
  row(Step::masked).description_for = mask_description;
  row(Step::weights).description_for = softmax_description;
  row(Step::output).formula_for = output_formula;
  row(Step::output).description_for = output_description;
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
