#include "lessons/backward.hpp"

#include <utility>

#include "engine/backward.hpp"
#include "engine/common.hpp"
#include "ops/attention.hpp"
#include "ops/attention_backward.hpp"
#include "ops/dropout.hpp"

namespace attn {

namespace {

constexpr std::size_t slot(Step s) { return static_cast<std::size_t>(s); }

// One query head of each group of h/g: the first (`last` false) or the last, as g heads.
// (B, h, r, c) -> (B, g, r, c)
template <class T>
Tensor<T> one_head_per_group(const Tensor<T>& S, std::size_t g, bool last) {
  const std::size_t B = S.dim(0), h = S.dim(1), r = S.dim(2), c = S.dim(3), group = h / g;
  Tensor<T> t({B, g, r, c});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t kv = 0; kv < g; ++kv) {
      const std::size_t hd = kv * group + (last ? group - 1 : 0);
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < c; ++j) t(b, kv, i, j) = S(b, hd, i, j);
    }
  return t;
}

// The gradient of a key/value head from the query heads that read it: dK = dSᵀ·Q (or dV = Aᵀ·dO, with A
// and dO in dS's and Q's places), summed over the group, or with the GQA mistakes from one head of it.
// dS (B, h, n, m), Q (B, h, n, d) -> (B, g, m, d)
template <class T>
Tensor<T> key_head_gradient(const Tensor<T>& dS, const Tensor<T>& Q, std::size_t g, Mistake v) {
  if (v == Mistake::gqa_first_head || v == Mistake::gqa_last_head) {
    const bool last = v == Mistake::gqa_last_head;
    return d_scores_keys(one_head_per_group(dS, g, last), one_head_per_group(Q, g, last), g);
  }
  return d_scores_keys(dS, Q, g);
}

// The softmax's backward with the row term D given:  dS = A ⊙ (dA - D)
// dS[r][j] = A[r][j] · (dA[r][j] - D[r])                               A, dA (B, h, n, m), D (B·h·n)
template <class T>
Tensor<T> softmax_backward_with(const Tensor<T>& A, const Tensor<T>& dA, const std::vector<T>& D) {
  const std::size_t m = A.shape().back();
  Tensor<T> dS(A.shape());
  for (std::size_t r = 0; m > 0 && r < A.size() / m; ++r)
    for (std::size_t j = 0; j < m; ++j)
      dS.values()[r * m + j] = A.values()[r * m + j] * (dA.values()[r * m + j] - D[r]);
  return dS;
}

// dS'' from dA, as the mistake computes it: D = rowsum(dA ⊙ A) (the identity), rowsum(dA), rowsum(dO), or
// the whole backward along the columns.                       A, dA (B, h, n, m), dO_h (B, h, n, d_v)
template <class T>
Tensor<T> softmax_backward(const Tensor<T>& A, const Tensor<T>& dA, const Tensor<T>& dO_h, Mistake v) {
  const std::size_t m = A.shape().back(), rows = m > 0 ? A.size() / m : 0, d_v = dO_h.shape().back();
  switch (v) {
    case Mistake::softmax_d_from_da: {
      // D[r] = Σ_j dA[r][j], without the weights
      std::vector<T> D(rows, T{0});
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < m; ++j) D[r] += dA.values()[r * m + j];
      return softmax_backward_with(A, dA, D);
    }
    case Mistake::softmax_d_from_do: {
      // D[r] = Σ_e dO[r][e], without O
      std::vector<T> D(rows, T{0});
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t e = 0; e < d_v; ++e) D[r] += dO_h.values()[r * d_v + e];
      return softmax_backward_with(A, dA, D);
    }
    case Mistake::softmax_backward_columns:
      return swap_last_axes(d_softmax_rows(swap_last_axes(A), swap_last_axes(dA)));
    default: return d_softmax_rows(A, dA);
  }
}

template <class T>
class Pass {
 public:
  Pass(DType storage, const GivenSteps& given) : storage_(storage), given_(given) {}

  // Stores a computed gradient (rounded to the storage) and hands on what the next ones start from.
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

  BackwardRun<T> out;

 private:
  DType storage_;
  const GivenSteps& given_;
};

template <class T>
BackwardRun<T> run_backward(const Problem& p, const StepValues<T>& f, Mistake v, DType storage,
                            const GivenSteps& given) {
  Pass<T> pass(storage, given);
  const auto keep = [&pass](Step s, Tensor<T> t) -> const Tensor<T>& { return pass.keep(s, std::move(t)); };
  const auto allows = [&p](std::size_t b, std::size_t i, std::size_t j) { return p.mask.allows(b, i, j); };
  const Tensor<T>& A = f[slot(Step::weights)];                         // (B, h, n, m)
  const Tensor<T>& V = f[slot(Step::v_heads)];                         // (B, g, m, d_v)
  const Tensor<T>& Q = f[slot(p.rope ? Step::q_rot : Step::q_heads)];  // (B, h, n, d_k)
  const Tensor<T>& K = f[slot(p.rope ? Step::k_rot : Step::k_heads)];  // (B, g, m, d_k)

  // pass 5: dY, back through the output projection and the merge of the heads
  const Tensor<T>& dY = keep(Step::d_output, upstream_gradient<T>(p, storage));  // (B, n, d_out)
  const Tensor<T>& dO = keep(Step::d_concat, p.has_output_projection() ? d_project_input(dY, pass.input(p.W_o))
                                                                       : Tensor<T>(dY));  // (B, n, h·d_v)
  const Tensor<T>& dO_h = keep(Step::d_head_outputs, split_heads(dO, p.h));               // (B, h, n, d_v)

  // pass 6: back through O_h = A·V_h (A transposed in dV, or not, for the mistake); with dropout A is the
  // dropped weights, and the gradient goes back to the weights through the same keep mask
  const Tensor<T>& A_read = p.dropout ? f[slot(Step::dropped)] : A;
  const Tensor<T>* dA = &keep(p.dropout ? Step::d_dropped : Step::d_weights, d_weighted_sum_weights(dO_h, V));
  if (p.dropout) dA = &keep(Step::d_weights, apply_dropout(*dA, DropoutMask(*p.dropout)));  // (B, h, n, m)
  const Tensor<T>& dV_h =
      keep(Step::d_v_heads,
           key_head_gradient(v == Mistake::dv_untransposed ? swap_last_axes(A_read) : A_read, dO_h, p.g, v));

  // pass 7: the sinks' gradients (kept with the parameters', last), the softmax's backward, the mask's, the
  // cap's (with softcap), the scale's (left out, for the mistake)
  const Tensor<T> d_sink = p.sinks.empty() ? Tensor<T>() : d_sinks(A, *dA, f[slot(Step::sink_weights)]);
  const Tensor<T>& dS2 = keep(Step::d_masked, softmax_backward(A, *dA, dO_h, v));  // dS'' (B, h, n, m)
  const Tensor<T>* dS1 = &keep(p.softcap ? Step::d_capped : Step::d_scaled, d_apply_mask(dS2, allows));
  if (p.softcap)
    dS1 = &keep(Step::d_scaled, d_softcap(*dS1, f[slot(Step::capped)], static_cast<T>(*p.softcap)));  // dS'
  const Tensor<T>& dS =
      keep(Step::d_scores, v == Mistake::backward_no_scale ? Tensor<T>(*dS1) : scale(*dS1, static_cast<T>(p.scale)));

  // pass 8: back through S = Q·Kᵀ to the heads the scores read (dS transposed where it must not be, or
  // not where it must, for the mistakes)
  const Tensor<T>* dQ_h = &keep(p.rope ? Step::d_q_rot : Step::d_q_heads,
                                d_scores_queries(v == Mistake::dq_transposed ? swap_last_axes(dS) : dS, K));
  const Tensor<T>* dK_h = &keep(p.rope ? Step::d_k_rot : Step::d_k_heads,
                                key_head_gradient(v == Mistake::dk_untransposed ? swap_last_axes(dS) : dS, Q, p.g, v));

  // pass 9: the rotation's transpose turns the gradients back; the merge undoes the split
  if (p.rope) {
    const Rope& r = *p.rope;
    dQ_h = &keep(Step::d_q_heads, d_rotate(*dQ_h, pass.input(r.cos_q), pass.input(r.sin_q), r.style));
    dK_h = &keep(Step::d_k_heads, d_rotate(*dK_h, pass.input(r.cos_k), pass.input(r.sin_k), r.style));
  }
  const Tensor<T>& dQ = keep(Step::d_q, merge_heads(*dQ_h));  // (B, n, h·d_k)
  const Tensor<T>& dK = keep(Step::d_k, merge_heads(*dK_h));  // (B, m, g·d_k)
  const Tensor<T>& dVm = keep(Step::d_v, merge_heads(dV_h));  // (B, m, g·d_v)

  // pass 10: through the projections; X's gradient sums its paths as a query, a key and a value
  const Tensor<T> X = pass.input(p.X), C = pass.input(p.C);
  const Tensor<T> dX_q = d_project_input(dQ, pass.input(p.W_q));
  const Tensor<T> dC = add(d_project_input(dK, pass.input(p.W_k)), d_project_input(dVm, pass.input(p.W_v)));
  if (p.cross) {
    keep(Step::d_X, dX_q);
    keep(Step::d_context, dC);
  } else {
    keep(Step::d_X, add(dX_q, dC));
  }
  keep(Step::d_W_q, in_layout(p, d_project_weight(X, dQ)));
  keep(Step::d_W_k, in_layout(p, d_project_weight(C, dK)));
  keep(Step::d_W_v, in_layout(p, d_project_weight(C, dVm)));
  if (p.has_output_projection()) keep(Step::d_W_o, in_layout(p, d_project_weight(f[slot(Step::concat)], dY)));
  if (!p.b_q.empty()) keep(Step::d_b_q, d_project_bias(dQ));
  if (!p.b_k.empty()) keep(Step::d_b_k, d_project_bias(dK));
  if (!p.b_v.empty()) keep(Step::d_b_v, d_project_bias(dVm));
  if (!p.b_o.empty()) keep(Step::d_b_o, d_project_bias(dY));
  if (!p.sinks.empty()) keep(Step::d_sinks, Tensor<T>(d_sink));
  return std::move(pass.out);
}

}  // namespace

template <class T>
BackwardRun<T> backward(const Problem& p, const StepValues<T>& forward, Mistake mistake, DType storage,
                        const GivenSteps& given) {
  return run_backward<T>(p, forward, mistake, storage, given);
}

template BackwardRun<float> backward<float>(const Problem&, const StepValues<float>&, Mistake, DType,
                                            const GivenSteps&);
template BackwardRun<double> backward<double>(const Problem&, const StepValues<double>&, Mistake, DType,
                                              const GivenSteps&);

}  // namespace attn
