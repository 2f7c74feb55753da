#include "lessons/forward.hpp"

#include <functional>
#include <limits>

#include "engine/common.hpp"
#include "ops/attention.hpp"
#include "ops/dropout.hpp"
#include "tensor/half.hpp"

namespace attn {

namespace {

constexpr std::size_t slot(Step s) { return static_cast<std::size_t>(s); }

Tensor<double> transposed(const Tensor<double>& W) {
  Tensor<double> t({W.dim(1), W.dim(0)});
  for (std::size_t r = 0; r < W.dim(0); ++r)
    for (std::size_t c = 0; c < W.dim(1); ++c) t(c, r) = W(r, c);
  return t;
}

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

// Which keys the (possibly mistaken) mask lets query i see.
std::function<bool(std::size_t, std::size_t, std::size_t)> mask_of(const Problem& p, Mistake v) {
  switch (v) {
    case Mistake::mask_sees_next:
      return [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j == 0 ? 0 : j - 1); };
    case Mistake::mask_misses_diagonal:
      return [&p](std::size_t b, std::size_t i, std::size_t j) { return j + 1 < p.m && p.mask.allows(b, i, j + 1); };
    case Mistake::align_flipped: {
      Mask flipped = p.mask;
      flipped.align = flipped.align == Align::top_left ? Align::bottom_right : Align::top_left;
      return [flipped](std::size_t b, std::size_t i, std::size_t j) { return flipped.allows(b, i, j); };
    }
    default: return [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); };
  }
}

// One pass over the steps in pipeline order: `keep` stores a computed step (rounded to the storage)
// and hands on what the next steps start from.
template <class T>
class Pass {
 public:
  Pass(const Problem& p, Mistake v, DType storage, const GivenSteps& given)
      : p_(p), v_(v), storage_(storage), given_(given) {}

  const Tensor<T>& keep(Step s, Tensor<T> computed) {
    round_stored(computed, storage_);
    out.computed[slot(s)] = std::move(computed);
    Tensor<T>& carry = out.carry[slot(s)];
    carry = given_[slot(s)] ? cast<T>(*given_[slot(s)]) : out.computed[slot(s)];
    return carry;
  }
  Tensor<T> input(const Tensor<double>& t) const {
    Tensor<T> r(t.shape());
    for (std::size_t k = 0; k < t.size(); ++k) r.values()[k] = stored_input<T>(storage_, t.values()[k]);
    return r;
  }
  std::vector<T> input(const std::vector<double>& b) const {
    std::vector<T> r(b.size());
    for (std::size_t k = 0; k < b.size(); ++k) r[k] = stored_input<T>(storage_, b[k]);
    return r;
  }
  // A weight as the mistake uses it: transposed when that is the mistake.
  // The value given for step s (a user's dump), if any.
  const std::optional<Tensor<double>>& given(Step s) const { return given_[slot(s)]; }
  Tensor<T> weight(const Tensor<double>& W, Mistake transposed_by) const {
    return input(v_ == transposed_by ? transposed(W) : W);
  }
  // Y split into heads (a reshape alone, for wrong-reshape).
  Tensor<T> split(const Tensor<T>& Y, std::size_t heads, std::size_t tokens, std::size_t d) const {
    return v_ == Mistake::wrong_reshape ? reinterpreted(Y, {p_.B, heads, tokens, d}) : split_heads(Y, heads);
  }

  ForwardRun<T> out;

 private:
  const Problem& p_;
  Mistake v_;
  DType storage_;
  const GivenSteps& given_;
};

template <class T>
ForwardRun<T> run_forward(const Problem& p, Mistake v, DType storage, const GivenSteps& given) {
  Pass<T> pass(p, v, storage, given);
  const auto keep = [&pass](Step s, Tensor<T> t) -> const Tensor<T>& { return pass.keep(s, std::move(t)); };
  const std::vector<T> b_q = pass.input(p.b_q), b_k = pass.input(p.b_k), b_v = pass.input(p.b_v);

  // pass 1: the projections, the heads split, and RoPE after the split (as engine/common.hpp turns them)
  const Tensor<T> X = pass.input(p.X), C = pass.input(p.C);
  const Tensor<T>& q = keep(Step::q, project(X, pass.weight(p.W_q, Mistake::w_q_transposed), std::span<const T>(b_q)));
  const Tensor<T>& k = keep(Step::k, project(C, pass.weight(p.W_k, Mistake::w_k_transposed), std::span<const T>(b_k)));
  const Tensor<T>& val =
      keep(Step::v, project(C, pass.weight(p.W_v, Mistake::w_v_transposed), std::span<const T>(b_v)));
  const Tensor<T>* Q = &keep(Step::q_heads, pass.split(q, p.h, p.n, p.d_k));
  const Tensor<T>* K = &keep(Step::k_heads, pass.split(k, p.g, p.m, p.d_k));
  const Tensor<T>& V = keep(Step::v_heads, pass.split(val, p.g, p.m, p.d_v));
  if (p.rope) {
    const Rope& r = *p.rope;
    Q = &keep(Step::q_rot, rotate(*Q, pass.input(r.cos_q), pass.input(r.sin_q), r.style));
    K = &keep(Step::k_rot, rotate(*K, pass.input(r.cos_k), pass.input(r.sin_k), r.style));
  }

  // pass 2: query dot key, scaled (once, not at all or twice), capped with softcap, ALiBi's bias after the
  // scale and the cap (as the naive engine adds it), masked (with −∞, a large negative, or not yet), and the softmax
  // (of rows or columns)
  const Tensor<T>& S = keep(Step::scores, v == Mistake::k_untransposed ? scores_untransposed(*Q, *K) : scores(*Q, *K));
  const double factor = v == Mistake::scale_twice ? p.scale * p.scale : p.scale;
  const Tensor<T>* S_scaled = &keep(Step::scaled, scale(S, static_cast<T>(factor)));
  if (p.softcap) S_scaled = &keep(Step::capped, softcap(*S_scaled, static_cast<T>(*p.softcap)));
  if (p.alibi) {
    const std::vector<T> slopes = pass.input(p.alibi->slopes);
    const std::vector<T> pos_q(p.alibi->query_positions.begin(), p.alibi->query_positions.end());
    const std::vector<T> pos_k(p.alibi->key_positions.begin(), p.alibi->key_positions.end());
    S_scaled = &keep(Step::bias, add_alibi(*S_scaled, std::span<const T>(slopes), std::span<const T>(pos_q),
                                           std::span<const T>(pos_k)));
  }
  Tensor<T> masked;
  if (v == Mistake::mask_after_softmax) masked = *S_scaled;
  // A large negative on purpose: this is the mistake being shown.
  else if (v == Mistake::minus_1e9) masked = fill_forbidden(*S_scaled, p.mask, static_cast<T>(lowest_written(storage)));
  else masked = apply_mask(*S_scaled, mask_of(p, v));
  const Tensor<T>& S_masked = keep(Step::masked, std::move(masked));
  // With sinks each row's softmax has one more logit, of no value; the column mistake leaves them out.
  Tensor<T> A;
  Tensor<T> sink_share({p.B, p.h, p.n}, T{0});
  if (v == Mistake::softmax_columns) A = softmax_columns(S_masked);
  else if (p.sinks.empty()) A = softmax_rows(S_masked);
  else {
    const std::vector<T> sinks = pass.input(p.sinks);
    A = softmax_rows_with_sinks(S_masked, std::span<const T>(sinks), sink_share);
  }
  if (v == Mistake::mask_after_softmax) A = fill_forbidden(std::move(A), p.mask, T{0});
  const Tensor<T>* weights = &keep(Step::weights, std::move(A));
  if (!p.sinks.empty()) keep(Step::sink_weights, std::move(sink_share));
  // dropout: the engines' keep mask, drawn from the seed and each weight's position; a given dropped step (a
  // dump made with another generator) brings its own, a weight kept where the given value is not 0, so that
  // what is judged is the weights and their 1/(1 - p), not the draws. dropout-unscaled leaves 1/(1 - p) out.
  if (p.dropout) {
    const DropoutMask mask(*p.dropout);
    const std::optional<Tensor<double>>& theirs = pass.given(Step::dropped);
    const bool their_mask = theirs && theirs->size() == weights->size();
    const T kept_factor = v == Mistake::dropout_unscaled ? T{1} : static_cast<T>(1 / (1 - p.dropout->p));
    Tensor<T> dropped(weights->shape(), T{0});
    std::size_t e = 0;  // (b, head, i, j) in row-major order
    for (std::size_t b = 0; b < p.B; ++b)
      for (std::size_t hd = 0; hd < p.h; ++hd)
        for (std::size_t i = 0; i < p.n; ++i)
          for (std::size_t j = 0; j < p.m; ++j, ++e)
            if (their_mask ? theirs->values()[e] != 0 : mask.keeps(b, hd, i, j))
              dropped.values()[e] = weights->values()[e] * kept_factor;
    weights = &keep(Step::dropped, std::move(dropped));
  }

  // pass 3: the weighted sum of the values, the heads merged (by a reshape alone, for wrong-reshape) and
  // projected out
  const Tensor<T>& O_h = keep(Step::head_outputs, weighted_sum(*weights, V));
  const Tensor<T>& O =
      keep(Step::concat, v == Mistake::wrong_reshape ? reinterpreted(O_h, {p.B, p.n, p.h * p.d_v}) : merge_heads(O_h));
  if (p.has_output_projection()) {
    const std::vector<T> b_o = pass.input(p.b_o);
    keep(Step::output, project(O, pass.weight(p.W_o, Mistake::w_o_transposed), std::span<const T>(b_o)));
  } else {
    keep(Step::output, Tensor<T>(O));
  }
  return std::move(pass.out);
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
    case Mistake::no_scale: return {{Step::scaled, formula}};
    case Mistake::no_mask:
    case Mistake::minus_1e9: return {{Step::masked, formula}};
    case Mistake::softmax_columns: return {{Step::weights, formula}};
    case Mistake::dropout_unscaled: return {{Step::dropped, formula}};
    default: return {};
  }
}

}  // namespace attn
