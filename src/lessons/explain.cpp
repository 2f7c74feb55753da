#include "lessons/explain.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "observe/steps.hpp"
#include "ops/attention.hpp"
#include "model/dropout.hpp"
#include "ops/online_softmax.hpp"
#include "trace/record.hpp"
#include "trace/trace.hpp"

namespace attn {

double ProductSum::recomputed() const {
  double sum = 0;
  for (const double t : terms) sum += t;
  return bias ? sum + *bias : sum;
}

// ------------------------------------------------------------------ naming the tokens

namespace {

// "\"The\", \"cat\", \"sat\"", at most `limit` of them, then how many more.
std::string some_names(std::span<const std::string> tokens, std::size_t limit) {
  std::string out;
  for (std::size_t t = 0; t < std::min(tokens.size(), limit); ++t)
    out += fmt::format("{}\"{}\"", t == 0 ? "" : ", ", tokens[t]);
  if (tokens.size() > limit) out += fmt::format(", … ({} more)", tokens.size() - limit);
  return out;
}

std::string index_range(std::size_t count) { return count == 1 ? std::string("0") : fmt::format("0 to {}", count - 1); }

}  // namespace

TokenLookup find_token(std::span<const std::string> tokens, std::string_view text, std::string_view what) {
  std::vector<std::size_t> named;
  for (std::size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] == text) named.push_back(t);
  if (named.size() == 1) return {named.front(), ""};
  if (named.size() > 1) {
    std::vector<std::size_t> shown(named.begin(), named.begin() + std::min<std::ptrdiff_t>(8, std::ssize(named)));
    return {std::nullopt, fmt::format("\"{}\" is {} {} tokens ({}{}): give the index of the one you mean", text,
                                      named.size(), what, fmt::join(shown, ", "), named.size() > 8 ? ", …" : "")};
  }
  std::size_t index = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), index);
  const bool number = !text.empty() && error == std::errc() && end == text.data() + text.size();
  if (number && index < tokens.size()) return {index, ""};
  if (number)
    return {std::nullopt, fmt::format("no {} token is called \"{}\", and the {} indices are {}", what, text, what,
                                      index_range(tokens.size()))};
  return {std::nullopt, fmt::format("no {} token \"{}\"; the {} tokens are {} (or an index, {})", what, text, what,
                                    some_names(tokens, 8), index_range(tokens.size()))};
}

// ------------------------------------------------------------------ helpers

namespace {

constexpr double minus_inf = -std::numeric_limits<double>::infinity();

// `step` of `trace`, with a leading batch axis of extent 1 when the trace dropped it (a 2-D input).
Tensor<double> recorded(const Trace& trace, Step step) {
  for (const StepRecord& s : trace.steps) {
    if (s.step != step) continue;
    if (trace.problem->batched) return s.value;
    Shape shape = s.value.shape();
    shape.insert(shape.begin(), 1);
    return Tensor<double>(std::move(shape), std::vector<double>(s.value.values().begin(), s.value.values().end()));
  }
  throw std::logic_error(fmt::format("explain: the run kept no step {}", step_info(step).name));
}

template <class T>
double in_dtype(double x) {
  return static_cast<double>(static_cast<T>(x));
}

ProductSum products(std::vector<double> a, std::vector<double> b, std::optional<double> bias, double value) {
  ProductSum s{std::move(a), std::move(b), {}, bias, value};
  s.terms.resize(s.a.size());
  for (std::size_t t = 0; t < s.a.size(); ++t) s.terms[t] = s.a[t] * s.b[t];
  return s;
}

// Row `i` of batch item `b` of X (B, n, d_in) times column `col` of W (d_in, d_out), plus bias[col]:
// the factors in T, and the engine's `value`.
template <class T>
ProductSum row_times_column(const Tensor<double>& X, std::size_t b, std::size_t i, const Tensor<double>& W,
                            std::size_t col, const std::vector<double>& bias, double value) {
  const std::size_t d_in = W.dim(0);
  std::vector<double> x(d_in), w(d_in);
  for (std::size_t r = 0; r < d_in; ++r) {
    x[r] = in_dtype<T>(X(b, i, r));
    w[r] = in_dtype<T>(W(r, col));
  }
  std::optional<double> beta;
  if (!bias.empty()) beta = in_dtype<T>(bias[col]);
  return products(std::move(x), std::move(w), beta, value);
}

// Row `i` of batch item `b` of a (B, rows, width) tensor, in T.
template <class T>
std::vector<double> token_row(const Tensor<double>& X, std::size_t b, std::size_t i) {
  std::vector<double> row(X.dim(2));
  for (std::size_t r = 0; r < row.size(); ++r) row[r] = in_dtype<T>(X(b, i, r));
  return row;
}

// Why the mask forbids query i of item b to see key j, in one phrase.
std::string why_masked(const Problem& p, std::size_t b, std::size_t i, std::size_t j) {
  const Mask& mask = p.mask;
  const auto [first, last] = mask.band(i);
  switch (mask.kind) {
    case MaskKind::causal:
      return fmt::format("the causal mask lets query {} see keys up to {} only, and key {} comes after", i,
                         last == 0 ? std::string("none") : fmt::format("{}", last - 1), j);
    case MaskKind::sliding_window:
      if (j >= last) return fmt::format("key {} comes after query {}'s window, keys {} to {}", j, i, first, last - 1);
      return fmt::format("key {} lies before query {}'s window of {} keys, which starts at key {}", j, i, mask.window,
                         first);
    case MaskKind::padding: return fmt::format("key {} is padding (keep = 0 in batch item {})", j, b);
    case MaskKind::custom: return fmt::format("the custom mask has 0 at query {}, key {}", i, j);
    case MaskKind::none: break;
  }
  return "";
}

// The flash pass's tiles of query row i of head hd of item b, in the order they ran.
std::vector<const FlashTile*> row_tiles(const FlashRecord& f, std::size_t b, std::size_t hd, std::size_t i) {
  std::vector<const FlashTile*> tiles;
  for (const FlashTile& t : f.tiles)
    if (t.batch == b && t.head == hd && t.row_begin <= i && i < t.row_end) tiles.push_back(&t);
  return tiles;
}

// Every key's weight of row i as the flash pass holds it without ever forming it:
// a_ij = P_ij · Π alpha (the key tiles after j's) / l (the final running sum), in double.
std::vector<double> flash_row_weights(const std::vector<const FlashTile*>& tiles, std::size_t i, std::size_t m) {
  std::vector<double> a(m, 0.0);
  double l = 0;
  for (const FlashTile* t : tiles) {
    if (t->skipped) continue;
    const std::size_t r = i - t->row_begin;
    // every key so far shrinks by this tile's alpha; this tile's keys enter with their p
    for (std::size_t k = 0; k < t->col_begin; ++k) a[k] *= t->alpha(r);
    for (std::size_t k = t->col_begin; k < t->col_end; ++k) a[k] = t->P(r, k - t->col_begin);
    l = t->l_new(r);
  }
  for (double& x : a) x = l == 0 ? 0 : x / l;
  return a;
}

// Flash's output row i of head hd of item b: O / l at the end of its query tile.
std::vector<double> flash_head_output(const FlashRecord& f, std::size_t b, std::size_t hd, std::size_t i) {
  for (const FlashFinal& d : f.finals)
    if (d.batch == b && d.head == hd && d.row_begin <= i && i < d.row_end) {
      std::vector<double> o(d.O.dim(1));
      for (std::size_t e = 0; e < o.size(); ++e) o[e] = d.O(i - d.row_begin, e);
      return o;
    }
  throw std::logic_error(fmt::format("explain: the flash pass kept no result for query {} of head {}", i, hd));
}

// ------------------------------------------------------------------ the flash walk

FlashExplanation flash_walk(const Trace& trace, const Explanation& e, std::size_t m) {
  const FlashRecord& f = *trace.flash;
  const std::size_t i = e.query, j = e.key;
  const std::vector<const FlashTile*> tiles = row_tiles(f, e.batch, e.head, i);
  if (tiles.empty()) throw std::logic_error("explain: the flash pass kept no tile of this row");

  FlashExplanation x;
  x.tile_size = f.tile_size;
  x.query_tile = tiles.front()->i;
  x.row_begin = tiles.front()->row_begin;
  x.row_end = tiles.front()->row_end;
  x.key_tile = j / f.tile_size.Bc;
  x.s = minus_inf;
  const std::size_t r = i - x.row_begin;

  // pass 1: follow the row's running state (m, l) through every key tile, and key j's part of l
  double m_run = minus_inf, l_run = 0, share = 0;
  for (const FlashTile* t : tiles) {
    FlashTileStep step;
    step.tile = t->j;
    step.col_begin = t->col_begin;
    step.col_end = t->col_end;
    step.skipped = t->skipped;
    if (t->skipped) {  // no scores, no change: nothing was summed, nothing rescaled
      step.m_prev = step.m_new = m_run;
      step.l_prev = step.l_new = l_run;
    } else {
      step.m_prev = t->m_prev(r);
      step.m_new = t->m_new(r);
      step.alpha = t->alpha(r);
      step.l_prev = t->l_prev(r);
      step.l_new = t->l_new(r);
      for (std::size_t k = 0; k < t->col_end - t->col_begin; ++k) {
        step.s.push_back(t->S(r, k));
        step.p.push_back(t->P(r, k));
      }
      if (t->j == x.key_tile) {
        x.s = t->S(r, j - t->col_begin);
        x.p = t->P(r, j - t->col_begin);
        share = x.p;
      } else if (t->j > x.key_tile) {
        x.later_alphas.push_back(step.alpha);
        share *= step.alpha;
      }
      m_run = step.m_new;
      l_run = step.l_new;
    }
    step.share = t->j >= x.key_tile ? share : 0;
    x.steps.push_back(std::move(step));
  }

  // pass 2: the weight flash never forms, p·Π alpha / l, and every key's the same way
  for (const double alpha : x.later_alphas) x.alpha_product *= alpha;
  x.l = l_run;
  x.weight = l_run == 0 ? 0 : x.p * x.alpha_product / l_run;
  x.weights = flash_row_weights(tiles, i, m);

  // pass 3: against naive's weight, within what rounding allows
  x.naive_weight = e.weight;
  double low = std::numeric_limits<double>::infinity(), gap = 0;
  for (std::size_t k = 0; k < m; ++k) {
    if (!e.row[k].allowed) continue;
    const double naive_s = e.row[k].scaled;
    low = std::min(low, naive_s);
    const FlashTile* t = tiles.at(k / f.tile_size.Bc);
    if (!t->skipped) gap = std::max(gap, std::fabs(t->S(r, k - t->col_begin) - naive_s));
  }
  const double spread = e.empty_row ? 0 : e.row_max - low;
  const std::size_t key_tiles = (m + f.tile_size.Bc - 1) / f.tile_size.Bc;
  x.tolerance = flash_weight_tolerance(e.weight, spread, gap, key_tiles, m, e.dtype);
  x.within = std::fabs(x.weight - x.naive_weight) <= x.tolerance;
  return x;
}

// ------------------------------------------------------------------ one weight

// The run that explains a_ij: the engine in the request's dtype (flash with naive beside it), keeping
// the steps of head hd only.
RunRequest weight_run(const Problem& p, const ExplainRequest& r) {
  RunRequest run;
  run.engine = r.engine == Engine::flash ? Engine::both : Engine::naive;
  run.dtype = r.dtype;
  run.tile_size = r.tile_size;
  run.filter.only = steps_explaining_weight(p);
  run.filter.head = r.head;
  run.filter.tiles = r.engine == Engine::flash;
  return run;
}

// The steps of the one head that weight_run keeps: the head axis has extent 1.
struct HeadSteps {
  Tensor<double> Q, K, V;       // (B, 1, n, d_k), (B, 1, m, d_k), (B, 1, m, d_v)
  Tensor<double> S, S_scaled;   // (B, 1, n, m)
  Tensor<double> Q_dot, K_dot;  // (B, 1, n, d_k), (B, 1, m, d_k) what the score reads: with RoPE the turned heads
  // (B, 1, n, m) each stage between the scale and the mask that the input has, in the chain's order
  std::vector<std::pair<Stage, Tensor<double>>> middle;
  Tensor<double> S_masked, A;  // (B, 1, n, m)
  Tensor<double> sink_share;   // (B, 1, n) with sinks: each row's share of the head's sink
  Tensor<double> A_drop;       // (B, 1, n, m) with dropout: the dropped weights
  Tensor<double> O;            // (B, 1, n, d_v)

  HeadSteps(const Trace& trace, const Problem& p)
      : Q(recorded(trace, Step::q_heads)),
        K(recorded(trace, Step::k_heads)),
        V(recorded(trace, Step::v_heads)),
        S(recorded(trace, Step::scores)),
        S_scaled(recorded(trace, Step::scaled)),
        Q_dot(p.rope ? recorded(trace, Step::q_rot) : Q),
        K_dot(p.rope ? recorded(trace, Step::k_rot) : K),
        S_masked(recorded(trace, Step::masked)),
        A(recorded(trace, Step::weights)),
        sink_share(p.sinks.empty() ? Tensor<double>() : recorded(trace, Step::sink_weights)),
        A_drop(p.dropout ? recorded(trace, Step::dropped) : Tensor<double>()),
        O(recorded(trace, Step::head_outputs)) {
    for (const StageInfo& s : chain_stages())
      if (s.kind == StageKind::elementwise && s.stage != Stage::scale && s.stage != Stage::mask &&
          chain_has(s.stage, p))
        middle.emplace_back(s.stage, recorded(trace, stage_step(s.stage)));
  }

  // What the mask applies to: the scores after the last stage before it.
  const Tensor<double>& mask_input() const { return middle.empty() ? S_scaled : middle.back().second; }
};

// Which weight, of which problem: everything an Explanation says before the first number.
Explanation weight_named(const Problem& p, const ExplainRequest& r) {
  Explanation e;
  e.dtype = r.dtype;
  e.engine = r.engine == Engine::flash ? Engine::flash : Engine::naive;
  e.batch = r.batch;
  e.head = r.head;
  e.kv_head = kv_head_of(r.head, p.h, p.g);
  e.query = r.query;
  e.key = r.key;
  e.h = p.h;
  e.g = p.g;
  e.d_k = p.d_k;
  e.d_v = p.d_v;
  e.batched = p.batched;
  e.cross = p.cross;
  e.output_projection = p.has_output_projection();
  e.query_token = p.tokens[r.batch][r.query];
  e.key_tokens = p.context_tokens[r.batch];
  return e;
}

// The inputs and their projections, q = x·W_q + b_q and k = c·W_k + b_k, for this head; with RoPE, q
// and k turned by their positions before the score.
template <class T>
void explain_projections(const Problem& p, const HeadSteps& kept, Explanation& e) {
  const std::size_t b = e.batch, i = e.query, j = e.key;
  e.x = token_row<T>(p.X, b, i);
  e.c = token_row<T>(p.C, b, j);
  for (std::size_t c = 0; c < p.d_k; ++c) {
    e.q.push_back(row_times_column<T>(p.X, b, i, p.W_q, e.head * p.d_k + c, p.b_q, kept.Q(b, 0, i, c)));
    e.k.push_back(row_times_column<T>(p.C, b, j, p.W_k, e.kv_head * p.d_k + c, p.b_k, kept.K(b, 0, j, c)));
  }
  if (!p.rope) return;
  for (std::size_t c = 0; c < p.d_k; ++c) {
    e.q_rot.push_back(kept.Q_dot(b, 0, i, c));
    e.k_rot.push_back(kept.K_dot(b, 0, j, c));
  }
  e.pos_q = p.rope->positions[i];
  e.pos_k = p.rope->context_positions[j];
  e.theta = p.rope->frequencies;
  e.rope_pairs = p.rope->style == RopeStyle::half ? fmt::format("(i, i + {})", p.rope->dims / 2) : "(2i, 2i + 1)";
}

// The score q·k = Σ_c q_c·k_c, its scale, and each stage of the chain before the mask that the input has (with
// softcap its cap, with ALiBi its bias).
template <class T>
void explain_score(const Problem& p, const HeadSteps& kept, Explanation& e) {
  const std::size_t b = e.batch, i = e.query, j = e.key;
  std::vector<double> q_row(p.d_k), k_row(p.d_k);
  for (std::size_t c = 0; c < p.d_k; ++c) {
    q_row[c] = kept.Q_dot(b, 0, i, c);
    k_row[c] = kept.K_dot(b, 0, j, c);
  }
  e.dot = products(std::move(q_row), std::move(k_row), std::nullopt, kept.S(b, 0, i, j));
  e.scale = in_dtype<T>(p.scale);
  e.scale_given = p.scale_given;
  e.scaled = kept.S_scaled(b, 0, i, j);
  for (const auto& [stage, values] : kept.middle)
    e.stages.push_back({stage, stage_info(stage).step, stage_info(stage).formula, values(b, 0, i, j)});
  for (const StageValue& s : e.stages) {
    if (s.stage == Stage::softcap) {
      e.softcap = in_dtype<T>(*p.softcap);
    }
    if (s.stage == Stage::alibi) {
      e.slope = in_dtype<T>(p.alibi->slopes[e.head]);
      e.alibi_pos_q = p.alibi->query_positions[i];
      e.alibi_pos_k = p.alibi->key_positions[j];
      e.alibi = alibi_term(e.slope, e.alibi_pos_q, e.alibi_pos_k);
    }
  }
}

// Whether the mask lets query i see key j, and if not, why.
void explain_mask(const Problem& p, Explanation& e) {
  e.allowed = p.mask.allows(e.batch, e.query, e.key);
  e.mask = p.mask.summary();
  if (!e.allowed) e.mask_reason = why_masked(p, e.batch, e.query, e.key);
}

// Naive's softmax of row i, recomputed in T: the max, then exp(s − max) key by key into the sum;
// subtracting the max is so exp never overflows. One key tile of the online softmax that holds the
// whole row is exactly that (m = the row max, P = exp(s − m), l = Σ P in key order, as softmax_rows
// adds them), before anything is divided.
template <class T>
void explain_softmax(const Problem& p, const HeadSteps& kept, Explanation& e) {
  const std::size_t b = e.batch, i = e.query;
  Tensor<T> s({1, p.m});      // (1, m) row i of the masked scores, as the run held them
  Tensor<T> v({p.m, p.d_v});  // (m, d_v) the head's values: the tile needs them, the sum does not
  for (std::size_t k = 0; k < p.m; ++k) {
    s(0, k) = static_cast<T>(kept.S_masked(b, 0, i, k));
    for (std::size_t c = 0; c < p.d_v; ++c) v(k, c) = static_cast<T>(kept.V(b, 0, k, c));
  }
  // With sinks the row starts from the sink, one key of value 0 (m, l) = (s_h, 1), as the flash pass does;
  // the tile's alpha is then exp(s_h − max), the sink's term of the sum.
  const bool sink = !p.sinks.empty();
  const T sink_logit = sink ? static_cast<T>(in_dtype<T>(p.sinks[e.head])) : T{0};
  const OnlineSoftmaxStep<T> row =
      online_softmax_update(s, Tensor<T>({1}, sink ? sink_logit : -std::numeric_limits<T>::infinity()),
                            Tensor<T>({1}, sink ? T{1} : T{0}), Tensor<T>({1, p.d_v}, T{0}), v);
  const T max = row.m_new(0);
  e.empty_row = max == -std::numeric_limits<T>::infinity();
  e.row_max = e.empty_row ? minus_inf : static_cast<double>(max);
  e.argmax = 0;  // the first key that holds the max
  while (e.argmax < p.m && !(s(0, e.argmax) == max)) ++e.argmax;
  if (sink) {
    e.sink = static_cast<double>(sink_logit);
    e.sink_exp = static_cast<double>(row.alpha(0));
    e.sink_weight = kept.sink_share(b, 0, i);
    e.max_is_sink = e.argmax == p.m;
    if (e.max_is_sink) e.argmax = 0;
  }
  e.row.resize(p.m);
  for (std::size_t k = 0; k < p.m; ++k) {
    SoftmaxEntry& entry = e.row[k];
    entry.allowed = p.mask.allows(b, i, k);
    entry.scaled = kept.mask_input()(b, 0, i, k);
    entry.weight = kept.A(b, 0, i, k);
    // a row with nothing to attend: shifted -inf, exp 0 (the tile's P), zero weights
    entry.shifted = e.empty_row ? minus_inf : static_cast<double>(s(0, k) - max);
    entry.exp = static_cast<double>(row.P(0, k));
  }
  e.row_sum = static_cast<double>(row.l_new(0));
  e.weight = kept.A(b, 0, i, e.key);
  if (!p.dropout) return;
  const DropoutMask mask(*p.dropout);
  e.dropout = p.dropout->p;
  e.kept = mask.keeps(b, e.head, i, e.key);
  e.dropped = kept.A_drop(b, 0, i, e.key);
  for (std::size_t k = 0; k < p.m; ++k) e.factors.push_back(mask.factor<T>(b, e.head, i, k));
}

// The head output o_i = Σ_j' a_ij'·v_j', with the weights of the explained engine.
void explain_head_output(const Problem& p, const HeadSteps& kept, const Trace& trace, Explanation& e) {
  const std::size_t b = e.batch, i = e.query;
  std::vector<double> a(p.m);
  // with dropout the dropped weights: naive's step, or flash's weight times the same factor
  for (std::size_t k = 0; k < p.m; ++k)
    a[k] = e.flash ? e.flash->weights[k] * (p.dropout ? e.factors[k] : 1.0)
                   : (p.dropout ? kept.A_drop(b, 0, i, k) : kept.A(b, 0, i, k));
  const std::vector<double> o_flash = e.flash ? flash_head_output(*trace.flash, b, e.head, i) : std::vector<double>();
  for (std::size_t c = 0; c < p.d_v; ++c) {
    e.v.push_back(kept.V(b, 0, e.key, c));
    std::vector<double> v_col(p.m);
    for (std::size_t k = 0; k < p.m; ++k) v_col[k] = kept.V(b, 0, k, c);
    e.o.push_back(products(a, std::move(v_col), std::nullopt, e.flash ? o_flash[c] : kept.O(b, 0, i, c)));
  }
}

template <class T>
Explanation explain_weight_in(const std::shared_ptr<const Problem>& problem, const ExplainRequest& r) {
  const Problem& p = *problem;
  // pass 1: run the engine in T (flash with naive beside it), keeping the steps of this head
  const Trace trace = record_run(problem, weight_run(p, r));
  const HeadSteps steps(trace, p);
  Explanation e = weight_named(p, r);
  explain_projections<T>(p, steps, e);  // pass 2: the inputs, q and k (and their turns with RoPE)
  explain_score<T>(p, steps, e);        // pass 3: q·k, its scale (and ALiBi's bias)
  explain_mask(p, e);                   // pass 4: the mask
  explain_softmax<T>(p, steps, e);      // pass 5: naive's softmax of row i
  if (r.engine == Engine::flash) e.flash = flash_walk(trace, e, p.m);  // pass 6: flash's tiles of row i
  explain_head_output(p, steps, trace, e);                             // pass 7: the head output
  return e;
}

// ------------------------------------------------------------------ one output number

template <class T>
OutputExplanation explain_output_in(const std::shared_ptr<const Problem>& problem, const OutputRequest& r) {
  const Problem& p = *problem;
  const std::size_t b = r.batch, i = r.query, col = r.column;
  OutputExplanation e;
  e.dtype = r.dtype;
  e.engine = r.engine == Engine::flash ? Engine::flash : Engine::naive;
  e.batch = b;
  e.query = i;
  e.column = col;
  e.h = p.h;
  e.d_v = p.d_v;
  e.d_out = p.d_out;
  e.batched = p.batched;
  e.output_projection = p.has_output_projection();
  e.query_token = p.tokens[b][i];

  RunRequest run;
  run.engine = e.engine;
  run.dtype = r.dtype;
  run.tile_size = r.tile_size;
  run.filter.tiles = false;
  if (e.output_projection) {
    // Y[b][i][C] = Σ_k concat[b][i][k]·W_o[k][C] + b_o[C]
    const Step merged = inputs_of(Step::output, p).front();  // the heads side by side, which W_o reads
    run.filter.only = {merged, Step::output};
    const Trace trace = record_run(problem, run);
    const Tensor<double> concat = recorded(trace, merged);   // (B, n, h·d_v)
    const Tensor<double> Y = recorded(trace, Step::output);  // (B, n, d_out)
    std::vector<double> features(p.h * p.d_v), w(p.h * p.d_v);
    for (std::size_t k = 0; k < features.size(); ++k) {
      features[k] = concat(b, i, k);
      w[k] = in_dtype<T>(p.W_o(k, col));
    }
    std::optional<double> bias;
    if (!p.b_o.empty()) bias = in_dtype<T>(p.b_o[col]);
    e.y = products(std::move(features), std::move(w), bias, Y(b, i, col));
    // each head's share: the d_v features concat[hd·d_v …] that are its output
    e.head_sums.assign(p.h, 0.0);
    for (std::size_t k = 0; k < e.y.terms.size(); ++k) e.head_sums[k / p.d_v] += e.y.terms[k];
    std::vector<std::size_t> order(e.y.terms.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return std::fabs(e.y.terms[x]) > std::fabs(e.y.terms[y]); });
    order.resize(std::min<std::size_t>(order.size(), 5));
    e.top = std::move(order);
    return e;
  }

  // Without W_o the output is concat itself: Y[b][i][C] = o^hd_i[e] = Σ_j a_ij·v_j[e]
  e.head = col / p.d_v;
  e.feature = col % p.d_v;
  e.key_tokens = p.context_tokens[b];
  run.filter.only = {Step::v_heads, Step::weights, Step::output};
  run.filter.head = e.head;
  run.filter.tiles = e.engine == Engine::flash;
  const Trace trace = record_run(problem, run);
  const Tensor<double> V = recorded(trace, Step::v_heads);  // (B, 1, m, d_v)
  const Tensor<double> Y = recorded(trace, Step::output);   // (B, n, d_out)
  std::vector<double> a(p.m), v(p.m);
  if (e.engine == Engine::flash) {
    a = flash_row_weights(row_tiles(*trace.flash, b, e.head, i), i, p.m);
  } else {
    const Tensor<double> A = recorded(trace, Step::weights);  // (B, 1, n, m)
    for (std::size_t k = 0; k < p.m; ++k) a[k] = A(b, 0, i, k);
  }
  for (std::size_t k = 0; k < p.m; ++k) v[k] = V(b, 0, k, e.feature);
  e.y = products(std::move(a), std::move(v), std::nullopt, Y(b, i, col));
  return e;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::out_of_range(what);
}

}  // namespace

double flash_weight_tolerance(double weight, double spread, double score_gap, std::size_t key_tiles, std::size_t m,
                              DType dtype) {
  const double u = unit_roundoff(dtype), eta = smallest_subnormal(dtype);
  const auto Tc = static_cast<double>(key_tiles), keys = static_cast<double>(m);
  return weight * (2 * u * (4 * spread + 7 * Tc + 2 * keys + 5) + std::expm1(2 * score_gap)) +
         2 * (keys + Tc + 2) * eta;
}

Explanation explain_weight(const std::shared_ptr<const Problem>& problem, const ExplainRequest& request) {
  const Problem& p = *problem;
  require(request.batch < p.B && request.head < p.h && request.query < p.n && request.key < p.m,
          fmt::format("explain_weight: batch {}, head {}, query {}, key {} for B = {}, h = {}, n = {}, m = {}",
                      request.batch, request.head, request.query, request.key, p.B, p.h, p.n, p.m));
  require(request.engine != Engine::both, "explain_weight: explains one engine, naive or flash");
  require(!is_half(request.dtype), "explain_weight: explains float32 or float64 arithmetic, not a half storage type");
  return request.dtype == DType::float64 ? explain_weight_in<double>(problem, request)
                                         : explain_weight_in<float>(problem, request);
}

OutputExplanation explain_output(const std::shared_ptr<const Problem>& problem, const OutputRequest& request) {
  const Problem& p = *problem;
  require(request.batch < p.B && request.query < p.n && request.column < p.d_out,
          fmt::format("explain_output: batch {}, query {}, column {} for B = {}, n = {}, d_out = {}", request.batch,
                      request.query, request.column, p.B, p.n, p.d_out));
  require(request.engine != Engine::both, "explain_output: explains one engine, naive or flash");
  require(!is_half(request.dtype), "explain_output: explains float32 or float64 arithmetic, not a half storage type");
  return request.dtype == DType::float64 ? explain_output_in<double>(problem, request)
                                         : explain_output_in<float>(problem, request);
}

std::vector<Step> steps_explaining_weight(const Problem& p) {
  std::vector<Step> steps;
  // and with sinks the sink's share, which the row's softmax gives to no value
  for (const Step s : steps_of(p))
    if ((s == Step::head_outputs || s == Step::sink_weights || depends_on(Step::head_outputs, s)) &&
        step_info(s).op != Op::projection)
      steps.push_back(s);
  return steps;
}

std::vector<Step> steps_explaining_output(const Problem& p) {
  std::vector<Step> steps = inputs_of(Step::head_outputs, p);
  for (const Step s : steps_of(p))
    if (depends_on(s, Step::head_outputs)) steps.push_back(s);
  return steps;
}

}  // namespace attn
