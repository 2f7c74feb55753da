#include "observe/step_texts.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/problem.hpp"
#include "model/score_chain.hpp"

namespace attn {

namespace {

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

// What stage s of the score chain reads, as formulas name it: "S_c + B" for the mask of an input with
// softcap and ALiBi (each elementwise stage before s that p has, in order, by its symbol).
std::string stage_input(Stage s, const Problem& p) {
  std::string value = "S";
  for (const StageInfo& t : chain_stages()) {
    if (t.stage == s) break;
    if (t.kind != StageKind::elementwise || !chain_has(t.stage, p)) continue;
    const std::string_view symbol = t.symbol;
    if (symbol.starts_with("{}")) value.append(symbol.substr(2));
    else value = std::string(symbol);
  }
  return value;
}

std::string alibi_formula(const Problem& p) {
  return fmt::format("{} + B, B[i][j] = -m_h·(pos_i - pos_j), m = {:.4g}{}, pos_i = {}, pos_j = {}",
                     stage_input(Stage::alibi, p), fmt::join(p.alibi->slopes, ", "),
                     p.alibi->standard ? " (ALiBi's standard slopes)" : "", positions_text(p.alibi->query_positions),
                     positions_text(p.alibi->key_positions));
}

std::string softcap_formula(const Problem& p) { return fmt::format("S_c = {}·tanh(S'/{})", *p.softcap, *p.softcap); }

std::string mask_formula(const Problem& p) {
  const std::string before = stage_input(Stage::mask, p);
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
  if (p.mask.kind != MaskKind::none) return std::string(step_info(Step::masked).description);
  const std::optional<Stage> before = stage_before(Stage::mask, p);
  return fmt::format("no mask: every query may see every key, so this is the {} scores unchanged",
                     before ? stage_info(*before).adjective : "");
}

std::string softmax_description(const Problem& p) {
  const std::size_t empty = rows_the_mask_empties(p);
  const std::string_view dropout =
      p.dropout ? "; these are the weights before dropout, which comes after them (dropped) and changes the sums" : "";
  if (!p.sinks.empty())
    return fmt::format(
        "how much each query attends to each key: every row is ≥ 0 and sums to 1 - a_sink, the share its head's "
        "sink takes{}{}",
        empty == 0 ? "" : " (all of it in a row the mask left with no key)", dropout);
  if (empty == 0 && !p.dropout) return std::string(step_info(Step::weights).description);
  if (empty == 0)
    return fmt::format("how much each query attends to each key: every row is ≥ 0 and sums to 1{}", dropout);
  return fmt::format(
      "how much each query attends to each key: every row is ≥ 0 and sums to 1, except the {} row{} that the mask "
      "left with no key, whose weights are all 0{}",
      empty, empty == 1 ? "" : "s", dropout);
}

std::string softmax_formula(const Problem& p) {
  return p.sinks.empty()
             ? std::string(step_info(Step::weights).formula)
             : "A = exp(S'' - M) / l, M = max(sink_h, rowmax S''), l = exp(sink_h - M) + rowsum exp(S'' - M)";
}

std::string dropped_formula(const Problem& p) {
  if (!p.dropout) return std::string(step_info(Step::dropped).formula);
  return fmt::format("A_drop = A ⊙ Z / (1 - {}), Z = [Philox4x32-10(j, i, head, batch; seed {}) ≥ ⌊{}·2³²⌋]",
                     p.dropout->p, p.dropout->seed, p.dropout->p);
}

std::string dropped_description(const Problem& p) {
  if (!p.dropout) return std::string(step_info(Step::dropped).description);
  return fmt::format(
      "the weights after dropout (training only): each kept with probability {} and scaled by 1/(1 - {}), the rest "
      "set to 0, so a row no longer sums to 1 but keeps its expected sum; the keep mask Z is a pure function of the "
      "seed and the entry's position, so every engine draws the same one",
      1 - p.dropout->p, p.dropout->p);
}

std::string head_outputs_formula(const Problem& p) { return p.dropout ? "O_h = A_drop·V_h" : "O_h = A·V_h"; }

std::string output_description(const Problem& p) {
  if (p.has_output_projection()) return std::string(step_info(Step::output).description);
  return "the result: the merged heads as they are, since the input has no output projection";
}

// ------------------------------------------------------------------------------ the backward's texts

std::string d_output_description(const Problem& p) {
  switch (p.upstream) {
    case Upstream::input: return "the upstream gradient ∂L/∂Y, L = Σ Y ⊙ dY: the input's dY";
    case Upstream::seeded:
      return fmt::format("the upstream gradient ∂L/∂Y, L = Σ Y ⊙ dY: dY drawn from a standard normal, seed {}",
                         p.grad_seed);
    case Upstream::ones: break;
  }
  return "the upstream gradient ∂L/∂Y: 1 everywhere, the loss being L = ΣY (no dY in the input, no --grad-seed)";
}

std::string d_concat_formula(const Problem& p) {
  return p.has_output_projection() ? "dO = dY·W_oᵀ" : "dO = dY (no W_o: the output is the merged heads)";
}

// The mask's backward, into what the mask read: S' (d_scaled), or S_c with softcap (d_capped).
std::string mask_backward_formula(const Problem& p, std::string_view into) {
  const std::string_view what = p.alibi ? " (ALiBi's bias is a constant: it passes the gradient on)" : "";
  return p.mask.kind == MaskKind::none ? fmt::format("{} = dS''{} (mask: none)", into, what)
                                       : fmt::format("{} = dS'' where allowed, 0 elsewhere{}", into, what);
}

std::string d_weights_formula(const Problem& p) {
  if (!p.dropout) return std::string(step_info(Step::d_weights).formula);
  return fmt::format("dA = dA_drop ⊙ Z / (1 - {}): through the same keep mask", p.dropout->p);
}

std::string d_v_heads_formula(const Problem& p) {
  return p.dropout ? "dV_h = A_dropᵀ·dO_h, summed over the query heads that share a key/value head"
                   : std::string(step_info(Step::d_v_heads).formula);
}

std::string d_capped_formula(const Problem& p) { return mask_backward_formula(p, "dS_c"); }

std::string d_scaled_formula(const Problem& p) {
  if (p.softcap) return fmt::format("dS' = dS_c ⊙ (1 - (S_c/{})²)", *p.softcap);
  return mask_backward_formula(p, "dS'");
}

std::string d_scaled_description(const Problem& p) {
  if (p.softcap)
    return "the cap's backward: the slope of c·tanh(x/c) is 1 - tanh², near 1 for a small score and near 0 for "
           "one the cap holds at ±c, whose gradient it all but stops";
  return std::string(step_info(Step::d_scaled).description);
}

std::string d_scores_formula(const Problem& p) {
  return p.scale_given ? fmt::format("dS = dS' · {}", p.scale) : fmt::format("dS = dS' / √{}", p.d_k);
}

std::string d_q_heads_formula(const Problem& p) {
  return p.rope ? "dQ_h = RoPE(dq_rot, -pos): each pair turned back by its angle (the rotation's transpose)"
                : "dQ_h = dS·K_h";
}

std::string d_k_heads_formula(const Problem& p) {
  return p.rope ? "dK_h = RoPE(dk_rot, -pos): each pair turned back by its angle (the rotation's transpose)"
                : "dK_h = dSᵀ·Q_h, summed over the query heads that share a key/value head";
}

std::string d_x_formula(const Problem& p) {
  return p.cross ? "dX = dQ·W_qᵀ (the keys and values come from the context: dC holds their paths)"
                 : "dX = dQ·W_qᵀ + dK·W_kᵀ + dV·W_vᵀ";
}

std::string d_x_description(const Problem& p) {
  return p.cross ? "each query token's gradient: its one path, as a query"
                 : std::string(step_info(Step::d_X).description);
}

// dW = Σ Xᵀ·dY in the input's layout: in × out, or its transpose for out_in.
std::string weight_gradient_formula(const Problem& p, std::string_view weight, std::string_view source,
                                    std::string_view gradient) {
  return p.layout == Layout::out_in
             ? fmt::format("d{} = Σ d{}ᵀ·{} (out × in, as the input stores {})", weight, gradient, source, weight)
             : fmt::format("d{} = Σ {}ᵀ·d{}", weight, source, gradient);
}

std::string d_w_q_formula(const Problem& p) { return weight_gradient_formula(p, "W_q", "X", "Q"); }
std::string d_w_k_formula(const Problem& p) { return weight_gradient_formula(p, "W_k", source_of(p), "K"); }
std::string d_w_v_formula(const Problem& p) { return weight_gradient_formula(p, "W_v", source_of(p), "V"); }
std::string d_w_o_formula(const Problem& p) { return weight_gradient_formula(p, "W_o", "O", "Y"); }

}  // namespace

void set_texts(std::array<StepInfo, table_size>& steps) {
  const auto row = [&steps](Step s) -> StepInfo& { return steps[static_cast<std::size_t>(s)]; };
  row(Step::q).formula_for = q_formula;
  row(Step::k).formula_for = k_formula;
  row(Step::v).formula_for = v_formula;
  row(Step::q_rot).formula_for = q_rot_formula;
  row(Step::k_rot).formula_for = k_rot_formula;
  row(Step::scaled).formula_for = scale_formula;
  row(Step::capped).formula_for = softcap_formula;
  row(Step::bias).formula_for = alibi_formula;
  row(Step::masked).formula_for = mask_formula;
  row(Step::masked).description_for = mask_description;
  row(Step::weights).description_for = softmax_description;
  row(Step::weights).formula_for = softmax_formula;
  row(Step::dropped).formula_for = dropped_formula;
  row(Step::dropped).description_for = dropped_description;
  row(Step::head_outputs).formula_for = head_outputs_formula;
  row(Step::d_weights).formula_for = d_weights_formula;
  row(Step::d_v_heads).formula_for = d_v_heads_formula;
  row(Step::output).formula_for = output_formula;
  row(Step::output).description_for = output_description;
  row(Step::d_output).description_for = d_output_description;
  row(Step::d_concat).formula_for = d_concat_formula;
  row(Step::d_capped).formula_for = d_capped_formula;
  row(Step::d_scaled).formula_for = d_scaled_formula;
  row(Step::d_scaled).description_for = d_scaled_description;
  row(Step::d_scores).formula_for = d_scores_formula;
  row(Step::d_q_heads).formula_for = d_q_heads_formula;
  row(Step::d_k_heads).formula_for = d_k_heads_formula;
  row(Step::d_X).formula_for = d_x_formula;
  row(Step::d_X).description_for = d_x_description;
  row(Step::d_W_q).formula_for = d_w_q_formula;
  row(Step::d_W_k).formula_for = d_w_k_formula;
  row(Step::d_W_v).formula_for = d_w_v_formula;
  row(Step::d_W_o).formula_for = d_w_o_formula;
}

}  // namespace attn
