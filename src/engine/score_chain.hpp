#pragma once
// The score chain, described once: what happens to a score between the product Q·Kᵀ and the weights,
// and to a weight after the softmax. Four elementwise stages in the order they apply (the scale, the
// soft cap, ALiBi's bias, the mask), then the sinks' column, which joins each row's softmax, and
// dropout's keep mask, which multiplies each weight. For each stage, here and nowhere else: the step it
// makes (its name, formula and meaning are that step's row of observe/steps.cpp, and where it applies is
// that row's `needs`), its scalar forward, its backward (what its gradient sends to its input), its
// error terms, and its share of compare's forward noise floor.
//
// Every pass that applies the chain takes it from here: the rows (engine/rows.hpp), flash's tiles and
// their backward recompute, decoding, compare's forward floor, bench's float64 reference and explain.
// The fast kernels stay fused: the one place that fills their parameters (kernel_score_args,
// engine/fast_score.hpp) switches over every stage, so a stage added here without its vector form does
// not compile.

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/steps.hpp"
#include "ops/attention.hpp"
#include "ops/attention_backward.hpp"
#include "ops/dropout.hpp"

namespace attn {

enum class Stage { scale, softcap, alibi, mask, sinks, dropout };
inline constexpr std::size_t stage_count = 6;

// How a stage acts on the scores.
enum class StageKind {
  elementwise,    // one score in, one score out, before the softmax
  sink_column,    // one more logit in each row's softmax, of no value
  weight_factor,  // each weight times a factor, after the softmax
};

struct StageInfo {
  Stage stage;
  Step step;  // the step it makes
  StageKind kind;
  // Its error terms (engine/row_terms.hpp): how many roundings its value adds (terms' count), and how many
  // of them scale with the dot product's own size |scale|·Σ|q|·|k| (compare's forward floor folds these into
  // the product's count).
  double roundings;
  double dot_roundings;
  // Its backward is 1 wherever the mask allows: nothing to keep for the gradient.
  bool unit_slope;
};

// The stages in the order they apply; entry k is Stage k.
inline const std::array<StageInfo, stage_count>& chain_stages() {
  static const std::array<StageInfo, stage_count> table = {{
      {Stage::scale, Step::scaled, StageKind::elementwise, 1, 1, false},
      {Stage::softcap, Step::capped, StageKind::elementwise, 3, 0, false},
      {Stage::alibi, Step::bias, StageKind::elementwise, 2, 1, true},
      {Stage::mask, Step::masked, StageKind::elementwise, 0, 0, true},
      {Stage::sinks, Step::sink_weights, StageKind::sink_column, 0, 0, true},
      {Stage::dropout, Step::dropped, StageKind::weight_factor, 1, 0, false},
  }};
  return table;
}

inline const StageInfo& stage_info(Stage s) { return chain_stages()[static_cast<std::size_t>(s)]; }

// The stage that makes `step`, if a stage does.
inline std::optional<Stage> stage_of(Step step) {
  for (const StageInfo& s : chain_stages())
    if (s.step == step) return s.stage;
  return std::nullopt;
}

// Where one score sits: batch item, query head, query, key.
struct Where {
  std::size_t b = 0, hd = 0, i = 0, j = 0;
};

// The chain's parameters for one problem, in T: the scale and the cap as T numbers, ALiBi's slopes and
// the sinks rounded as inputs (to the half type a run stores in), the positions (whole numbers, exact),
// the mask and dropout's keep mask as the problem has them.
template <class T>
class ScoreChain {
 public:
  ScoreChain(const Problem& p, DType storage)
      : p_(&p), scale_(static_cast<T>(p.scale)), drop_(p.dropout.value_or(Dropout{})) {
    for (const StageInfo& s : chain_stages()) present_[static_cast<std::size_t>(s.stage)] = step_applies(s.step, p);
    for (const StageInfo& s : chain_stages()) {
      if (!has(s.stage)) continue;
      switch (s.stage) {
        case Stage::scale:
        case Stage::mask:
        case Stage::dropout: break;
        case Stage::softcap: cap_ = static_cast<T>(*p.softcap); break;
        case Stage::alibi:
          slopes_ = held(p.alibi->slopes, storage);
          pos_q_.assign(p.alibi->query_positions.begin(), p.alibi->query_positions.end());
          pos_k_.assign(p.alibi->key_positions.begin(), p.alibi->key_positions.end());
          break;
        case Stage::sinks: sinks_ = held(p.sinks, storage); break;
      }
    }
  }

  // Does the problem have this stage? (the scale and the mask: always)
  bool has(Stage s) const { return present_[static_cast<std::size_t>(s)]; }

  // The stage's value from its input x, at w.
  T forward(Stage s, const Where& w, T x) const {
    switch (s) {
      case Stage::scale: return x * scale_;  // S' = S·scale
      case Stage::softcap: return softcap_term(x, cap_);
      case Stage::alibi: return x + alibi_term(slopes_[w.hd], pos_q_[w.i], pos_k_[w.j]);
      case Stage::mask: return allows(w) ? x : -std::numeric_limits<T>::infinity();
      case Stage::sinks: return x;  // a column of its own, not a change of the scores (sink)
      case Stage::dropout: return x * factor(w);
    }
    return x;
  }

  // What the stage's gradient dy sends back to its input, from its own value y at w.
  T backward(Stage s, const Where& w, T y, T dy) const {
    switch (s) {
      case Stage::scale: return dy * scale_;
      case Stage::softcap: return dy * softcap_slope(y, cap_);  // 1 − (S_c/c)², from its own output
      case Stage::alibi: return dy;                             // a constant added
      case Stage::mask: return allows(w) ? dy : T{0};
      case Stage::sinks: return dy;
      case Stage::dropout: return dy * factor(w);  // back through the same keep mask
    }
    return dy;
  }

  // The score before the softmax from the dot product q·k at w: every elementwise stage of the problem in
  // order; -inf where the mask forbids.
  T score(const Where& w, T dot) const {
    T x = dot;
    for (const StageInfo& s : chain_stages())
      if (s.kind == StageKind::elementwise && has(s.stage)) x = forward(s.stage, w, x);
    return x;
  }

  // The same, and the slope of the score before the softmax with respect to the scaled score S' (the
  // stages after the scale, chained): what the softmax's backward multiplies by to reach dS'.
  T score(const Where& w, T dot, T& slope) const {
    T x = dot;
    std::array<T, stage_count> after{};  // each stage's value
    for (const StageInfo& s : chain_stages())
      if (s.kind == StageKind::elementwise && has(s.stage))
        after[static_cast<std::size_t>(s.stage)] = x = forward(s.stage, w, x);
    slope = T{1};
    for (std::size_t k = stage_count; k-- > 1;) {
      const StageInfo& s = chain_stages()[k];
      if (s.kind == StageKind::elementwise && has(s.stage) && !s.unit_slope)
        slope = backward(s.stage, w, after[k], slope);
    }
    return x;
  }

  // Does any stage after the scale have a slope of its own (not 1 where the mask allows)? Then a backward
  // pass needs it (score's slope); else the gradient of S' is the softmax's.
  bool sloped() const {
    for (const StageInfo& s : chain_stages())
      if (s.stage != Stage::scale && s.kind == StageKind::elementwise && has(s.stage) && !s.unit_slope) return true;
    return false;
  }

  bool allows(const Where& w) const { return p_->mask.allows(w.b, w.i, w.j); }

  // The sink logit of query head hd (Stage::sinks): taken raw, not scaled, capped or biased.
  T sink(std::size_t hd) const { return sinks_[hd]; }
  std::span<const T> sinks() const { return sinks_; }

  // Dropout's factor at w: 1/(1 − p) where the keep mask keeps the weight, 0 where it drops it.
  T factor(const Where& w) const { return drop_.template factor<T>(w.b, w.hd, w.i, w.j); }

  T scale() const { return scale_; }
  T cap() const { return cap_; }
  // ALiBi's bias at w: −slope_h·(pos_i − pos_j).
  T bias(const Where& w) const { return alibi_term(slopes_[w.hd], pos_q_[w.i], pos_k_[w.j]); }
  std::span<const T> slopes() const { return slopes_; }
  std::span<const T> query_positions() const { return pos_q_; }
  std::span<const T> key_positions() const { return pos_k_; }
  const DropoutMask& keep_mask() const { return drop_; }
  const Problem& problem() const { return *p_; }

 private:
  static std::vector<T> held(const std::vector<double>& values, DType storage) {
    std::vector<T> out(values.size());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = stored_input<T>(storage, values[k]);
    return out;
  }

  const Problem* p_;
  std::array<bool, stage_count> present_{};
  T scale_;
  T cap_ = 0;
  std::vector<T> slopes_;         // (h)
  std::vector<T> pos_q_, pos_k_;  // (n), (m)
  std::vector<T> sinks_;          // (h)
  DropoutMask drop_;
};

}  // namespace attn
