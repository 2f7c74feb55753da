#include "lessons/mistakes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/common.hpp"
#include "lessons/mistaken_forward.hpp"
#include "trace/collector.hpp"
#include "trace/record.hpp"

namespace attn {

namespace {

// The mistaken computation traced: every step of the one mistaken forward pass (lessons/mistaken_forward.hpp)
// told to a collector in pipeline order, each step the mistake changes with its mistaken formula.
template <class T>
Trace record_mistaken(const std::shared_ptr<const Problem>& problem, Mistake mistake, DType dtype) {
  const std::shared_ptr<const Problem> mistaken = std::make_shared<const Problem>(mistaken_problem(*problem, mistake));
  TraceCollector collector(mistaken, dtype);
  const ForwardRun<T> run = forward<T>(*problem, mistake, dtype);
  for (const Step s : steps_of(*mistaken)) report(collector, s, run.computed[static_cast<std::size_t>(s)]);
  // The rows the mask empties stay empty unless the mistake fills them.
  std::vector<EmptyRow> empty = mistake == Mistake::minus_1e9 ? std::vector<EmptyRow>() : find_empty_rows(*mistaken);
  Trace trace = std::move(collector).finish(std::move(empty));
  const MistakeInfo& info = mistake_info(mistake);
  for (const auto& [step, formula] : changed_steps(mistake))
    for (StepRecord& rec : trace.steps)
      if (rec.step == step) {
        rec.formula = std::string(formula);
        rec.description = fmt::format("{} (the mistake {})", rec.description, info.name);
      }
  return trace;
}

// ------------------------------------------------------------------ differences

// |x - y|, with two equal infinities the same and one infinity against a finite number infinitely far.
double distance(double x, double y) {
  if (x == y) return 0;
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<double>::infinity();
  return std::fabs(x - y);
}

StepDifference difference(const StepRecord& a, const StepRecord& b) {
  StepDifference d{.step = a.step, .intended_shape = a.value.shape(), .mistaken_shape = b.value.shape()};
  d.same_shape = d.intended_shape == d.mistaken_shape;
  if (!d.same_shape) return d;
  const auto x = a.value.values(), y = b.value.values();
  std::size_t worst = 0;
  for (std::size_t k = 0; k < x.size(); ++k)
    if (const double e = distance(x[k], y[k]); e > d.max_abs) {
      d.max_abs = e;
      worst = k;
    }
  if (d.max_abs != 0) {
    d.flat = worst;
    d.at = unravel_index(worst, d.intended_shape);
    d.intended = x[worst];
    d.mistaken = y[worst];
  }
  return d;
}

// Every step both traces hold, in pipeline order, and the first that differs.
void measure_steps(MistakeResult& r) {
  r.steps.clear();
  r.first_difference.reset();
  for (const StepRecord& a : r.intended.steps)
    if (const StepRecord* b = find_step(r.mistaken, a.step)) {
      r.steps.push_back(difference(a, *b));
      if (!r.first_difference && r.steps.back().differs()) r.first_difference = a.step;
    }
}

// ------------------------------------------------------------------ the costs

struct Weights {
  Tensor<double> intended, mistaken;  // (B, h, n, m)
};

Weights weights_of(const MistakeResult& r) {
  return {with_batch_axis(find_step(r.intended, Step::weights)->value, 4),
          with_batch_axis(find_step(r.mistaken, Step::weights)->value, 4)};
}

double row_sum(const Tensor<double>& A, std::size_t b, std::size_t hd, std::size_t i) {
  long double s = 0;
  for (std::size_t j = 0; j < A.dim(3); ++j) s += A(b, hd, i, j);
  return static_cast<double>(s);
}

double row_max(const Tensor<double>& A, std::size_t b, std::size_t hd, std::size_t i) {
  double best = 0;
  for (std::size_t j = 0; j < A.dim(3); ++j) best = std::max(best, A(b, hd, i, j));
  return best;
}

// Whether the mask leaves query i of batch item b no key: the intended trace lists those rows.
bool row_empty(const MistakeResult& r, std::size_t b, std::size_t i) {
  const std::vector<EmptyRow>& empty = r.intended.empty_rows;
  return std::find(empty.begin(), empty.end(), EmptyRow{b, i}) != empty.end();
}

std::size_t forbidden_pairs(const Problem& p) {
  std::size_t count = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i)
      for (std::size_t j = 0; j < p.m; ++j) count += p.mask.allows(b, i, j) ? 0 : 1;
  return count;
}

std::string token(const Problem& p, std::size_t b, std::size_t i) { return fmt::format("\"{}\"", p.tokens[b][i]); }

double mean(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Every query row, as the tables list them.
template <class F>
void each_row(const Problem& p, F&& f) {
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i) f(b, hd, i);
}

void cost_no_scale(const Problem& p, MistakeResult& r) {
  const Weights w = weights_of(r);
  CostTable t{.title = "per query: the largest weight of its row and the row's entropy (nats; ln m when uniform)",
              .measures = {"largest weight", "entropy"}};
  std::vector<double> max_a, max_b, ent_a, ent_b;
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    if (row_empty(r, b, i)) return;
    const double ma = row_max(w.intended, b, hd, i), mb = row_max(w.mistaken, b, hd, i);
    const double ea = row_entropy(w.intended, b, hd, i), eb = row_entropy(w.mistaken, b, hd, i);
    t.rows.push_back({b, hd, i, {ma, ea}, {mb, eb}});
    max_a.push_back(ma), max_b.push_back(mb), ent_a.push_back(ea), ent_b.push_back(eb);
  });
  r.costs.push_back(std::move(t));
  if (p.scale == 1) {
    r.findings.emplace_back("the scale of this input is 1, so leaving it out changes nothing here");
    return;
  }
  r.findings.push_back(fmt::format("the scores are {:.4g} times larger than intended (1/scale)", 1 / p.scale));
  r.findings.push_back(
      fmt::format("the largest weight of a row is {:.4f} on average instead of {:.4f}", mean(max_b), mean(max_a)));
  r.findings.push_back(fmt::format("the entropy of a row is {:.4f} nats on average instead of {:.4f}: {}", mean(ent_b),
                                   mean(ent_a), mean(ent_b) < mean(ent_a) ? "sharper" : "flatter"));
}

void cost_no_mask(const Problem& p, MistakeResult& r) {
  const Weights w = weights_of(r);
  CostTable t{.title = "per query that the mask restricts: the weight it puts on keys the mask forbids",
              .measures = {"forbidden weight"}};
  double worst = 0;
  std::string worst_where;
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    double a = 0, m = 0;
    bool restricted = false;
    for (std::size_t j = 0; j < p.m; ++j)
      if (!p.mask.allows(b, i, j)) {
        restricted = true;
        a += w.intended(b, hd, i, j);
        m += w.mistaken(b, hd, i, j);
      }
    if (!restricted) return;
    t.rows.push_back({b, hd, i, {a}, {m}});
    if (m > worst) worst = m, worst_where = fmt::format("{} (head {})", token(p, b, i), hd);
  });
  const std::size_t forbidden = forbidden_pairs(p), rows = t.rows.size();
  r.costs.push_back(std::move(t));
  if (forbidden == 0) {
    r.findings.push_back(fmt::format(
        "the mask of this input ({}) forbids nothing, so leaving it out changes nothing here", p.mask.summary()));
    return;
  }
  r.findings.push_back(
      fmt::format("{} query rows (over all heads) may not see some keys; without the mask they put "
                  "weight on them, at most {:.4f} by {}",
                  rows, worst, worst_where));
}

void cost_mask_after_softmax(const Problem& p, MistakeResult& r) {
  const Weights w = weights_of(r);
  CostTable t{.title = "per query that the mask restricts: the sum of its row of weights", .measures = {"row sum"}};
  double smallest = 1;
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    bool restricted = false;
    for (std::size_t j = 0; j < p.m; ++j) restricted = restricted || !p.mask.allows(b, i, j);
    if (!restricted) return;
    const double mb = row_sum(w.mistaken, b, hd, i);
    t.rows.push_back({b, hd, i, {row_sum(w.intended, b, hd, i)}, {mb}});
    smallest = std::min(smallest, mb);
  });
  r.costs.push_back(std::move(t));
  if (forbidden_pairs(p) == 0) {
    r.findings.push_back(fmt::format("the mask of this input ({}) forbids nothing, so the order changes nothing here",
                                     p.mask.summary()));
    return;
  }
  r.findings.push_back(fmt::format(
      "rows the mask restricts sum to as little as {:.4f} instead of 1: the forbidden keys took the rest", smallest));
}

void cost_dropout_unscaled(const Problem& p, MistakeResult& r) {
  const Tensor<double> intended = with_batch_axis(find_step(r.intended, Step::dropped)->value, 4);
  const Tensor<double> mistaken = with_batch_axis(find_step(r.mistaken, Step::dropped)->value, 4);
  CostTable t{.title = "per query: the sum of its row of dropped weights", .measures = {"row sum"}};
  long double sum_intended = 0, sum_mistaken = 0;
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    const double a = row_sum(intended, b, hd, i), m = row_sum(mistaken, b, hd, i);
    t.rows.push_back({b, hd, i, {a}, {m}});
    sum_intended += a;
    sum_mistaken += m;
  });
  r.costs.push_back(std::move(t));
  const double rows = static_cast<double>(p.B * p.h * p.n);
  r.findings.push_back(fmt::format(
      "the rows of dropped weights sum to {:.4f} on average instead of {:.4f}: 1 − p = {:.4g} "
      "times as much, while the rescaled rows keep, on average over seeds, the sum of 1 "
      "that inference (no dropout) gives",
      static_cast<double>(sum_mistaken) / rows, static_cast<double>(sum_intended) / rows, 1 - p.dropout->p));
}

void cost_softmax_columns(const Problem& p, MistakeResult& r) {
  const Weights w = weights_of(r);
  CostTable rows{.title = "per query: the sum of its row of weights", .measures = {"row sum"}};
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    const double mb = row_sum(w.mistaken, b, hd, i);
    rows.rows.push_back({b, hd, i, {row_sum(w.intended, b, hd, i)}, {mb}});
    lo = std::min(lo, mb), hi = std::max(hi, mb);
  });
  CostTable cols{.title = "per key: the sum of its column of weights", .measures = {"column sum"}, .by_key = true};
  double column_error = 0;  // max |Σ_i a_ij - 1| over the columns some query may attend
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t j = 0; j < p.m; ++j) {
        long double a = 0, m = 0;
        for (std::size_t i = 0; i < p.n; ++i) a += w.intended(b, hd, i, j), m += w.mistaken(b, hd, i, j);
        cols.rows.push_back({b, hd, j, {static_cast<double>(a)}, {static_cast<double>(m)}});
        bool seen = false;  // a column no query may attend is all 0, as an emptied row is
        for (std::size_t i = 0; i < p.n; ++i) seen = seen || p.mask.allows(b, i, j);
        if (seen) column_error = std::max(column_error, std::fabs(static_cast<double>(m) - 1));
      }
  r.costs.push_back(std::move(rows));
  r.costs.push_back(std::move(cols));
  r.findings.push_back(
      fmt::format("the rows of weights sum to between {:.4f} and {:.4f} instead of 1, while the "
                  "columns sum to 1 (within {:.3g})",
                  lo, hi, column_error));
}

void cost_shared_qkv(const Problem& p, MistakeResult& r) {
  const Weights w = weights_of(r);
  const Tensor<double> Sa = with_batch_axis(find_step(r.intended, Step::scores)->value, 4);
  const Tensor<double> Sb = with_batch_axis(find_step(r.mistaken, Step::scores)->value, 4);
  // max |S - Sᵀ|: 0 exactly when the scores are symmetric
  double asym_a = 0, asym_b = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.n; ++j) {
          asym_a = std::max(asym_a, std::fabs(Sa(b, hd, i, j) - Sa(b, hd, j, i)));
          asym_b = std::max(asym_b, std::fabs(Sb(b, hd, i, j) - Sb(b, hd, j, i)));
        }
  CostTable t{.title = "per query: the weight it puts on itself, and whether that is the largest of its row",
              .measures = {"weight on itself", "itself largest"}};
  std::size_t self_a = 0, self_b = 0, rows = 0;
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    if (row_empty(r, b, i)) return;
    const double da = w.intended(b, hd, i, i), db = w.mistaken(b, hd, i, i);
    const bool la = da == row_max(w.intended, b, hd, i), lb = db == row_max(w.mistaken, b, hd, i);
    t.rows.push_back({b, hd, i, {da, la ? 1.0 : 0.0}, {db, lb ? 1.0 : 0.0}});
    self_a += la, self_b += lb, ++rows;
  });
  r.costs.push_back(std::move(t));
  r.findings.push_back(fmt::format("the scores' asymmetry max|S − Sᵀ| is {:.4g} instead of {:.4g}", asym_b, asym_a));
  r.findings.push_back(
      fmt::format("{} of {} query rows attend most to their own token instead of {}", self_b, rows, self_a));
}

void cost_wrong_reshape(const Problem& p, MistakeResult& r) {
  // Which token and head each feature of a query head's row comes from follows from the memory order:
  // feature c of row i of head hd is element (hd·n + i)·d + c of the token's (n, h·d) block.
  const std::size_t d = p.d_k, n = p.n, h = p.h;
  CostTable t{.title = "per query head row: the share of its features that belong to that token and that head",
              .measures = {"own features"}};
  std::size_t mixed = 0;
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    std::size_t own = 0;
    for (std::size_t c = 0; c < d; ++c) {
      const std::size_t flat = (hd * n + i) * d + c;
      const std::size_t from_token = flat / (h * d), from_head = (flat % (h * d)) / d;
      own += from_token == i && from_head == hd ? 1 : 0;
    }
    const double share = d == 0 ? 1 : static_cast<double>(own) / static_cast<double>(d);
    t.rows.push_back({b, hd, i, {1.0}, {share}});
    mixed += own == d ? 0 : 1;
  });
  const std::size_t rows = t.rows.size();
  r.costs.push_back(std::move(t));
  if (h == 1) {
    r.findings.emplace_back("with one head the reshape and the transpose agree: nothing changes here");
    return;
  }
  r.findings.push_back(
      fmt::format("{} of {} query head rows hold features of another token or another head", mixed, rows));
}

void cost_minus_1e9(const Problem& p, MistakeResult& r) {
  const Weights w = weights_of(r);
  CostTable t{.title = "per query the mask empties: the sum and the largest of its weights",
              .measures = {"row sum", "largest weight"}};
  each_row(p, [&](std::size_t b, std::size_t hd, std::size_t i) {
    if (!row_empty(r, b, i)) return;
    t.rows.push_back({b,
                      hd,
                      i,
                      {row_sum(w.intended, b, hd, i), row_max(w.intended, b, hd, i)},
                      {row_sum(w.mistaken, b, hd, i), row_max(w.mistaken, b, hd, i)}});
  });
  const std::size_t emptied = t.rows.size();
  r.costs.push_back(std::move(t));
  if (emptied == 0) {
    r.findings.emplace_back(
        "no row of this input is emptied by the mask: exp(−1e9 − max) underflows to 0, so the weights are exactly "
        "those of −∞ (a custom mask with a row of zeros, or a bottom_right causal mask with more queries than keys, "
        "empties rows)");
    return;
  }
  r.findings.push_back(
      fmt::format("{} query rows (over all heads) that the mask empties get weights of 1/m = {:.4f} "
                  "on every key instead of none, and so the mean of the values as output instead of 0",
                  emptied, 1.0 / static_cast<double>(p.m)));
}

}  // namespace

const StepDifference* first_difference_of(const MistakeResult& r) {
  for (const StepDifference& d : r.steps)
    if (r.first_difference && d.step == *r.first_difference) return &d;
  return nullptr;
}

std::optional<std::string> mistake_refused(Mistake mistake, const Problem& p) {
  if (p.rope || p.alibi)
    return fmt::format(
        "the mistakes are shown on attention without positions, and this input has {}: leave it out "
        "of a copy of the input to see the mistake",
        p.rope && p.alibi ? "\"rope\" and \"alibi\""
        : p.rope          ? "\"rope\""
                          : "\"alibi\"");
  if (mistake == Mistake::dropout_unscaled && !p.dropout)
    return std::string(
        "dropout-unscaled needs dropout: this input has no \"dropout\"; add --dropout P, or a \"dropout\" key");
  if (mistake != Mistake::shared_qkv) return std::nullopt;
  if (p.cross)
    return std::string(
        "shared-qkv needs self-attention: this input's keys and values come from a context, which Q = K = V cannot "
        "describe");
  if (p.d_v != p.d_k && p.has_output_projection())
    return fmt::format("shared-qkv needs d_v = d_k for W_o to fit (this input has d_k = {}, d_v = {})", p.d_k, p.d_v);
  return std::nullopt;
}

double row_entropy(const Tensor<double>& A, std::size_t b, std::size_t hd, std::size_t i) {
  double h = 0;
  for (std::size_t j = 0; j < A.dim(3); ++j)
    if (const double a = A(b, hd, i, j); a > 0) h -= a * std::log(a);
  return h;
}

MistakeResult run_mistake(const std::shared_ptr<const Problem>& problem, Mistake mistake, DType dtype) {
  if (const auto why = mistake_refused(mistake, *problem)) throw std::invalid_argument(*why);
  if (is_half(dtype))
    throw std::invalid_argument(fmt::format("run_mistake: mistakes run in float32 or float64, not {}", name_of(dtype)));
  const Problem& p = *problem;

  // pass 1: the intended computation and the mistaken one, every step kept
  MistakeResult r{.mistake = mistake,
                  .intended = record_run(problem, {.dtype = dtype}),
                  .mistaken = dtype == DType::float64 ? record_mistaken<double>(problem, mistake, dtype)
                                                      : record_mistaken<float>(problem, mistake, dtype)};

  // pass 2: step by step, how far apart they are
  measure_steps(r);

  // pass 3: what it costs, measured
  switch (mistake) {
    case Mistake::no_scale: cost_no_scale(p, r); break;
    case Mistake::no_mask: cost_no_mask(p, r); break;
    case Mistake::mask_after_softmax: cost_mask_after_softmax(p, r); break;
    case Mistake::softmax_columns: cost_softmax_columns(p, r); break;
    case Mistake::shared_qkv: cost_shared_qkv(p, r); break;
    case Mistake::wrong_reshape: cost_wrong_reshape(p, r); break;
    case Mistake::minus_1e9: cost_minus_1e9(p, r); break;
    case Mistake::dropout_unscaled: cost_dropout_unscaled(p, r); break;
    // diff alone tries the others: run --mistake measures no cost for them
    case Mistake::none:
    case Mistake::scale_twice:
    case Mistake::k_untransposed:
    case Mistake::w_q_transposed:
    case Mistake::w_k_transposed:
    case Mistake::w_v_transposed:
    case Mistake::w_o_transposed:
    case Mistake::mask_sees_next:
    case Mistake::mask_misses_diagonal:
    case Mistake::align_flipped:
    case Mistake::gqa_first_head:
    case Mistake::gqa_last_head:
    case Mistake::backward_no_scale:
    case Mistake::softmax_d_from_da:
    case Mistake::softmax_d_from_do:
    case Mistake::softmax_backward_columns:
    case Mistake::dv_untransposed:
    case Mistake::dk_untransposed:
    case Mistake::dq_transposed: break;
  }
  if (const StepDifference* out = r.steps.empty() ? nullptr : &r.steps.back(); out && out->step == Step::output)
    r.findings.push_back(out->differs() ? fmt::format("the output is off by up to {:.4g}", out->max_abs)
                                        : std::string("the output is exactly the same"));
  return r;
}

MistakeResult focus_mistake(MistakeResult r, const StepFilter& filter) {
  // Every step stays, of the one head, so that the first difference is still the first of them all.
  const StepFilter head{.head = filter.head, .tiles = false};
  r.intended = keep_only(std::move(r.intended), head);
  r.mistaken = keep_only(std::move(r.mistaken), head);
  measure_steps(r);
  if (filter.head)
    for (CostTable& t : r.costs) std::erase_if(t.rows, [&](const CostRow& row) { return row.head != *filter.head; });
  r.shown.clear();
  for (const Step s : all_steps())
    if (std::find(filter.only.begin(), filter.only.end(), s) != filter.only.end()) r.shown.push_back(s);
  r.head = filter.head;
  return r;
}

}  // namespace attn
