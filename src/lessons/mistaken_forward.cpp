#include "lessons/mistaken_forward.hpp"

#include <functional>
#include <optional>
#include <limits>

#include "engine/common.hpp"
#include "engine/rows.hpp"
#include "ops/attention.hpp"
#include "ops/attention_backward.hpp"
#include "model/dropout.hpp"
#include "tensor/half.hpp"

namespace attn {

namespace {

// The same values read in another shape: a reshape without the transpose.
// (B, n, h·d) read as (B, h, n, d): H[b][hd][i][c] = Y.flat[b][(hd·n + i)·d + c], and back.
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

// A = the softmax down each column (over the queries) of every (n, m) matrix: softmax_rows of the
// transpose, so a column whose every score is −∞ gets zeros, as an emptied row does.
template <class T>
Tensor<T> softmax_columns(const Tensor<T>& S) {
  return swap_last_axes(softmax_rows(swap_last_axes(S)));
}

// The scores the mask forbids set to `fill` (ops/attention.hpp's apply_mask writes −∞).
template <class T>
Tensor<T> fill_forbidden(Tensor<T> S, const Mask& mask, T fill) {
  for (std::size_t b = 0; b < S.dim(0); ++b)
    for (std::size_t hd = 0; hd < S.dim(1); ++hd)
      for (std::size_t i = 0; i < S.dim(2); ++i)
        for (std::size_t j = 0; j < S.dim(3); ++j)
          if (!mask.allows(b, i, j)) S(b, hd, i, j) = fill;
  return S;
}

// Which keys a mask of the wrong keys lets query i see: one key later, the diagonal left out, or the
// other alignment; nothing for any other mistake.
std::optional<std::function<bool(std::size_t, std::size_t, std::size_t)>> wrong_mask(const Problem& p, Mistake v) {
  if (v == Mistake::mask_sees_next)
    return [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j == 0 ? 0 : j - 1); };
  if (v == Mistake::mask_misses_diagonal)
    return [&p](std::size_t b, std::size_t i, std::size_t j) { return j + 1 < p.m && p.mask.allows(b, i, j + 1); };
  if (v == Mistake::align_flipped) {
    Mask flipped = p.mask;
    flipped.align = flipped.align == Align::top_left ? Align::bottom_right : Align::top_left;
    return [flipped](std::size_t b, std::size_t i, std::size_t j) { return flipped.allows(b, i, j); };
  }
  return std::nullopt;
}

// The dropped weights of a mistaken pass: the engines' keep mask, drawn from the seed and each weight's
// position, or, where a dropped step is given (a dump made with another generator), its own: a weight kept
// where the given value is not 0, so that what is judged is the weights and their 1/(1 - p), not the draws.
// dropout-unscaled leaves 1/(1 - p) out.
template <class T>
Tensor<T> dropped_as(const Problem& p, const Tensor<T>& weights, Mistake v,
                     const std::optional<Tensor<double>>& theirs) {
  const DropoutMask mask(*p.dropout);
  const bool their_mask = theirs && theirs->size() == weights.size();
  const T kept_factor = v == Mistake::dropout_unscaled ? T{1} : static_cast<T>(1 / (1 - p.dropout->p));
  Tensor<T> dropped(weights.shape(), T{0});
  std::size_t e = 0;  // (b, head, i, j) in row-major order
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j, ++e)
          if (their_mask ? theirs->values()[e] != 0 : mask.keeps(b, hd, i, j))
            dropped.values()[e] = weights.values()[e] * kept_factor;
  return dropped;
}

// What mistake `v` computes in place of step `s`'s row (engine/rows.hpp), or nothing where it leaves the
// row as it is. (no-scale, no-mask and shared-qkv are a different problem instead: mistaken_problem;
// dropout-unscaled is dropped_as.) The switch is over the mistakes, so that a new one is named here by the
// compiler and a new step needs nothing.
template <class T>
std::optional<Tensor<T>> mistaken_step(Step s, const ForwardValues<T>& x, const RowContext<T>& c, Mistake v,
                                       DType storage) {
  const Problem& p = c.p;
  const auto at = [&x](Step t) -> const Tensor<T>& { return x[slot(t)]; };
  const auto masks = [&x, &p]() -> const Tensor<T>& {
    return x[slot(rows::stage_reads(Stage::mask, p))];
  };  // what the mask reads
  switch (v) {
    case Mistake::w_q_transposed:
      if (s == Step::q) return project(c.in.X, transposed(c.in.W_q), std::span<const T>(c.in.b_q));
      break;
    case Mistake::w_k_transposed:
      if (s == Step::k) return project(c.in.C, transposed(c.in.W_k), std::span<const T>(c.in.b_k));
      break;
    case Mistake::w_v_transposed:
      if (s == Step::v) return project(c.in.C, transposed(c.in.W_v), std::span<const T>(c.in.b_v));
      break;
    case Mistake::w_o_transposed:
      if (s == Step::output && p.has_output_projection())
        return project(at(Step::concat), transposed(c.in.W_o), std::span<const T>(c.in.b_o));
      break;
    // a reshape without the transpose, (B, n, h·d) read as (B, h, n, d), and back
    case Mistake::wrong_reshape:
      if (s == Step::q_heads) return reinterpreted(at(Step::q), {p.B, p.h, p.n, p.d_k});
      if (s == Step::k_heads) return reinterpreted(at(Step::k), {p.B, p.g, p.m, p.d_k});
      if (s == Step::v_heads) return reinterpreted(at(Step::v), {p.B, p.g, p.m, p.d_v});
      if (s == Step::concat) return reinterpreted(at(Step::head_outputs), {p.B, p.n, p.h * p.d_v});
      break;
    case Mistake::k_untransposed:
      if (s == Step::scores) return scores_untransposed(at(rows::queries_read(p)), at(rows::keys_read(p)));
      break;
    case Mistake::scale_twice:
      if (s == Step::scaled) return scale(at(Step::scores), static_cast<T>(p.scale * p.scale));
      break;
    // the mask not yet applied (it comes after the softmax, which then zeroes the forbidden weights)
    case Mistake::mask_after_softmax:
      if (s == Step::masked) return masks();
      if (s == Step::weights) return fill_forbidden(rows::weights(x, c), p.mask, T{0});
      break;
    // a large negative on purpose, or a mask of the wrong keys
    case Mistake::minus_1e9:
      if (s == Step::masked) return fill_forbidden(masks(), p.mask, static_cast<T>(lowest_written(storage)));
      break;
    case Mistake::mask_sees_next:
    case Mistake::mask_misses_diagonal:
    case Mistake::align_flipped:
      if (s == Step::masked) return apply_mask(masks(), *wrong_mask(p, v));
      break;
    // the softmax of the columns leaves the sinks out
    case Mistake::softmax_columns:
      if (s == Step::weights) return softmax_columns(at(Step::masked));
      if (s == Step::sink_weights) return Tensor<T>({p.B, p.h, p.n}, T{0});
      break;
    // nothing mistaken here: the problem's own (mistaken_problem), dropped_as's, or the backward pass's
    // (lessons/mistaken_backward.cpp)
    case Mistake::none:
    case Mistake::no_scale:
    case Mistake::no_mask:
    case Mistake::shared_qkv:
    case Mistake::dropout_unscaled:
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
  return std::nullopt;
}

// The rows of engine/rows.hpp in pipeline order, each stored rounded to the storage (as the naive engine
// stores it), with mistake `v` made in place of the rows it changes; where `given` holds a step, the steps
// after it start from that value.
template <class T>
ForwardRun<T> run_forward(const Problem& p, Mistake v, DType storage, const GivenSteps& given) {
  const Inputs<T> in(p, storage);
  const RowContext<T> c{p, in};
  ForwardRun<T> out;
  const auto compute = [&](Step s, const ForwardValues<T>& x) {
    if (s == Step::dropped) return dropped_as(p, x[slot(Step::weights)], v, given[slot(Step::dropped)]);
    if (std::optional<Tensor<T>> mistaken = mistaken_step(s, x, c, v, storage)) return std::move(*mistaken);
    return row_of<T>(s).forward(x, c);
  };
  const auto keep = [&](Step s, Tensor<T> computed) {
    round_stored(computed, storage);
    out.computed[slot(s)] = std::move(computed);
    out.carry[slot(s)] = given[slot(s)] ? cast<T>(*given[slot(s)]) : out.computed[slot(s)];
    return out.carry[slot(s)];
  };
  ForwardValues<T> x;
  walk_forward<T>(p, x, compute, keep);
  return out;
}

}  // namespace

double lowest_written(DType storage) {
  switch (storage) {
    case DType::float16: return -65504.0;
    case DType::bfloat16: return -static_cast<double>(bfloat16_to_float(0x7F7F));
    default: return -1e9;
  }
}

template <class T>
ForwardRun<T> forward(const Problem& p, Mistake mistake, DType storage, const GivenSteps& given) {
  if (mistake == Mistake::no_scale || mistake == Mistake::no_mask || mistake == Mistake::shared_qkv)
    return run_forward<T>(mistaken_problem(p, mistake), mistake, storage, given);
  return run_forward<T>(p, mistake, storage, given);
}

template ForwardRun<float> forward<float>(const Problem&, Mistake, DType, const GivenSteps&);
template ForwardRun<double> forward<double>(const Problem&, Mistake, DType, const GivenSteps&);

std::vector<std::pair<Step, std::string_view>> changed_steps(Mistake mistake) {
  const std::string_view formula = mistake_info(mistake).mistaken;
  switch (mistake) {
    case Mistake::mask_after_softmax:
      return {{Step::masked, "S'' = S' (the mask comes after the softmax)"}, {Step::weights, formula}};
    case Mistake::shared_qkv: return {{Step::k, "K = X·W_q (= Q)"}, {Step::v, "V = X·W_q (= Q)"}};
    case Mistake::wrong_reshape:
      return {{Step::q_heads, "reshape (n, h·d_k) -> (h, n, d_k), no transpose"},
              {Step::k_heads, "reshape (m, g·d_k) -> (g, m, d_k), no transpose"},
              {Step::v_heads, "reshape (m, g·d_v) -> (g, m, d_v), no transpose"},
              {Step::concat, "reshape (h, n, d_v) -> (n, h·d_v), no transpose"}};
    case Mistake::no_scale:
    case Mistake::scale_twice: return {{Step::scaled, formula}};
    case Mistake::no_mask:
    case Mistake::minus_1e9:
    case Mistake::mask_sees_next:
    case Mistake::mask_misses_diagonal:
    case Mistake::align_flipped: return {{Step::masked, formula}};
    case Mistake::softmax_columns: return {{Step::weights, formula}};
    case Mistake::dropout_unscaled: return {{Step::dropped, formula}};
    case Mistake::k_untransposed: return {{Step::scores, formula}};
    case Mistake::w_q_transposed: return {{Step::q, formula}};
    case Mistake::w_k_transposed: return {{Step::k, formula}};
    case Mistake::w_v_transposed: return {{Step::v, formula}};
    case Mistake::w_o_transposed: return {{Step::output, formula}};
    // nothing mistaken, or a mistake of the backward pass: no forward step changes
    case Mistake::none:
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
  return {};
}

}  // namespace attn
