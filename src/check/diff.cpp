#include "check/diff.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/common.hpp"
#include "ops/attention.hpp"
#include "tensor/half.hpp"
#include "text/number.hpp"

namespace attn {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
// A finite masked score at or below this, where the mask forbids the key, is read as -inf: what
// code that writes -1e9 or the dtype's lowest value for -inf dumps.
constexpr double masked_threshold = -1e4;

constexpr std::size_t slot(Step s) { return static_cast<std::size_t>(s); }

// The dump's values of each step (canonical shapes), or nothing.
using Given = std::array<std::optional<Tensor<double>>, step_count>;
template <class T>
using Values = std::array<Tensor<T>, step_count>;

// The known mistakes, as changes to the computation.
enum class Variant {
  none,
  no_scale,
  scale_twice,
  k_untransposed,
  w_q_transposed,
  w_k_transposed,
  w_v_transposed,
  w_o_transposed,
  softmax_columns,
  no_mask,
  mask_sees_next,
  mask_misses_diagonal,
  align_flipped,
  head_split,
  large_negative,
};

struct Candidate {
  Variant variant;
  DiagnosisCode code;
  std::string mistake;
};

bool square(const Tensor<double>& W) { return W.rank() == 2 && W.dim(0) == W.dim(1) && !W.empty(); }

bool has_empty_row(const Problem& p) {
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      bool any = false;
      for (std::size_t j = 0; j < p.m && !any; ++j) any = p.mask.allows(b, i, j);
      if (!any && p.m > 0) return true;
    }
  return false;
}

// The mistakes that can be made on `p` and change something.
std::vector<Candidate> candidates(const Problem& p) {
  std::vector<Candidate> c;
  if (p.scale != 1) {
    c.push_back({Variant::no_scale, DiagnosisCode::scale, "the scale left out"});
    c.push_back({Variant::scale_twice, DiagnosisCode::scale, "the scale applied twice"});
  }
  if (p.m == p.d_k) c.push_back({Variant::k_untransposed, DiagnosisCode::transpose, "K not transposed: S = Q·K"});
  if (square(p.W_q)) c.push_back({Variant::w_q_transposed, DiagnosisCode::transpose, "W_q transposed"});
  if (square(p.W_k)) c.push_back({Variant::w_k_transposed, DiagnosisCode::transpose, "W_k transposed"});
  if (square(p.W_v)) c.push_back({Variant::w_v_transposed, DiagnosisCode::transpose, "W_v transposed"});
  if (square(p.W_o)) c.push_back({Variant::w_o_transposed, DiagnosisCode::transpose, "W_o transposed"});
  c.push_back({Variant::softmax_columns, DiagnosisCode::softmax_axis, "the softmax taken over the queries"});
  if (p.mask.kind != MaskKind::none) {
    c.push_back({Variant::no_mask, DiagnosisCode::mask, "the mask left out"});
    c.push_back(
        {Variant::mask_sees_next, DiagnosisCode::mask, "the mask shifted by one: each query also sees the next key"});
    c.push_back(
        {Variant::mask_misses_diagonal, DiagnosisCode::mask, "the mask shifted by one: each query sees one key fewer"});
  }
  if ((p.mask.kind == MaskKind::causal || p.mask.kind == MaskKind::sliding_window) && p.n != p.m)
    c.push_back({Variant::align_flipped, DiagnosisCode::alignment,
                 p.mask.align == Align::bottom_right ? "the mask aligned top-left instead of bottom-right"
                                                     : "the mask aligned bottom-right instead of top-left"});
  if (p.h > 1 || p.g > 1)
    c.push_back({Variant::head_split, DiagnosisCode::head_split, "the heads split by a reshape without the transpose"});
  if (has_empty_row(p))
    c.push_back({Variant::large_negative, DiagnosisCode::large_negative, "a large negative number used for -∞"});
  return c;
}

Tensor<double> transposed(const Tensor<double>& W) {
  Tensor<double> t({W.dim(1), W.dim(0)});
  for (std::size_t r = 0; r < W.dim(0); ++r)
    for (std::size_t c = 0; c < W.dim(1); ++c) t(c, r) = W(r, c);
  return t;
}

// The same values read in another shape: a reshape without the transpose.
template <class T>
Tensor<T> reinterpreted(const Tensor<T>& t, Shape shape) {
  return Tensor<T>(std::move(shape), std::vector<T>(t.values().begin(), t.values().end()));
}

// S = Q·K with K (m, d_k) read as (d_k, m): S[i][j] = Σ_e Q[i][e]·K[e][j], when m == d_k.
template <class T>
Tensor<T> scores_untransposed(const Tensor<T>& Q, const Tensor<T>& K) {
  const std::size_t B = Q.dim(0), h = Q.dim(1), n = Q.dim(2), d_k = Q.dim(3), g = K.dim(1), m = K.dim(2);
  Tensor<T> S({B, h, n, m});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) {
          T dot = 0;
          for (std::size_t e = 0; e < d_k; ++e) dot += Q(b, hd, i, e) * K(b, kv, e, j);
          S(b, hd, i, j) = dot;
        }
    }
  return S;
}

// The softmax down each column (over the queries) of every (n, m) matrix.
template <class T>
Tensor<T> softmax_columns(const Tensor<T>& S) {
  const std::size_t B = S.dim(0), h = S.dim(1), n = S.dim(2), m = S.dim(3);
  Tensor<T> t({B, h, m, n});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) t(b, hd, j, i) = S(b, hd, i, j);
  const Tensor<T> P = softmax_rows(t);
  Tensor<T> out({B, h, n, m});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) out(b, hd, i, j) = P(b, hd, j, i);
  return out;
}

// Which keys the (possibly mistaken) mask lets query i see.
std::function<bool(std::size_t, std::size_t, std::size_t)> mask_of(const Problem& p, Variant v) {
  switch (v) {
    case Variant::no_mask: return [](std::size_t, std::size_t, std::size_t) { return true; };
    case Variant::mask_sees_next:
      return [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j == 0 ? 0 : j - 1); };
    case Variant::mask_misses_diagonal:
      return [&p](std::size_t b, std::size_t i, std::size_t j) { return j + 1 < p.m && p.mask.allows(b, i, j + 1); };
    case Variant::align_flipped: {
      Mask flipped = p.mask;
      flipped.align = flipped.align == Align::top_left ? Align::bottom_right : Align::top_left;
      return [flipped](std::size_t b, std::size_t i, std::size_t j) { return flipped.allows(b, i, j); };
    }
    default: return [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); };
  }
}

// The lowest number code would write for -inf in `storage`: -1e9, or the half type's lowest finite value.
double lowest_written(DType storage) {
  switch (storage) {
    case DType::float16: return -65504.0;
    case DType::bfloat16: return -static_cast<double>(bfloat16_to_float(0x7F7F));
    default: return -1e9;
  }
}

// Every step of `p` computed in T (what is stored rounded to `storage`), with mistake `v`, each step
// starting from the dump's value of the steps before it where the dump holds them.
// Every step computed (`computed`), and what the next steps start from (`carry`): the dump's value of a
// step where the dump holds it, else the computed one.
template <class T>
struct Run {
  Values<T> computed, carry;
};

// Every step of `p` computed in T (what is stored rounded to `storage`), with mistake `v`, each step
// from the dump's values of the steps before it where the dump holds them.
template <class T>
Run<T> forward(const Problem& p, const Given& given, Variant v, DType storage) {
  Run<T> out;
  const auto input = [storage](const Tensor<double>& t) {
    Tensor<T> r(t.shape());
    for (std::size_t k = 0; k < t.size(); ++k) r.values()[k] = stored_input<T>(storage, t.values()[k]);
    return r;
  };
  const auto bias = [storage](const std::vector<double>& b) {
    std::vector<T> r(b.size());
    for (std::size_t k = 0; k < b.size(); ++k) r[k] = stored_input<T>(storage, b[k]);
    return r;
  };
  const auto keep = [&](Step s, Tensor<T> computed) -> const Tensor<T>& {
    round_stored(computed, storage);
    out.computed[slot(s)] = std::move(computed);
    Tensor<T>& carry = out.carry[slot(s)];
    carry = given[slot(s)] ? cast<T>(*given[slot(s)]) : out.computed[slot(s)];
    return carry;
  };
  const Tensor<T> X = input(p.X), C = input(p.C);
  const Tensor<T> W_q = input(v == Variant::w_q_transposed ? transposed(p.W_q) : p.W_q);
  const Tensor<T> W_k = input(v == Variant::w_k_transposed ? transposed(p.W_k) : p.W_k);
  const Tensor<T> W_v = input(v == Variant::w_v_transposed ? transposed(p.W_v) : p.W_v);
  const std::vector<T> b_q = bias(p.b_q), b_k = bias(p.b_k), b_v = bias(p.b_v), b_o = bias(p.b_o);

  const Tensor<T>& q = keep(Step::q, project(X, W_q, std::span<const T>(b_q)));
  const Tensor<T>& k = keep(Step::k, project(C, W_k, std::span<const T>(b_k)));
  const Tensor<T>& val = keep(Step::v, project(C, W_v, std::span<const T>(b_v)));
  const auto split = [&](const Tensor<T>& Y, std::size_t heads, std::size_t tokens, std::size_t d) {
    return v == Variant::head_split ? reinterpreted(Y, {p.B, heads, tokens, d}) : split_heads(Y, heads);
  };
  const Tensor<T>* Q = &keep(Step::q_heads, split(q, p.h, p.n, p.d_k));
  const Tensor<T>* K = &keep(Step::k_heads, split(k, p.g, p.m, p.d_k));
  const Tensor<T>& V = keep(Step::v_heads, split(val, p.g, p.m, p.d_v));
  // RoPE after the split, as the engines turn them (engine/common.hpp: project_heads).
  if (p.rope) {
    Q = &keep(Step::q_rot, rotate(*Q, input(p.rope->cos_q), input(p.rope->sin_q), p.rope->style));
    K = &keep(Step::k_rot, rotate(*K, input(p.rope->cos_k), input(p.rope->sin_k), p.rope->style));
  }

  const Tensor<T>& S = keep(Step::scores, v == Variant::k_untransposed ? scores_untransposed(*Q, *K) : scores(*Q, *K));
  const double factor = v == Variant::no_scale ? 1.0 : v == Variant::scale_twice ? p.scale * p.scale : p.scale;
  const Tensor<T>* S_scaled = &keep(Step::scaled, scale(S, static_cast<T>(factor)));
  // ALiBi after the scale, as the naive engine adds it.
  if (p.alibi) {
    const std::vector<T> slopes = bias(p.alibi->slopes);
    const std::vector<T> pos_q(p.alibi->query_positions.begin(), p.alibi->query_positions.end());
    const std::vector<T> pos_k(p.alibi->key_positions.begin(), p.alibi->key_positions.end());
    S_scaled = &keep(Step::bias, add_alibi(*S_scaled, std::span<const T>(slopes), std::span<const T>(pos_q),
                                           std::span<const T>(pos_k)));
  }
  Tensor<T> masked = apply_mask(*S_scaled, mask_of(p, v));
  if (v == Variant::large_negative)
    for (T& x : masked.values())
      if (x == -std::numeric_limits<T>::infinity()) x = static_cast<T>(lowest_written(storage));
  const Tensor<T>& S_masked = keep(Step::masked, std::move(masked));
  const Tensor<T>& A =
      keep(Step::weights, v == Variant::softmax_columns ? softmax_columns(S_masked) : softmax_rows(S_masked));
  const Tensor<T>& O_h = keep(Step::head_outputs, weighted_sum(A, V));
  const Tensor<T>& concat =
      keep(Step::concat, v == Variant::head_split ? reinterpreted(O_h, {p.B, p.n, p.h * p.d_v}) : merge_heads(O_h));
  if (p.has_output_projection()) {
    const Tensor<T> W_o = input(v == Variant::w_o_transposed ? transposed(p.W_o) : p.W_o);
    keep(Step::output, project(concat, W_o, std::span<const T>(b_o)));
  } else {
    keep(Step::output, Tensor<T>(concat));
  }
  return out;
}

// One computation of every step in a dtype, beside the same in float64: what a dumped value is
// judged against.
struct Reference {
  Values<double> exact;     // in float64
  Values<double> carry;     // what the steps after each started from, in float64
  Values<double> in_dtype;  // in the dtype, widened
};

Reference reference(const Problem& p, const Given& given, Variant v, DType dtype) {
  Run<double> exact = forward<double>(p, given, v, DType::float64);
  Reference r{std::move(exact.computed), std::move(exact.carry), {}};
  if (dtype == DType::float64) {
    r.in_dtype = r.exact;
  } else {
    const Run<float> f = forward<float>(p, given, v, dtype);
    for (std::size_t s = 0; s < step_count; ++s) r.in_dtype[s] = cast<double>(f.computed[s]);
  }
  return r;
}

Tensor<double> absolute(Tensor<double> t) {
  for (double& x : t.values()) x = std::fabs(x);
  return t;
}

std::vector<double> absolute(const std::vector<double>& b) {
  std::vector<double> a(b);
  for (double& x : a) x = std::fabs(x);
  return a;
}

// The size of what each value of step `s` sums, element by element (Σ|terms| of its sum), from the
// exact values of the steps before it, and how many terms the longest sum has.
struct Magnitude {
  Tensor<double> of;
  double terms = 0;
};

// x: what each step started from; its own value is `own`.
Magnitude magnitude(const Problem& p, const Values<double>& x, const Tensor<double>& own, Step s) {
  const auto projected = [](const Tensor<double>& in, const Tensor<double>& W, const std::vector<double>& b) {
    const std::vector<double> b_abs = absolute(b);
    return project(absolute(in), absolute(W), std::span<const double>(b_abs));
  };
  switch (s) {
    case Step::q: return {projected(p.X, p.W_q, p.b_q), static_cast<double>(p.d_model + 1)};
    case Step::k: return {projected(p.C, p.W_k, p.b_k), static_cast<double>(p.d_context + 1)};
    case Step::v: return {projected(p.C, p.W_v, p.b_v), static_cast<double>(p.d_context + 1)};
    case Step::q_rot:
    case Step::k_rot: {
      // Two products and a sum per turned feature: |x_a·cos| + |x_b·sin|.
      const bool keys = s == Step::k_rot;
      const Tensor<double> in = absolute(x[slot(keys ? Step::k_heads : Step::q_heads)]);
      const Tensor<double> c = absolute(keys ? p.rope->cos_k : p.rope->cos_q);
      const Tensor<double> sn = absolute(keys ? p.rope->sin_k : p.rope->sin_q);
      Tensor<double> of = in;
      const std::size_t P = c.dim(1);
      for (std::size_t b = 0; b < in.dim(0); ++b)
        for (std::size_t hd = 0; hd < in.dim(1); ++hd)
          for (std::size_t t = 0; t < in.dim(2); ++t)
            for (std::size_t i = 0; i < P; ++i) {
              const auto [a, e] = rope_pair(p.rope->style, i, P);
              of(b, hd, t, a) = in(b, hd, t, a) * c(t, i) + in(b, hd, t, e) * sn(t, i);
              of(b, hd, t, e) = in(b, hd, t, e) * c(t, i) + in(b, hd, t, a) * sn(t, i);
            }
      return {std::move(of), 2};
    }
    case Step::scores: {
      const Step q = p.rope ? Step::q_rot : Step::q_heads, k = p.rope ? Step::k_rot : Step::k_heads;
      return {scores(absolute(x[slot(q)]), absolute(x[slot(k)])), static_cast<double>(p.d_k)};
    }
    case Step::scaled: return {absolute(own), 1};
    case Step::bias: {
      // S' + b: |S'| + |b| over two terms (the product of the bias and the sum).
      Tensor<double> of = absolute(x[slot(Step::scaled)]);
      for (std::size_t b = 0; b < of.dim(0); ++b)
        for (std::size_t hd = 0; hd < of.dim(1); ++hd)
          for (std::size_t i = 0; i < of.dim(2); ++i)
            for (std::size_t j = 0; j < of.dim(3); ++j)
              of(b, hd, i, j) +=
                  std::fabs(alibi_bias(p.alibi->slopes[hd], p.alibi->query_positions[i], p.alibi->key_positions[j]));
      return {std::move(of), 2};
    }
    case Step::weights: return {absolute(own), static_cast<double>(p.m)};
    case Step::head_outputs:
      return {weighted_sum(absolute(x[slot(Step::weights)]), absolute(x[slot(Step::v_heads)])),
              static_cast<double>(p.m)};
    case Step::output:
      if (p.has_output_projection())
        return {projected(x[slot(Step::concat)], p.W_o, p.b_o), static_cast<double>(p.h * p.d_v + 1)};
      return {absolute(own), 0};
    default: return {absolute(own), 0};  // a relayout, or the mask: nothing summed
  }
}

// How the dump's values of one step stand against a reference's.
struct Judged {
  double max_abs = 0;     // against the exact value
  std::size_t out = 0;    // elements out of tolerance
  std::size_t worst = 0;  // the element furthest out of tolerance (or the largest difference)
  double worst_tolerance = 0;
  std::size_t large_negatives = 0;
  bool ok() const { return out == 0; }
};

// max |in_dtype - exact| over the elements where both are finite: how far our own run in the dtype is.
double own_error(const Tensor<double>& in_dtype, const Tensor<double>& exact) {
  double e = 0;
  for (std::size_t k = 0; k < exact.size(); ++k) {
    const double a = in_dtype.values()[k], b = exact.values()[k];
    if (std::isfinite(a) && std::isfinite(b)) e = std::max(e, std::fabs(a - b));
  }
  return e;
}

// The rule: a dumped value x agrees with the exact value r when
//   |x - r| <= 2·e + (L + 2)·u·|terms|
// e: the largest error of our own run in the dtype against the exact one (the same inputs), u: the
// dtype's unit roundoff, L: the number of terms of the step's sum and |terms| their magnitudes
// (Σ|a_i·b_i|). The first part is FlashAttention's own test rule (twice a same-precision run's error),
// the second what any order of the sums, and one rounding to store, can move a value. Infinities must
// match; at `masked`, a finite value <= -1e4 where r is -inf counts as masked.
Judged judge(std::span<const double> dumped, const Tensor<double>& exact, const Tensor<double>& in_dtype,
             const Magnitude& mag, DType dtype, bool masked_step) {
  const double e = own_error(in_dtype, exact), u = unit_roundoff(dtype);
  Judged j;
  double worst_excess = -inf, worst_diff = -1;
  for (std::size_t k = 0; k < dumped.size(); ++k) {
    const double x = dumped[k], r = exact.values()[k];
    double diff = 0;
    if (masked_step && r == -inf && std::isfinite(x) && x <= masked_threshold) {
      ++j.large_negatives;
    } else if (x != r && !(std::isnan(x) && std::isnan(r))) {
      diff = std::isfinite(x) && std::isfinite(r) ? std::fabs(x - r) : inf;
    }
    const double m = mag.of.values()[k];
    const double tol = 2 * e + (mag.terms + 2) * u * (std::isfinite(m) ? m : 0.0);
    const bool out = !(diff <= tol);
    if (out) ++j.out;
    if (!std::isnan(diff)) j.max_abs = std::max(j.max_abs, diff);
    // The worst element: out of tolerance by the most, else the largest difference.
    const double excess = out ? (std::isfinite(diff) ? diff - tol : inf) : -inf;
    if (excess > worst_excess || (worst_excess == -inf && excess == -inf && diff > worst_diff)) {
      worst_excess = excess;
      worst_diff = diff;
      j.worst = k;
      j.worst_tolerance = tol;
    }
  }
  return j;
}

// max |dumped - ours| and max |dumped - ours| / |ours|, the masked step's large negatives counting as -inf.
std::pair<double, double> largest_difference(std::span<const double> dumped, const Tensor<double>& ours,
                                             bool masked_step) {
  double max_abs = 0, max_rel = 0;
  for (std::size_t k = 0; k < dumped.size(); ++k) {
    const double x = dumped[k], o = ours.values()[k];
    if (x == o || (std::isnan(x) && std::isnan(o))) continue;
    if (masked_step && o == -inf && std::isfinite(x) && x <= masked_threshold) continue;
    const double diff = std::isfinite(x) && std::isfinite(o) ? std::fabs(x - o) : inf;
    max_abs = std::max(max_abs, diff);
    if (std::isfinite(o) && o != 0) max_rel = std::max(max_rel, diff / std::fabs(o));
  }
  return {max_abs, max_rel};
}

Judged judge_against(const Problem& p, const Reference& r, Step s, std::span<const double> dumped, DType dtype) {
  return judge(dumped, r.exact[slot(s)], r.in_dtype[slot(s)], magnitude(p, r.carry, r.exact[slot(s)], s), dtype,
               s == Step::masked);
}

// The dtypes less precise than `dtype`, most precise first.
std::vector<DType> less_precise(DType dtype) {
  switch (dtype) {
    case DType::float64: return {DType::float32, DType::float16, DType::bfloat16};
    case DType::float32: return {DType::float16, DType::bfloat16};
    case DType::float16: return {DType::bfloat16};
    case DType::bfloat16: return {};
  }
  return {};
}

std::string label(const Problem& p, const std::string& axis, std::size_t b, std::size_t i) {
  if (axis == "query" && b < p.tokens.size() && i < p.tokens[b].size()) return p.tokens[b][i];
  if (axis == "key" && b < p.context_tokens.size() && i < p.context_tokens[b].size()) return p.context_tokens[b][i];
  return std::to_string(i);
}

// Counts, in the weights of `w` (canonical), the positions the mask forbids that hold weight, and
// the positions it allows that hold none while ours do.
std::pair<std::size_t, std::size_t> mask_counts(const Problem& p, const Tensor<double>& dumped,
                                                const Tensor<double>& ours, bool scores_step) {
  std::size_t forbidden = 0, missing = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < dumped.dim(1); ++hd)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) {
          const double x = dumped(b, hd, i, j), o = ours(b, hd, i, j);
          const bool x_masked = scores_step ? (x == -inf || x <= masked_threshold) : x == 0;
          const bool o_masked = scores_step ? o == -inf : o == 0;
          if (!p.mask.allows(b, i, j) && !x_masked) ++forbidden;
          if (p.mask.allows(b, i, j) && x_masked && !o_masked) ++missing;
        }
  return {forbidden, missing};
}

// A measured sentence on what reproducing the dump with `c` shows at step `s`.
std::string finding(const Problem& p, const Candidate& c, Step s, const Tensor<double>& dumped,
                    const Tensor<double>& ours, const Judged& with_mistake, std::size_t at) {
  std::string reproduces =
      fmt::format("made on the same inputs, this mistake reproduces the dump's {} (largest difference {})",
                  step_info(s).name, significant_value(with_mistake.max_abs, 6));
  switch (c.code) {
    case DiagnosisCode::scale:
      if ((s == Step::scaled || s == Step::masked) && ours.values()[at] != 0 && std::isfinite(ours.values()[at])) {
        const double ratio = dumped.values()[at] / ours.values()[at];
        return fmt::format("the dump's value is {} times ours ({} = {}); {}", significant_value(ratio, 6),
                           c.variant == Variant::no_scale ? "√d_k" : "1/√d_k",
                           significant_value(c.variant == Variant::no_scale ? 1 / p.scale : p.scale, 6), reproduces);
      }
      return reproduces;
    case DiagnosisCode::softmax_axis:
      if (s == Step::weights) {
        double lo = inf, hi = -inf;
        for (std::size_t b = 0; b < dumped.dim(0); ++b)
          for (std::size_t hd = 0; hd < dumped.dim(1); ++hd)
            for (std::size_t j = 0; j < p.m; ++j) {
              double sum = 0;
              for (std::size_t i = 0; i < p.n; ++i) sum += dumped(b, hd, i, j);
              lo = std::min(lo, sum);
              hi = std::max(hi, sum);
            }
        return fmt::format(
            "the dump's weights sum to 1 down each column (column sums {} to {}), not along each row; {}",
            significant_value(lo, 6), significant_value(hi, 6), reproduces);
      }
      return reproduces;
    case DiagnosisCode::mask:
    case DiagnosisCode::alignment:
      if (s == Step::masked || s == Step::weights) {
        const auto [forbidden, missing] = mask_counts(p, dumped, ours, s == Step::masked);
        if (s == Step::masked)
          return fmt::format("the dump leaves {} forbidden score{} unmasked and masks {} allowed one{}; {}", forbidden,
                             forbidden == 1 ? "" : "s", missing, missing == 1 ? "" : "s", reproduces);
        return fmt::format("the dump puts weight on {} forbidden key{} and none on {} allowed one{}; {}", forbidden,
                           forbidden == 1 ? "" : "s", missing, missing == 1 ? "" : "s", reproduces);
      }
      return reproduces;
    case DiagnosisCode::large_negative:
      if (s == Step::weights && p.m > 0)
        return fmt::format("the rows the mask empties hold weights of about 1/m = {} in the dump, where they are 0; {}",
                           significant_value(1.0 / static_cast<double>(p.m), 6), reproduces);
      return reproduces;
    case DiagnosisCode::head_split: return fmt::format("the dump holds our values in another order; {}", reproduces);
    default: return reproduces;
  }
}

// A window of rows and columns of the last two axes around `at`.
DivergenceWindow window_around(const Problem& p, const std::vector<std::string>& axes,
                               const std::vector<std::size_t>& at, const Tensor<double>& ours,
                               const Tensor<double>& dumped) {
  DivergenceWindow w;
  const std::size_t rank = at.size(), ra = rank - 2, ca = rank - 1;
  const Shape& shape = ours.shape();
  w.row_axis = axes[ra];
  w.col_axis = axes[ca];
  const auto span_of = [](std::size_t centre, std::size_t extent) {
    std::vector<std::size_t> v;
    const std::size_t first = centre >= 2 ? centre - 2 : 0, last = std::min(extent, centre + 3);
    for (std::size_t k = first; k < last; ++k) v.push_back(k);
    return v;
  };
  w.rows = span_of(at[ra], shape[ra]);
  w.cols = span_of(at[ca], shape[ca]);
  for (const std::size_t r : w.rows) w.row_labels.push_back(label(p, w.row_axis, at[0], r));
  for (const std::size_t c : w.cols) w.col_labels.push_back(label(p, w.col_axis, at[0], c));
  std::size_t base = 0;  // the flat offset of the (rows, cols) matrix holding `at`
  for (std::size_t a = 0; a < ra; ++a) base = (base + at[a]) * shape[a + 1];
  base *= shape[ca];
  for (const std::size_t r : w.rows) {
    std::vector<double> o, d;
    for (const std::size_t c : w.cols) {
      const std::size_t k = base + r * shape[ca] + c;
      o.push_back(ours.values()[k]);
      d.push_back(dumped.values()[k]);
    }
    w.ours.push_back(std::move(o));
    w.dumped.push_back(std::move(d));
  }
  return w;
}

}  // namespace

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::agrees: return "agrees";
    case Verdict::differs: return "differs";
    case Verdict::follows: return "follows";
  }
  return "?";
}

std::string_view to_string(DiagnosisCode code) {
  switch (code) {
    case DiagnosisCode::scale: return "scale";
    case DiagnosisCode::transpose: return "transpose";
    case DiagnosisCode::softmax_axis: return "softmax-axis";
    case DiagnosisCode::mask: return "mask";
    case DiagnosisCode::alignment: return "alignment";
    case DiagnosisCode::head_split: return "head-split";
    case DiagnosisCode::large_negative: return "large-negative";
    case DiagnosisCode::precision: return "precision";
  }
  return "?";
}

Shape canonical_shape(Step step, const Problem& p) {
  switch (step) {
    case Step::q: return {p.B, p.n, p.h * p.d_k};
    case Step::k: return {p.B, p.m, p.g * p.d_k};
    case Step::v: return {p.B, p.m, p.g * p.d_v};
    case Step::q_heads:
    case Step::q_rot: return {p.B, p.h, p.n, p.d_k};
    case Step::k_heads:
    case Step::k_rot: return {p.B, p.g, p.m, p.d_k};
    case Step::v_heads: return {p.B, p.g, p.m, p.d_v};
    case Step::head_outputs: return {p.B, p.h, p.n, p.d_v};
    case Step::concat: return {p.B, p.n, p.h * p.d_v};
    case Step::output: return {p.B, p.n, p.d_out};
    default: return {p.B, p.h, p.n, p.m};
  }
}

namespace {

bool is_head_step(Step s) {
  return s == Step::q_heads || s == Step::k_heads || s == Step::v_heads || s == Step::q_rot || s == Step::k_rot ||
         s == Step::head_outputs;
}

// Does step `later` use the value of step `earlier`, directly or through other steps?
bool depends_on(Step later, Step earlier) {
  const auto inputs = [](Step s) -> std::vector<Step> {
    switch (s) {
      case Step::q_heads: return {Step::q};
      case Step::k_heads: return {Step::k};
      case Step::v_heads: return {Step::v};
      case Step::q_rot: return {Step::q_heads};
      case Step::k_rot: return {Step::k_heads};
      case Step::scores: return {Step::q_heads, Step::k_heads, Step::q_rot, Step::k_rot};
      case Step::scaled: return {Step::scores};
      case Step::bias: return {Step::scaled};
      case Step::masked: return {Step::scaled, Step::bias};
      case Step::weights: return {Step::masked};
      case Step::head_outputs: return {Step::weights, Step::v_heads};
      case Step::concat: return {Step::head_outputs};
      case Step::output: return {Step::concat};
      default: return {};
    }
  };
  for (const Step s : inputs(later))
    if (s == earlier || depends_on(s, earlier)) return true;
  return false;
}

}  // namespace

std::vector<DumpLayout> layouts_that_fit(Step step, const Problem& p, const Shape& shape) {
  const Shape canonical = canonical_shape(step, p);
  const std::vector<std::string> names = dim_names(step, true);
  // The head axis (axis 1 of the 4-axis steps) may be left out when it has extent 1: one head.
  const bool has_heads = canonical.size() == 4;
  std::vector<DumpLayout> fits;
  for (const HeadOrder order : {HeadOrder::heads_first, HeadOrder::tokens_first}) {
    if (order == HeadOrder::tokens_first && !is_head_step(step)) break;
    Shape s = canonical;
    std::vector<std::string> dims = names;
    if (order == HeadOrder::tokens_first) {
      std::swap(s[1], s[2]);
      std::swap(dims[1], dims[2]);
    }
    const std::size_t head_axis = order == HeadOrder::tokens_first ? 2 : 1;
    for (const bool batch : {true, false}) {
      if (!batch && p.B != 1) continue;
      for (const bool heads : {true, false}) {
        if (!heads && (!has_heads || canonical[1] != 1 || order == HeadOrder::tokens_first)) continue;
        Shape fit;
        std::vector<std::string> fit_dims;
        for (std::size_t a = 0; a < s.size(); ++a) {
          if ((a == 0 && !batch) || (a == head_axis && !heads)) continue;
          fit.push_back(s[a]);
          fit_dims.push_back(dims[a]);
        }
        if (fit == shape) fits.push_back({batch, order, std::move(fit_dims)});
      }
    }
  }
  return fits;
}

std::string shape_mismatch(Step step, const Problem& p, const std::string& source, const Shape& shape) {
  const Shape c = canonical_shape(step, p);
  const std::vector<std::string> names = dim_names(step, true);
  std::vector<std::string> parts;
  for (std::size_t a = 0; a < c.size(); ++a) parts.push_back(fmt::format("{} {}", names[a], c[a]));
  return fmt::format("{}: shape ({:n}) does not fit step {} of this input: ({}){}{}{}", source, shape,
                     step_info(step).name, fmt::join(parts, ", "), p.B == 1 ? ", or without the batch axis" : "",
                     c.size() == 4 && c[1] == 1 ? ", or without the head axis" : "",
                     is_head_step(step) ? ", with the head and token axes in either order" : "");
}

Tensor<double> to_canonical(Step step, const Problem& p, const DumpLayout& layout, std::span<const double> values) {
  const Shape canonical = canonical_shape(step, p);
  Tensor<double> out(canonical, std::vector<double>(values.begin(), values.end()));
  if (layout.order == HeadOrder::heads_first) return out;
  // (B, n, h, d) -> (B, h, n, d)
  const std::size_t B = canonical[0], H = canonical[1], N = canonical[2], D = canonical[3];
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < N; ++t)
      for (std::size_t hd = 0; hd < H; ++hd)
        for (std::size_t d = 0; d < D; ++d) out(b, hd, t, d) = values[((b * N + t) * H + hd) * D + d];
  return out;
}

DiffResult diff_dump(const Problem& p, const std::vector<DumpedStep>& dumped, DType dtype) {
  DiffResult result;
  result.dtype = dtype;

  // Read every dumped step into its canonical shape, choosing between two readings that both fit
  // (h == n) by which is nearer our trace.
  const Reference full = reference(p, Given{}, Variant::none, dtype);
  Given given;
  Given as_given;  // the same, with the masked step's large negatives left as they were dumped
  std::array<const DumpedStep*, step_count> source{};
  std::array<DumpLayout, step_count> layouts{};
  for (const DumpedStep& d : dumped) {
    const std::vector<DumpLayout> fits = layouts_that_fit(d.step, p, d.shape);
    if (fits.empty()) throw std::invalid_argument(shape_mismatch(d.step, p, d.source, d.shape));
    std::size_t best = 0;
    if (fits.size() > 1) {
      double best_error = inf;
      for (std::size_t f = 0; f < fits.size(); ++f) {
        const Tensor<double> t = to_canonical(d.step, p, fits[f], d.values);
        double e = 0;
        for (std::size_t k = 0; k < t.size(); ++k) {
          const double diff = std::fabs(t.values()[k] - full.exact[slot(d.step)].values()[k]);
          e = std::max(e, std::isnan(diff) ? 0.0 : diff);
        }
        if (e < best_error) {
          best_error = e;
          best = f;
        }
      }
    }
    Tensor<double> value = to_canonical(d.step, p, fits[best], d.values);
    as_given[slot(d.step)] = value;
    if (d.step == Step::masked)  // a large negative where the mask forbids is read as -inf from here on
      for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t hd = 0; hd < p.h; ++hd)
          for (std::size_t i = 0; i < p.n; ++i)
            for (std::size_t j = 0; j < p.m; ++j) {
              double& x = value(b, hd, i, j);
              if (!p.mask.allows(b, i, j) && std::isfinite(x) && x <= masked_threshold) x = -inf;
            }
    given[slot(d.step)] = std::move(value);
    source[slot(d.step)] = &d;
    layouts[slot(d.step)] = fits[best];
  }

  // Each dumped step against ours from the dump's earlier steps (resumed) and from the input (full).
  const Reference resumed = reference(p, given, Variant::none, dtype);
  std::vector<Step> differing;
  for (const Step s : all_steps()) {
    if (!given[slot(s)]) continue;
    const DumpedStep& d = *source[slot(s)];
    // Judge the dump's values as dumped: the masked step before its large negatives were read as -inf.
    const Tensor<double> as_dumped = to_canonical(s, p, layouts[slot(s)], d.values);
    const Judged local = judge_against(p, resumed, s, as_dumped.values(), dtype);
    const Judged against_trace = judge_against(p, full, s, as_dumped.values(), dtype);
    StepJudgement j{s, d.source, d.shape, layouts[slot(s)], d.dtype};
    std::tie(j.max_abs, j.max_rel) = largest_difference(as_dumped.values(), full.in_dtype[slot(s)], s == Step::masked);
    j.max_abs_resumed = largest_difference(as_dumped.values(), resumed.in_dtype[slot(s)], s == Step::masked).first;
    j.tolerance = local.worst_tolerance;
    j.out_of_tolerance = local.out;
    j.large_negatives = local.large_negatives;
    if (!local.ok()) {
      j.verdict = Verdict::differs;
      if (!result.first) {
        Divergence dv;
        dv.step = s;
        dv.index = unravel_index(local.worst, canonical_shape(s, p));
        dv.axes = dim_names(s, true);
        for (std::size_t a = 0; a < dv.index.size(); ++a)
          dv.labels.push_back(label(p, dv.axes[a], dv.index[0], dv.index[a]));
        dv.ours = resumed.in_dtype[slot(s)].values()[local.worst];
        dv.dumped = as_dumped.values()[local.worst];
        dv.tolerance = local.worst_tolerance;
        dv.out_of_tolerance = local.out;
        dv.elements = as_dumped.size();
        dv.window = window_around(p, dv.axes, dv.index, resumed.in_dtype[slot(s)], as_dumped);
        // The diagnosis: every known mistake that, made on the same inputs, reproduces the dump here.
        // (The large-negative mistake starts from the masked scores as dumped.)
        for (const Candidate& c : candidates(p)) {
          const Reference r = reference(p, c.variant == Variant::large_negative ? as_given : given, c.variant, dtype);
          const Judged with = judge_against(p, r, s, as_dumped.values(), dtype);
          if (with.ok())
            dv.diagnosis.push_back(
                {c.code, c.mistake, finding(p, c, s, as_dumped, resumed.exact[slot(s)], with, local.worst)});
        }
        // Within what a less precise dtype gives: computed in it, stored as the dump's dtype.
        for (const DType lower : less_precise(dtype)) {
          const Reference r = reference(p, given, Variant::none, lower);
          const Judged with = judge_against(p, r, s, as_dumped.values(), lower);
          if (!with.ok()) continue;
          dv.diagnosis.push_back(
              {DiagnosisCode::precision, fmt::format("computed in {}", name_of(lower)),
               fmt::format("the dump's largest difference, {}, is within what {} arithmetic gives here ({}): the "
                           "values were probably computed in {} and stored as {}",
                           significant_value(local.max_abs, 6), name_of(lower),
                           significant_value(with.worst_tolerance, 6), name_of(lower), name_of(d.dtype))});
          break;
        }
        result.first = std::move(dv);
      }
      differing.push_back(s);
    } else if (!against_trace.ok()) {
      for (const Step e : differing)
        if (depends_on(s, e)) j.follows = e;  // the latest one it uses
      if (j.follows) j.verdict = Verdict::follows;
    }
    if (j.large_negatives > 0)
      result.notes.push_back(fmt::format("{}: {} finite value{} of -1e4 or less where the mask forbids, read as -∞",
                                         d.source, j.large_negatives, j.large_negatives == 1 ? "" : "s"));
    if (layouts[slot(s)].order == HeadOrder::tokens_first)
      result.notes.push_back(fmt::format("{}: read as ({}), the tokens before the heads", d.source,
                                         fmt::join(layouts[slot(s)].dims, ", ")));
    result.steps.push_back(std::move(j));
  }
  return result;
}

}  // namespace attn
