#include "lessons/explain_gradient.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/backward.hpp"
#include "engine/compare.hpp"
#include "engine/compare_backward.hpp"
#include "engine/rows.hpp"
#include "model/dropout.hpp"
#include "model/score_chain.hpp"
#include "trace/trace.hpp"

namespace attn {

namespace {

// What one explanation reads: the naive backward's steps (batch axis first) and the rounded inputs.
struct Sources {
  const Problem& p;  // the rounded inputs, weights in_out
  const StepKeeper<double>& at;
  std::size_t b;  // the batch item (0 for a parameter, whose sum runs over every item)

  std::string q_tok(std::size_t bb, std::size_t i) const { return p.tokens[bb][i]; }
  std::string k_tok(std::size_t bb, std::size_t j) const { return p.context_tokens[bb][j]; }
  std::string item(std::size_t bb) const { return p.batched ? fmt::format("b{} ", bb) : ""; }
  std::string head(std::size_t hd) const { return p.h > 1 ? fmt::format("h{} ", hd) : ""; }
  std::string kv(std::size_t g) const { return p.g > 1 ? fmt::format("kv{} ", g) : ""; }
};

void add(GradientExplanation& e, std::string a_name, double a, std::string b_name, double b) {
  e.terms.push_back({std::move(a_name), std::move(b_name), a, b, a * b});
}

double summed(const GradientExplanation& e) {
  double sum = 0;
  for (const GradientTerm& t : e.terms) sum += t.product;
  return sum;
}

// dY·Wᵀ for row `row` of `dY` (B, rows, d_out) and input feature r of W (d_in, d_out): Σ_c dY[r][c]·W[r][c].
void back_through(GradientExplanation& e, const Sources& s, const Tensor<double>& dY, std::string_view dy_name,
                  std::size_t row, const std::string& row_tok, const Tensor<double>& W, std::string_view w_name,
                  std::size_t r) {
  for (std::size_t c = 0; c < W.dim(1); ++c)
    add(e, fmt::format("{}{}[{}][{}]", s.item(s.b), dy_name, row_tok, c), dY(s.b, row, c),
        fmt::format("{}[{}][{}]", w_name, r, c), W(r, c));
}

// Σ_b Σ_i X[b][i][r]·dY[b][i][c]: a weight's gradient over every token of every item.
void over_tokens(GradientExplanation& e, const Sources& s, const Tensor<double>& X, std::string_view x_name,
                 const Tensor<double>& dY, std::string_view dy_name, std::size_t r, std::size_t c, bool keys) {
  for (std::size_t bb = 0; bb < X.dim(0); ++bb)
    for (std::size_t i = 0; i < X.dim(1); ++i) {
      const std::string tok = keys ? s.k_tok(bb, i) : s.q_tok(bb, i);
      add(e, fmt::format("{}{}[{}][{}]", s.item(bb), x_name, tok, r), X(bb, i, r),
          fmt::format("{}[{}][{}]", dy_name, tok, c), dY(bb, i, c));
    }
}

// Every explainer below takes the gradient's index `ix` batch-first (in_out for a weight).
using Ix = std::vector<std::size_t>;

// d_X: dQ, and in self-attention dK and dV, back through their weights.
void explain_d_X(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const Problem& p = s.p;
  const std::size_t i = ix[1], r = ix[2];
  e.sum = fmt::format("dX[{}][{}] = Σ_c dQ[{}][c]·W_q[{}][c]{}", s.q_tok(s.b, i), r, s.q_tok(s.b, i), r,
                      p.cross ? "" : " + Σ_c dK·W_k + Σ_c dV·W_v (the same token as a key and a value)");
  back_through(e, s, s.at[Step::d_q], "dQ", i, s.q_tok(s.b, i), p.W_q, "W_q", r);
  if (!p.cross) {
    back_through(e, s, s.at[Step::d_k], "dK", i, s.q_tok(s.b, i), p.W_k, "W_k", r);
    back_through(e, s, s.at[Step::d_v], "dV", i, s.q_tok(s.b, i), p.W_v, "W_v", r);
  }
}

// d_context: dK and dV back through their weights.
void explain_d_context(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const Problem& p = s.p;
  const std::size_t j = ix[1], r = ix[2];
  e.sum = fmt::format("dC[{}][{}] = Σ_c dK[{}][c]·W_k[{}][c] + Σ_c dV[{}][c]·W_v[{}][c]", s.k_tok(s.b, j), r,
                      s.k_tok(s.b, j), r, s.k_tok(s.b, j), r);
  back_through(e, s, s.at[Step::d_k], "dK", j, s.k_tok(s.b, j), p.W_k, "W_k", r);
  back_through(e, s, s.at[Step::d_v], "dV", j, s.k_tok(s.b, j), p.W_v, "W_v", r);
}

// d_W_q … d_W_o: Σ over every token of every item of the input times the output's gradient.
void explain_d_weight(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const Problem& p = s.p;
  const std::size_t r = ix[0], c = ix[1];
  const bool q = e.step == Step::d_W_q, o = e.step == Step::d_W_o;
  const std::string_view x = q ? "X" : o ? "O" : p.cross ? "C" : "X";
  const std::string_view g = q ? "dQ" : e.step == Step::d_W_k ? "dK" : e.step == Step::d_W_v ? "dV" : "dY";
  e.sum = fmt::format("d{}[{}][{}] = Σ_b Σ_t {}[t][{}]·{}[t][{}]", step_info(e.step).name.substr(2), r, c, x, r, g, c);
  const Tensor<double> concat = merge_heads(cast<double>(s.at[Step::head_outputs]));
  const Tensor<double>& X = q ? p.X : o ? concat : p.C;
  const Tensor<double>& G = s.at[step_info(e.step).inputs.front()];  // d_q, d_k, d_v or d_output (the table's)
  over_tokens(e, s, X, x, G, g, r, c, !q && !o);
  if (p.layout == Layout::out_in)
    e.notes.push_back(
        fmt::format("the input stores {} out × in, so this is entry [{}][{}] of the gradient as the "
                    "file holds it",
                    step_info(e.step).name.substr(2), c, r));
}

// d_b_q … d_b_o: Σ_b Σ_t dY[t][c]
void explain_d_bias(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const std::size_t c = ix[0];
  const bool keys = e.step == Step::d_b_k || e.step == Step::d_b_v;
  const Tensor<double>& G = s.at[step_info(e.step).inputs.front()];  // d_q, d_k, d_v or d_output (the table's)
  const std::string_view g = e.step == Step::d_b_q   ? "dQ"
                             : e.step == Step::d_b_k ? "dK"
                             : e.step == Step::d_b_v ? "dV"
                                                     : "dY";
  e.sum = fmt::format("d{}[{}] = Σ_b Σ_t {}[t][{}]: every token added the same bias", step_info(e.step).name.substr(2),
                      c, g, c);
  for (std::size_t bb = 0; bb < G.dim(0); ++bb)
    for (std::size_t t = 0; t < G.dim(1); ++t)
      add(e, fmt::format("{}{}[{}][{}]", s.item(bb), g, keys ? s.k_tok(bb, t) : s.q_tok(bb, t), c), G(bb, t, c), "1",
          1);
}

// d_masked, d_scaled, d_scores: the row's D term by term, then A·(dA − D), the mask and the scale.
void explain_softmax_backward(GradientExplanation& e, const Sources& s, const std::vector<std::size_t>& ix) {
  const Problem& p = s.p;
  const std::size_t b = ix[0];
  const Tensor<double>& A = s.at[Step::weights];
  const Tensor<double>& dA = s.at[Step::d_weights];
  const std::size_t hd = ix[1], i = ix[2], j = ix[3];
  e.sum = fmt::format("D = Σ_j' dA[{}][j']·A[{}][j'], then dS''[{}][{}] = A·(dA − D)", s.q_tok(b, i), s.q_tok(b, i),
                      s.q_tok(b, i), s.k_tok(b, j));
  for (std::size_t jj = 0; jj < p.m; ++jj)
    add(e, fmt::format("{}dA[{}][{}]", s.head(hd), s.q_tok(b, i), s.k_tok(b, jj)), dA(b, hd, i, jj),
        fmt::format("A[{}][{}]", s.q_tok(b, i), s.k_tok(b, jj)), A(b, hd, i, jj));
  const double D = summed(e), a = A(b, hd, i, j), da = dA(b, hd, i, j);
  const bool allowed = p.mask.allows(b, i, j);
  double value = a * (da - D);
  e.finish = fmt::format("A·(dA − D) = {:.6g}·({:.6g} − {:.6g})", a, da, D);
  if (a == 0) e.finish += allowed ? " (a weight of 0: the softmax cannot move it)" : " (the mask forbids this pair)";
  if (e.step != Step::d_masked && !allowed) {
    value = 0;
    e.finish += "; the mask forbids this pair, so its gradient is 0";
  }
  // back through each stage between the gradient's step and the mask whose slope is not 1, in the
  // chain's order from the mask back: the cap's 1 − (S_c/c)² read from its own value, any other as the
  // chain's backward gives it
  const std::optional<Step> of = step_of_gradient(e.step);  // d_scaled: scaled
  const std::optional<Stage> from = of ? step_stage(*of) : std::nullopt;
  const ScoreChain<double> chain(p, DType::float64);
  const Where w{b, hd, i, j};
  for (std::size_t k = stage_count; k-- > 0;) {
    const StageInfo& st = chain_stages()[k];
    if (from && k <= static_cast<std::size_t>(*from)) break;
    if (st.kind != StageKind::elementwise || st.unit_slope || !chain_has(st.stage, p) || st.stage == Stage::scale)
      continue;
    const double own = s.at[stage_step(st.stage)](b, hd, i, j);
    const double slope = chain.backward(st.stage, w, own, 1.0);
    value *= slope;
    if (st.stage == Stage::softcap)
      e.finish += fmt::format(", times the cap's slope 1 − ({:.6g}/{:.6g})² = {:.6g}", own, *p.softcap, slope);
    else e.finish += fmt::format(", times {}'s slope {:.6g}", st.step, slope);
  }
  if (e.step == Step::d_scores) {
    value *= p.scale;
    e.finish += fmt::format(", times the scale {:.6g}", p.scale);
  }
  e.recomputed = value;
}

// d_q_heads and d_k_heads with RoPE: the turned gradient turned back, two terms per turned feature.
void explain_turned_back(GradientExplanation& e, const Sources& s, const std::vector<std::size_t>& ix) {
  const Problem& p = s.p;
  const std::size_t b = ix[0];
  const bool keys = e.step == Step::d_k_heads;
  if (!p.rope)
    throw std::logic_error(fmt::format("explain_gradient: no term-by-term account of {}", step_info(e.step).name));
  const std::size_t hd = ix[1], t = ix[2], c = ix[3];
  const Rope& r = *p.rope;
  const Tensor<double>& cos = keys ? r.cos_k : r.cos_q;
  const Tensor<double>& sin = keys ? r.sin_k : r.sin_q;
  const Tensor<double>& d_rot = s.at[keys ? Step::d_k_rot : Step::d_q_rot];
  const std::string tok = keys ? s.k_tok(b, t) : s.q_tok(b, t);
  const std::string_view name = keys ? "dk_rot" : "dq_rot";
  for (std::size_t pair = 0; pair < cos.dim(1); ++pair) {
    const auto [a, other] = rope_pair(r.style, pair, cos.dim(1));
    if (c != a && c != other) continue;
    // dx_a = dy_a·cos + dy_b·sin, dx_b = dy_b·cos − dy_a·sin
    e.sum = fmt::format("{}[{}][{}] turned back by −pos·θ_{}", keys ? "dK" : "dQ", tok, c, pair);
    add(e, fmt::format("{}[{}][{}]", name, tok, c), d_rot(b, hd, t, c), fmt::format("cos(pos·θ_{})", pair),
        cos(t, pair));
    const std::size_t partner = c == a ? other : a;
    add(e, fmt::format("{}[{}][{}]", name, tok, partner), d_rot(b, hd, t, partner),
        fmt::format("{}sin(pos·θ_{})", c == a ? "" : "−", pair), c == a ? sin(t, pair) : -sin(t, pair));
    return;
  }
  e.sum =
      fmt::format("{}[{}][{}]: a feature RoPE does not turn passes its gradient through", keys ? "dK" : "dQ", tok, c);
  add(e, fmt::format("{}[{}][{}]", name, tok, c), d_rot(b, hd, t, c), "1", 1);
}

// d_sinks: ∂L/∂s_h = −Σ over every batch item and query of a_sink[i]·D[i], D[i] = Σ_j dA[i][j]·A[i][j].
void explain_sink_gradient(GradientExplanation& e, const Sources& s, std::size_t hd) {
  const Problem& p = s.p;
  const Tensor<double>& A = s.at[Step::weights];
  const Tensor<double>& share = s.at[Step::sink_weights];  // (B, h, n)
  const Tensor<double>& dA = s.at[Step::d_weights];
  e.sum = fmt::format("d_sink[{}] = Σ_i (−a_sink[i])·D[i], D[i] = Σ_j dA[i][j]·A[i][j]", hd);
  for (std::size_t bb = 0; bb < p.B; ++bb)
    for (std::size_t i = 0; i < p.n; ++i) {
      double D = 0;
      for (std::size_t j = 0; j < p.m; ++j) D += dA(bb, hd, i, j) * A(bb, hd, i, j);
      add(e, fmt::format("{}−a_sink[{}]", s.item(bb), s.q_tok(bb, i)), -share(bb, hd, i),
          fmt::format("D[{}]", s.q_tok(bb, i)), D);
    }
}

// d_output: given
void explain_upstream(GradientExplanation& e, const Sources&, const Ix&) {
  e.sum = "dY: the upstream gradient, given, not computed";
}

// d_head_outputs, d_q, d_k, d_v: the heads split or merged
void explain_relayout(GradientExplanation& e, const Sources&, const Ix&) {
  e.sum = "a relayout of the heads: the same number as the step it comes from, at its place there";
}

// d_concat: dY back through W_o, or dY itself without W_o
void explain_d_concat(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const std::size_t b = ix[0], i = ix[1], c = ix[2];
  if (!s.p.has_output_projection()) {
    e.sum = fmt::format("dO[{}][{}] = dY[{}][{}]", s.q_tok(b, i), c, s.q_tok(b, i), c);
    return;
  }
  e.sum = fmt::format("dO[{}][{}] = Σ_k dY[{}][k]·W_o[{}][k]", s.q_tok(b, i), c, s.q_tok(b, i), c);
  back_through(e, s, s.at[Step::d_output], "dY", i, s.q_tok(b, i), s.p.W_o, "W_o", c);
}

// d_dropped, d_weights: dO·Vᵀ, and with dropout the keep mask's factor for d_weights
void explain_d_weights(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const Problem& p = s.p;
  const Tensor<double>& dO = s.at[Step::d_head_outputs];
  const Tensor<double>& V = s.at[Step::v_heads];
  const std::size_t b = ix[0], hd = ix[1], i = ix[2], j = ix[3], kv = kv_head_of(hd, p.h, p.g);
  const bool through_mask = e.step == Step::d_weights && p.dropout;  // dA = dA_drop ⊙ Z / (1 − p)
  e.sum = fmt::format("{}[{}][{}] = Σ_c dO[{}][c]·V[{}][c]", p.dropout ? "dA_drop" : "dA", s.q_tok(b, i), s.k_tok(b, j),
                      s.q_tok(b, i), s.k_tok(b, j));
  for (std::size_t c = 0; c < p.d_v; ++c)
    add(e, fmt::format("{}dO[{}][{}]", s.head(hd), s.q_tok(b, i), c), dO(b, hd, i, c),
        fmt::format("{}V[{}][{}]", s.kv(kv), s.k_tok(b, j), c), V(b, kv, j, c));
  if (through_mask) {
    const DropoutMask mask(*p.dropout);
    const double factor = mask.factor<double>(b, hd, i, j);
    e.finish =
        fmt::format("dA = dA_drop · {}: dropout {} this weight", factor == 0 ? "0" : fmt::format("{:.6g}", factor),
                    factor == 0 ? "dropped" : "kept (and scaled by 1/(1 − p))");
    e.recomputed = summed(e) * factor;
  }
}

// d_v_heads: Aᵀ·dO over every query head that shares the value head
void explain_d_v_heads(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const Problem& p = s.p;
  const Tensor<double>& dO = s.at[Step::d_head_outputs];
  const std::size_t b = ix[0], kv = ix[1], j = ix[2], c = ix[3];
  // with dropout the weights A·V read: the dropped ones
  const Tensor<double>& read = s.at[p.dropout ? Step::dropped : Step::weights];
  const std::string_view a_name = p.dropout ? "A_drop" : "A";
  e.sum = fmt::format("dV[{}][{}] = Σ_heads Σ_i {}[i][{}]·dO[i][{}]", s.k_tok(b, j), c, a_name, s.k_tok(b, j), c);
  for (std::size_t hd = 0; hd < p.h; ++hd) {
    if (kv_head_of(hd, p.h, p.g) != kv) continue;
    for (std::size_t i = 0; i < p.n; ++i)
      add(e, fmt::format("{}{}[{}][{}]", s.head(hd), a_name, s.q_tok(b, i), s.k_tok(b, j)), read(b, hd, i, j),
          fmt::format("dO[{}][{}]", s.q_tok(b, i), c), dO(b, hd, i, c));
  }
}

// d_q_rot, d_q_heads: dS·K (with RoPE, d_q_heads is d_q_rot turned back)
void explain_d_queries(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const Problem& p = s.p;
  if (e.step == Step::d_q_heads && p.rope) return explain_turned_back(e, s, ix);
  const Tensor<double>& dS = s.at[Step::d_scores];
  const Tensor<double>& K = s.at[p.rope ? Step::k_rot : Step::k_heads];
  const std::size_t b = ix[0], hd = ix[1], i = ix[2], c = ix[3], kv = kv_head_of(hd, p.h, p.g);
  e.sum = fmt::format("dQ[{}][{}] = Σ_j dS[{}][j]·K[j][{}]", s.q_tok(b, i), c, s.q_tok(b, i), c);
  for (std::size_t j = 0; j < p.m; ++j)
    add(e, fmt::format("{}dS[{}][{}]", s.head(hd), s.q_tok(b, i), s.k_tok(b, j)), dS(b, hd, i, j),
        fmt::format("{}K[{}][{}]", s.kv(kv), s.k_tok(b, j), c), K(b, kv, j, c));
}

// d_k_rot, d_k_heads: dSᵀ·Q over every query head that shares the key head (with RoPE, d_k_heads is
// d_k_rot turned back)
void explain_d_keys(GradientExplanation& e, const Sources& s, const Ix& ix) {
  const Problem& p = s.p;
  if (e.step == Step::d_k_heads && p.rope) return explain_turned_back(e, s, ix);
  const Tensor<double>& dS = s.at[Step::d_scores];
  const Tensor<double>& Q = s.at[p.rope ? Step::q_rot : Step::q_heads];
  const std::size_t b = ix[0], kv = ix[1], j = ix[2], c = ix[3];
  e.sum = fmt::format("dK[{}][{}] = Σ_heads Σ_i dS[i][{}]·Q[i][{}]", s.k_tok(b, j), c, s.k_tok(b, j), c);
  for (std::size_t hd = 0; hd < p.h; ++hd) {
    if (kv_head_of(hd, p.h, p.g) != kv) continue;
    for (std::size_t i = 0; i < p.n; ++i)
      add(e, fmt::format("{}dS[{}][{}]", s.head(hd), s.q_tok(b, i), s.k_tok(b, j)), dS(b, hd, i, j),
          fmt::format("Q[{}][{}]", s.q_tok(b, i), c), Q(b, hd, i, c));
  }
}

void explain_d_sinks(GradientExplanation& e, const Sources& s, const Ix& ix) { explain_sink_gradient(e, s, ix[0]); }

// How each gradient step is explained term by term, one row per gradient step in the step table's order
// (observe/steps.hpp): a gradient step added to the table without its row fails to compile.
using Explainer = void (*)(GradientExplanation&, const Sources&, const Ix&);
struct ExplainerRow {
  Step step;
  Explainer explain;
};
constexpr std::array<ExplainerRow, gradient_step_count> explainers = {{
    {Step::d_output, explain_upstream},
    {Step::d_concat, explain_d_concat},
    {Step::d_head_outputs, explain_relayout},
    {Step::d_dropped, explain_d_weights},
    {Step::d_weights, explain_d_weights},
    {Step::d_v_heads, explain_d_v_heads},
    {Step::d_masked, explain_softmax_backward},
    {Step::d_capped, explain_softmax_backward},
    {Step::d_scaled, explain_softmax_backward},
    {Step::d_scores, explain_softmax_backward},
    {Step::d_q_rot, explain_d_queries},
    {Step::d_k_rot, explain_d_keys},
    {Step::d_q_heads, explain_d_queries},
    {Step::d_k_heads, explain_d_keys},
    {Step::d_q, explain_relayout},
    {Step::d_k, explain_relayout},
    {Step::d_v, explain_relayout},
    {Step::d_X, explain_d_X},
    {Step::d_context, explain_d_context},
    {Step::d_W_q, explain_d_weight},
    {Step::d_W_k, explain_d_weight},
    {Step::d_W_v, explain_d_weight},
    {Step::d_W_o, explain_d_weight},
    {Step::d_b_q, explain_d_bias},
    {Step::d_b_k, explain_d_bias},
    {Step::d_b_v, explain_d_bias},
    {Step::d_b_o, explain_d_bias},
    {Step::d_sinks, explain_d_sinks},
}};
constexpr bool in_table_order() {
  for (std::size_t k = 0; k < explainers.size(); ++k)
    if (static_cast<std::size_t>(explainers[k].step) != step_count + k) return false;
  return true;
}
static_assert(in_table_order(), "one explainer per gradient step, in the step table's order");

template <class T>
GradientExplanation explain_in(const Problem& original, const GradientRequest& r) {
  const Problem p = rounded_inputs<T>(original, r.dtype);
  NullObserver none;
  StepKeeper<double> at(none);
  run_naive_backward<T>(original, at, r.dtype);
  GradientExplanation e;
  e.dtype = r.dtype;
  e.step = r.step;
  e.index = r.index;
  e.formula = step_formula(r.step, original);
  e.upstream = original.upstream;
  e.grad_seed = original.grad_seed;
  const StepInfo& info = step_info(r.step);
  // the index batch-first, and a weight's in in_out
  std::vector<std::size_t> ix = r.index;
  if (!info.parameter && !p.batched) ix.insert(ix.begin(), 0);
  if (info.parameter && ix.size() == 2 && p.layout == Layout::out_in) std::swap(ix[0], ix[1]);
  const std::vector<std::string> dims = dim_names(r.step, p.batched, p.layout);
  std::vector<std::string> words;
  const std::size_t item = p.batched ? r.index[0] : 0;
  for (std::size_t a = 0; a < r.index.size(); ++a) {
    const std::size_t k = r.index[a];
    if (!info.parameter && dims[a] == "query") words.push_back(fmt::format("query {} ({})", k, p.tokens[item][k]));
    else if (!info.parameter && dims[a] == "key")
      words.push_back(fmt::format("key {} ({})", k, p.context_tokens[item][k]));
    else words.push_back(fmt::format("{} {}", dims[a], k));
  }
  e.where = fmt::format("{}", fmt::join(words, ", "));
  // the backward keeps a weight's gradient as the file holds it: at the index asked for, not the in_out one
  const Tensor<double>& value = at[r.step];
  const std::vector<std::size_t>& kept_at = info.parameter ? r.index : ix;
  std::size_t flat = 0;
  for (std::size_t a = 0; a < kept_at.size(); ++a) flat = flat * value.dim(a) + kept_at[a];
  e.value = value.values()[flat];
  const Sources s{p, at, info.parameter ? 0 : ix[0]};
  explainers[static_cast<std::size_t>(r.step) - step_count].explain(e, s, ix);
  if (e.finish.empty()) e.recomputed = e.terms.empty() ? e.value : summed(e);
  return e;
}

}  // namespace

Shape gradient_index_shape(Step step, const Problem& p) { return traced_shape(step, p, false); }

GradientExplanation explain_gradient(const std::shared_ptr<const Problem>& problem, const GradientRequest& request) {
  const Problem& p = *problem;
  if (!is_gradient_step(request.step) || !step_applies(request.step, p))
    throw std::invalid_argument(
        fmt::format("explain_gradient: {} is no gradient of this input", step_info(request.step).name));
  const Shape shape = gradient_index_shape(request.step, p);
  bool inside = request.index.size() == shape.size();
  for (std::size_t a = 0; inside && a < shape.size(); ++a) inside = request.index[a] < shape[a];
  if (!inside)
    throw std::invalid_argument(
        fmt::format("explain_gradient: index [{}] outside the shape {}", fmt::join(request.index, ", "), shape));
  return request.dtype == DType::float64 ? explain_in<double>(p, request) : explain_in<float>(p, request);
}

}  // namespace attn
