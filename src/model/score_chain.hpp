#pragma once
// The score chain, described once: what happens to a score between the product Q·Kᵀ and the softmax,
// and to a weight after it. Four elementwise stages in the order they apply (the scale, the soft cap,
// ALiBi's bias, the mask), then the sinks' column, which joins each row's softmax, and dropout's keep
// mask, which multiplies each weight. For each stage, here and nowhere else: what the input says of it
// (ScoreInputs, a part of every Problem), which inputs have it, the step it makes (by its name in
// observe/steps.hpp), its scalar forward, its backward (what its gradient sends to its input), its error
// terms on magnitudes, and its share of compare's forward noise floor.
//
// Every pass that applies the chain takes it from here: the rows (engine/rows.hpp), flash's tiles and
// their backward recompute, decoding, compare's forward floor, bench's float64 reference and explain.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "model/dropout.hpp"
#include "model/mask.hpp"
#include "model/positions.hpp"
#include "model/run.hpp"

namespace attn {

// What an input says of the chain's stages (docs/input-format.md); Problem is one of these.
struct ScoreInputs {
  double scale = 1.0;  // 1/sqrt(d_k) unless the input sets it
  bool scale_given = false;
  Mask mask;
  // Soft-capping (`softcap`, c > 0): the scaled scores become c·tanh(S'/c) before ALiBi's bias and the
  // mask, as Gemma 2 orders it.
  std::optional<double> softcap;
  std::optional<Alibi> alibi;  // ALiBi's bias on the scaled scores, when the input has `alibi`
  // Attention sinks (`sinks`): one logit per query head that joins each row's softmax denominator but has
  // no value, so a row can give weight to nothing. Empty: no sinks.
  std::vector<double> sinks;
  std::optional<Dropout> dropout;  // with p > 0 only
};

// ---- the stages' scalar forms

// Logit soft-capping, one score: c·tanh(s/c), about s while |s| is well below c, never beyond ±c.
// ref: Gemma 2 (arXiv:2408.00118), section 2, "logit soft-capping".
template <class T>
T softcap_term(T s, T c) {
  return c * std::tanh(s / c);
}
// Its slope from its own output: d/ds c·tanh(s/c) = 1 − tanh² = 1 − (S_c/c)².
template <class T>
T softcap_slope(T capped, T c) {
  const T t = capped / c;
  return 1 - t * t;
}

// ALiBi's bias of one score: a penalty linear in the distance from the query to the key.
// bias = -s·(pos_i - pos_j); the positions are whole numbers, so their difference is exact.
template <class T>
T alibi_term(T slope, T pos_i, T pos_j) {
  return -slope * (pos_i - pos_j);
}

enum class Stage { scale, softcap, alibi, mask, sinks, dropout };
inline constexpr std::size_t stage_count = 6;

// How a stage acts.
enum class StageKind {
  elementwise,    // one score in, one score out, before the softmax
  sink_column,    // one more logit in each row's softmax, of no value
  weight_factor,  // each weight after the softmax times a factor
};

struct StageInfo {
  Stage stage;
  std::string_view step;  // the name of the step it makes: "scaled"
  StageKind kind;
  // Its error terms (engine/row_terms.hpp): how many roundings its value adds (the terms' count), and how
  // many of them scale with the dot product's own size |scale|·Σ|q|·|k| (compare's forward floor counts
  // these with the product's).
  double roundings;
  double dot_roundings;
  // Its backward is dy itself wherever the mask allows: a pass needs nothing of it for the gradient.
  bool unit_slope;
  // Its backward reads its own value (the cap's slope 1 − (S_c/c)²): a backward pass keeps it.
  bool reads_own;
  // The input's key that turns it on (docs/input-format.md), empty for a stage of every input; the step
  // table's needs for its step and the gradients it alone has (observe/steps.hpp).
  std::string_view feature;
  // Its step's formula and meaning in the step table, as they read before an input is known (a formula
  // that depends on the input is observe/step_texts.cpp's).
  std::string_view formula;
  std::string_view description;
  // What formulas call its value ("S_c"; "{} + B": its input's name and then "+ B"), and the word for the
  // scores after it ("capped").
  std::string_view symbol;
  std::string_view adjective;
};

// The stages in the order they apply; entry k is Stage k.
inline constexpr auto chain_stage_table = std::to_array<StageInfo>({
    {Stage::scale, "scaled", StageKind::elementwise, 1, 1, false, false, "", "S' = S · scale",
     "the scores scaled (by 1/√d_k unless set) so their spread does not grow with d_k", "S'", "scaled"},
    {Stage::softcap, "capped", StageKind::elementwise, 3, 0, false, true, "softcap", "S_c = c·tanh(S'/c)",
     "the scaled scores soft-capped: near S' while small, never beyond ±c, so no logit can run away", "S_c", "capped"},
    {Stage::alibi, "bias", StageKind::elementwise, 2, 1, true, false, "alibi", "S'' = S' - m_h·(i - j)",
     "ALiBi: each score lowered in proportion to how far the key lies behind the query, by a slope per head", "{} + B",
     "biased"},
    {Stage::mask, "masked", StageKind::elementwise, 0, 0, true, false, "", "S'' = S' where allowed, -inf elsewhere",
     "keys a query may not see get -inf, which the softmax turns into weight 0", "S''", "masked"},
    {Stage::sinks, "sink_weights", StageKind::sink_column, 0, 0, true, false, "sinks", "a_sink = exp(sink_h - M) / l",
     "the weight each query gives its head's sink: a logit with no value, so this share of the row goes to "
     "nothing and the row's weights sum to 1 - a_sink",
     "a_sink", ""},
    {Stage::dropout, "dropped", StageKind::weight_factor, 1, 0, false, false, "dropout", "A_drop = A ⊙ Z / (1 - p)",
     "the weights after dropout: each kept with probability 1 - p and scaled by 1/(1 - p), the rest set to 0, by "
     "a keep mask Z drawn from the seed and each entry's position",
     "A_drop", "dropped"},
});
static_assert(chain_stage_table.size() == stage_count, "one entry per stage");
static_assert(
    [] {
      for (std::size_t k = 0; k < stage_count; ++k)
        if (static_cast<std::size_t>(chain_stage_table[k].stage) != k) return false;
      return true;
    }(),
    "entry k of chain_stage_table is Stage k");

inline const std::array<StageInfo, stage_count>& chain_stages() { return chain_stage_table; }

inline const StageInfo& stage_info(Stage s) { return chain_stages()[static_cast<std::size_t>(s)]; }

// Does `p` have the stage? The scale and the mask: every input.
inline bool chain_has(Stage s, const ScoreInputs& p) {
  switch (s) {
    case Stage::scale:
    case Stage::mask: return true;
    case Stage::softcap: return p.softcap.has_value();
    case Stage::alibi: return p.alibi.has_value();
    case Stage::sinks: return !p.sinks.empty();
    case Stage::dropout: return p.dropout.has_value();
  }
  return false;
}

// The elementwise stage before `s` that `p` has, if any (none: s reads the scores themselves).
inline std::optional<Stage> stage_before(Stage s, const ScoreInputs& p) {
  std::optional<Stage> before;
  for (const StageInfo& t : chain_stages()) {
    if (t.stage == s) break;
    if (t.kind == StageKind::elementwise && chain_has(t.stage, p)) before = t.stage;
  }
  return before;
}

// The last elementwise stage of `p`: what the softmax reads (the mask, which every input has).
inline Stage last_score_stage(const ScoreInputs& p) {
  Stage last = Stage::scale;
  for (const StageInfo& t : chain_stages())
    if (t.kind == StageKind::elementwise && chain_has(t.stage, p)) last = t.stage;
  return last;
}

// Where one score sits: batch item, query head, query, key.
struct Where {
  std::size_t b = 0, hd = 0, i = 0, j = 0;
};

// The chain's inputs as a run in T that stores in `storage` holds them, written back in double: the scale
// and the cap as T numbers, ALiBi's slopes and the sinks rounded as inputs (to the half type a run stores
// in); the mask, the positions and dropout's seed are exact. What ScoreChain<T> holds, so that a reference
// run on these (compare's) sees the engines' inputs.
template <class T>
void round_as_held(ScoreInputs& s, DType storage) {
  const auto input = [storage](double& x) { x = static_cast<double>(stored_input<T>(storage, x)); };
  s.scale = static_cast<double>(static_cast<T>(s.scale));
  for (const StageInfo& info : chain_stages()) {
    if (!chain_has(info.stage, s)) continue;
    switch (info.stage) {
      case Stage::scale:
      case Stage::mask:
      case Stage::dropout: break;
      case Stage::softcap: s.softcap = static_cast<double>(static_cast<T>(*s.softcap)); break;
      case Stage::alibi:
        for (double& x : s.alibi->slopes) input(x);
        break;
      case Stage::sinks:
        for (double& x : s.sinks) input(x);
        break;
    }
  }
}

// Where the fast path has laid out one block of scores (one head, rows r0 … of its queries, a run of keys):
// the arrays of its own layout that the kernels read, padded as they read them.
template <class T>
struct ScoreBlock {
  std::size_t hd = 0, r0 = 0;        // the head and the block's first query
  const T* pos_k = nullptr;          // ALiBi's positions of the block's keys
  const std::int64_t* lo = nullptr;  // the mask: each row's kept keys [lo, hi) of the block,
  const std::int64_t* hi = nullptr;
  const T* keep = nullptr;  // and of those only where keep is not 0, or none
  const T* drop = nullptr;  // dropout's factor of each score of the block, or none
};

// The chain's parameters for one problem, in T: the scale and the cap as T numbers, ALiBi's slopes and
// the sinks rounded as inputs (to the half type a run stores in), the positions (whole numbers, exact),
// the mask and dropout's keep mask as the input has them. Valid while `p` is.
template <class T>
class ScoreChain {
 public:
  ScoreChain(const ScoreInputs& p, DType storage)
      : p_(&p), scale_(static_cast<T>(p.scale)), drop_(p.dropout.value_or(Dropout{})) {
    for (const StageInfo& s : chain_stages()) {
      present_[static_cast<std::size_t>(s.stage)] = chain_has(s.stage, p);
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

  // The stage's value at w from its input x.
  T forward(Stage s, const Where& w, T x) const {
    switch (s) {
      case Stage::scale: return x * scale_;               // S' = S·scale
      case Stage::softcap: return softcap_term(x, cap_);  // S_c = c·tanh(S'/c)
      case Stage::alibi: return x + bias(w);              // + ALiBi's −slope_h·(pos_i − pos_j)
      case Stage::mask: return allows(w) ? x : -std::numeric_limits<T>::infinity();
      case Stage::sinks: return x;  // a column of its own (sink), not a change of the scores
      case Stage::dropout: return x * factor(w);
    }
    return x;
  }

  // What the stage's gradient dy at w sends back to its input, given its own value y.
  T backward(Stage s, const Where& w, T y, T dy) const {
    switch (s) {
      case Stage::scale: return dy * scale_;
      case Stage::softcap: return dy * softcap_slope(y, cap_);  // 1 − (S_c/c)², from its own output
      case Stage::alibi: return dy;                             // a constant added
      case Stage::mask: return allows(w) ? dy : T{0};           // nothing flows back through a forbidden score
      case Stage::sinks: return dy;
      case Stage::dropout: return dy * factor(w);  // back through the same keep mask
    }
    return dy;
  }

  // The score the softmax reads, from the dot product q·k at w: every elementwise stage of the problem
  // in order; -inf where the mask forbids.
  T score(const Where& w, T dot) const {
    T x = dot;
    for (const StageInfo& s : chain_stages())
      if (s.kind == StageKind::elementwise && has(s.stage)) x = forward(s.stage, w, x);
    return x;
  }

  // The same, with its slope with respect to the scaled score S': the later stages' backwards chained
  // from 1, what the softmax's backward is multiplied by to reach dS'.
  T score(const Where& w, T dot, T& slope) const {
    std::array<T, stage_count> value{};  // each stage's own value
    T x = dot;
    for (const StageInfo& s : chain_stages())
      if (s.kind == StageKind::elementwise && has(s.stage))
        value[static_cast<std::size_t>(s.stage)] = x = forward(s.stage, w, x);
    slope = T{1};
    for (std::size_t k = stage_count; k-- > 1;) {
      const StageInfo& s = chain_stages()[k];
      if (s.kind == StageKind::elementwise && has(s.stage) && !s.unit_slope)
        slope = backward(s.stage, w, value[k], slope);
    }
    return x;
  }

  // Does a stage after the scale have a slope other than 1 (score's slope)? Without one the gradient of S'
  // is the softmax's own.
  bool sloped() const {
    for (const StageInfo& s : chain_stages())
      if (s.stage != Stage::scale && s.kind == StageKind::elementwise && has(s.stage) && !s.unit_slope) return true;
    return false;
  }

  bool allows(const Where& w) const { return p_->mask.allows(w.b, w.i, w.j); }

  // The sink logit of query head hd: taken raw, not scaled, capped or biased like the scores.
  T sink(std::size_t hd) const { return sinks_[hd]; }
  std::span<const T> sinks() const { return sinks_; }
  std::span<T> sinks() { return sinks_; }  // held as an input: a gradient check moves them

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

  // The fast kernels' parameters for one block (kernel/args.hpp's ScoreArgs, the struct `a`): every stage
  // the input has, each setting its own. The switch names every stage, so a stage added to the chain
  // without its kernel parameters does not compile (-Wswitch, an error in CI).
  template <class Args>
  void fill(Args& a, const ScoreBlock<T>& block) const {
    for (const StageInfo& s : chain_stages()) {
      if (!has(s.stage)) continue;
      switch (s.stage) {
        case Stage::scale: a.scale = scale_; break;
        case Stage::softcap: a.softcap = cap_; break;
        case Stage::alibi:
          a.slope = slopes_[block.hd];
          a.pos_q = pos_q_.data() + block.r0;
          a.pos_k = block.pos_k;
          break;
        case Stage::mask:
          a.lo = block.lo;
          a.hi = block.hi;
          a.keep = block.keep;
          break;
        case Stage::sinks: a.sink = &sinks_[block.hd]; break;
        case Stage::dropout: a.drop = block.drop; break;
      }
    }
  }

  // ---- the error terms, on magnitudes (a chain in double, on the exact values)

  // The size of what the stage's value at w sums (Σ|terms|), from its input x and its own value y; its
  // count is stage_info(s).roundings.
  T terms(Stage s, const Where& w, T x, T y) const {
    switch (s) {
      case Stage::scale:
      case Stage::softcap:
      case Stage::mask:
      case Stage::sinks:
      case Stage::dropout: return std::fabs(y);
      case Stage::alibi: return std::fabs(x) + std::fabs(bias(w));  // S' + b: two terms
    }
    return std::fabs(y);
  }

  // The stage's backward on magnitudes: the size of what its input's gradient sums, from the size dy of
  // its own. The cap's slope and the mask are at most 1 and pass the size on; dropout's keep mask is
  // bounded by its largest factor 1/(1 − p).
  T d_terms(Stage s, const Where&, T dy) const {
    switch (s) {
      case Stage::scale: return dy * std::fabs(scale_);
      case Stage::softcap:
      case Stage::alibi:
      case Stage::mask:
      case Stage::sinks: return dy;
      case Stage::dropout: return dy * (1 / (1 - drop_.p()));
    }
    return dy;
  }

  // compare's forward noise floor (engine/compare.hpp, step 2): what the stage adds to the error of a
  // score at w beyond the roundings counted with the dot product's (dot_roundings), given that product's
  // size |scale|·Σ_e |q_e|·|k_je| and the unit roundoff u and smallest subnormal eta of the run.
  T added_error(Stage s, const Where& w, T size, T u, T eta) const {
    switch (s) {
      case Stage::scale:
      case Stage::mask:
      case Stage::sinks:
      case Stage::dropout: return 0;
      case Stage::softcap: return u * (size + 2 * cap_) + eta;  // s/c, tanh, the product by c: slope <= 1
      case Stage::alibi: return 2 * u * std::fabs(bias(w)) + eta;
    }
    return 0;
  }

 private:
  static std::vector<T> held(const std::vector<double>& values, DType storage) {
    std::vector<T> out(values.size());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = stored_input<T>(storage, values[k]);
    return out;
  }

  const ScoreInputs* p_;
  std::array<bool, stage_count> present_{};
  T scale_;
  T cap_ = 0;
  std::vector<T> slopes_;         // (h)
  std::vector<T> pos_q_, pos_k_;  // (n), (m)
  std::vector<T> sinks_;          // (h)
  DropoutMask drop_;
};

}  // namespace attn
