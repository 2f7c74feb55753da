#include "lessons/catalogue.hpp"

#include <algorithm>
#include <stdexcept>

namespace attn {

namespace {

using enum Mistake;
using Code = DiagnosisCode;

// The forward pass's mistakes: those run --mistake offers, then those diff alone tries.
std::vector<MistakeInfo> forward_rows() {
  return {
      {no_scale, "no-scale", "forget to divide the scores by √d_k: sharper, more saturated weights", "S' = S / √d_k",
       "S' = S",
       "Unscaled scores grow with d_k (their variance is about d_k), so the softmax saturates: one key takes almost "
       "all the weight and the gradient through the others vanishes.",
       true, Code::scale, "the scale left out"},
      {no_mask, "no-mask", "leave the mask out: queries see the keys they must not (leakage)",
       "S'' = S' where allowed, −∞ elsewhere", "S'' = S'",
       "A decoder that sees later tokens in training learns to copy them; at inference they are not there.", true,
       Code::mask, "the mask left out"},
      {mask_after_softmax, "mask-after-softmax", "mask the weights after the softmax: rows no longer sum to 1",
       "A = softmax(S'') with S'' = −∞ where forbidden", "A = softmax(S'), then 0 where forbidden",
       "The forbidden keys still took their share of each row's sum, so what is left sums to less than 1: every "
       "output is shrunk by a different amount."},
      {softmax_columns, "softmax-columns",
       "take the softmax over the queries (columns) instead of the keys: columns sum to 1, rows do not",
       "A = softmax(S'') along each row (over the keys)", "A = softmax(S'') down each column (over the queries)",
       "Each key then shares one unit of weight among the queries, instead of each query sharing one unit among "
       "the keys: a query's output is no longer an average of the values.",
       true, Code::softmax_axis, "the softmax taken over the queries"},
      {shared_qkv, "shared-qkv", "use one projection for queries, keys and values: Q = K = V, symmetric scores",
       "Q = X·W_q, K = X·W_k, V = X·W_v", "Q = K = V = X·W_q",
       "With K = Q the scores are symmetric (S = Q·Qᵀ) and each token tends to attend most to itself: the "
       "separate roles of asking, offering and carrying information are lost."},
      {wrong_reshape, "wrong-reshape",
       "split the heads by a reshape without the transpose: features mixed across heads and tokens",
       "reshape (n, h·d) -> (n, h, d), then transpose -> (h, n, d)", "reshape (n, h·d) -> (h, n, d) directly",
       "Without the transpose a head's row is a slice of consecutive features that belongs to some other token "
       "and head: every head sees scrambled tokens.",
       true, Code::head_split, "the heads split by a reshape without the transpose"},
      {minus_1e9, "minus-1e9", "use −1e9 for a forbidden score instead of −∞: emptied rows get uniform weights",
       "S'' = S' where allowed, −∞ elsewhere", "S'' = S' where allowed, −1e9 elsewhere",
       "exp(−1e9 − max) is 0 as long as one key is allowed; in a row where the mask allows nothing, every score is "
       "−1e9, the row max is −1e9 and the softmax hands out 1/m to each forbidden key instead of nothing.",
       true, Code::large_negative, "a large negative number used for -∞"},
      {dropout_unscaled, "dropout-unscaled",
       "drop weights without scaling the kept ones by 1/(1 − p): training's outputs shrink by 1 − p",
       "A_drop = A ⊙ Z / (1 − p)", "A_drop = A ⊙ Z",
       "Each output is then on average 1 − p times what the same layer gives at inference, where nothing is "
       "dropped: the layers after it learn on smaller numbers than they will be given."},
      // The mistakes diff alone tries: each needs a dump to show, or a particular shape to be made at all.
      {scale_twice, "scale-twice", "", "S' = S / √d_k", "S' = S / d_k", "", false, Code::scale,
       "the scale applied twice"},
      {k_untransposed, "k-untransposed", "", "S = Q·Kᵀ", "S = Q·K", "", false, Code::transpose,
       "K not transposed: S = Q·K"},
      {w_q_transposed, "w-q-transposed", "", "Q = X·W_q", "Q = X·W_qᵀ", "", false, Code::transpose, "W_q transposed"},
      {w_k_transposed, "w-k-transposed", "", "K = C·W_k", "K = C·W_kᵀ", "", false, Code::transpose, "W_k transposed"},
      {w_v_transposed, "w-v-transposed", "", "V = C·W_v", "V = C·W_vᵀ", "", false, Code::transpose, "W_v transposed"},
      {w_o_transposed, "w-o-transposed", "", "Y = O·W_o", "Y = O·W_oᵀ", "", false, Code::transpose, "W_o transposed"},
      {mask_sees_next, "mask-sees-next", "", "S'' = S' where allowed", "S'' = S' where key j - 1 is allowed", "", false,
       Code::mask, "the mask shifted by one: each query also sees the next key"},
      {mask_misses_diagonal, "mask-misses-diagonal", "", "S'' = S' where allowed",
       "S'' = S' where key j + 1 is allowed", "", false, Code::mask,
       "the mask shifted by one: each query sees one key fewer"},
      {align_flipped, "align-flipped", "", "the mask aligned as the input says", "aligned at the other corner", "",
       false, Code::alignment, "the mask aligned at the other corner"},
  };
}

// The backward pass's: lessons/mistaken_backward.cpp makes them; diff tries them at a dumped gradient.
std::vector<MistakeInfo> backward_rows() {
  return {
      {gqa_first_head, "gqa-first-head", "", "dK_h = Σ over the group's query heads of dSᵀ·Q",
       "dK_h = dSᵀ·Q of the group's first query head (dV_h likewise)",
       "A key/value head is read by every query head of its group, so its gradient is the sum of their parts; "
       "taking one head's part loses the others'.",
       false, Code::gqa_sum, "the GQA sum left out: only the first query head of each group", true},
      {gqa_last_head, "gqa-last-head", "", "dK_h = Σ over the group's query heads of dSᵀ·Q",
       "dK_h = dSᵀ·Q of each query head in turn, assigned (dV_h likewise): the last one is kept",
       "Writing each query head's part with = instead of += keeps only the group's last head.", false, Code::gqa_sum,
       "the GQA sum left out: each query head's part assigned, the last one kept", true},
      {backward_no_scale, "backward-no-scale", "", "dS = dS' · scale", "dS = dS'",
       "The forward multiplied the scores by the scale, so their gradient must be multiplied by it too: without it "
       "dQ and dK are 1/scale times too large.",
       false, Code::scale, "the scale left out of the backward: dS = dS'", true},
      {softmax_d_from_da, "softmax-d-from-da", "", "D = rowsum(dA ⊙ A)", "D = rowsum(dA)",
       "D is the weighted mean of dA along a row; without the weights it is the plain sum, and the rows of dS'' no "
       "longer sum to 0.",
       false, Code::softmax_backward, "the softmax's backward with D = rowsum(dA), not rowsum(dA ⊙ A)", true},
      {softmax_d_from_do, "softmax-d-from-do", "", "D = rowsum(dO ⊙ O)", "D = rowsum(dO)",
       "FlashAttention computes D = rowsum(dO ⊙ O), equal to rowsum(dA ⊙ A); summing dO alone is another number.",
       false, Code::softmax_backward, "the softmax's backward with D = rowsum(dO), not rowsum(dO ⊙ O)", true},
      {softmax_backward_columns, "softmax-backward-columns", "", "D = rowsum(dA ⊙ A), along each row",
       "D summed down each column (over the queries)",
       "The softmax normalised each row, so its backward subtracts each row's D; a column's sum belongs to a "
       "softmax over the queries.",
       false, Code::softmax_axis, "the softmax's backward taken down each column", true},
      {dv_untransposed, "dv-untransposed", "", "dV_h = Aᵀ·dO_h", "dV_h = A·dO_h", "", false, Code::transpose,
       "A not transposed in dV = Aᵀ·dO", true},
      {dk_untransposed, "dk-untransposed", "", "dK_h = dSᵀ·Q_h", "dK_h = dS·Q_h", "", false, Code::transpose,
       "dS not transposed in dK = dSᵀ·Q", true},
      {dq_transposed, "dq-transposed", "", "dQ_h = dS·K_h", "dQ_h = dSᵀ·K_h", "", false, Code::transpose,
       "dS transposed in dQ = dS·K", true},
  };
}

const std::vector<MistakeInfo>& table() {
  static const std::vector<MistakeInfo> rows = [] {
    std::vector<MistakeInfo> all = forward_rows();
    const std::vector<MistakeInfo> backward = backward_rows();
    all.insert(all.end(), backward.begin(), backward.end());
    return all;
  }();
  return rows;
}

bool square(const Tensor<double>& W) { return W.rank() == 2 && W.dim(0) == W.dim(1) && !W.empty(); }

// Whether some query row of `p` has no key the mask allows.
bool has_empty_row(const Problem& p) {
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      bool any = false;
      for (std::size_t j = 0; j < p.m && !any; ++j) any = p.mask.allows(b, i, j);
      if (!any && p.m > 0) return true;
    }
  return false;
}

}  // namespace

std::string_view to_string(DiagnosisCode code) {
  switch (code) {
    case Code::scale: return "scale";
    case Code::transpose: return "transpose";
    case Code::softmax_axis: return "softmax-axis";
    case Code::mask: return "mask";
    case Code::alignment: return "alignment";
    case Code::head_split: return "head-split";
    case Code::large_negative: return "large-negative";
    case Code::gqa_sum: return "gqa-sum";
    case Code::softmax_backward: return "softmax-backward";
    case Code::precision: return "precision";
  }
  return "?";
}

const std::vector<MistakeInfo>& all_mistakes() {
  static const std::vector<MistakeInfo> offered = [] {
    std::vector<MistakeInfo> rows;
    std::copy_if(table().begin(), table().end(), std::back_inserter(rows),
                 [](const MistakeInfo& m) { return m.offered; });
    return rows;
  }();
  return offered;
}

const MistakeInfo& mistake_info(Mistake mistake) {
  for (const MistakeInfo& info : table())
    if (info.mistake == mistake) return info;
  throw std::logic_error("mistake_info: unknown mistake");
}

std::optional<Mistake> mistake_from_name(std::string_view name) {
  for (const MistakeInfo& info : all_mistakes())
    if (info.name == name) return info.mistake;
  return std::nullopt;
}

bool changes_something(Mistake mistake, const Problem& p) {
  const bool masked = p.mask.kind != MaskKind::none;
  switch (mistake) {
    case none: return false;
    case no_scale:
    case scale_twice: return p.scale != 1;
    case no_mask:
    case mask_after_softmax:
    case mask_sees_next:
    case mask_misses_diagonal: return masked;
    case softmax_columns:
    case shared_qkv: return true;
    case wrong_reshape: return p.h > 1 || p.g > 1;
    case minus_1e9: return has_empty_row(p);
    case dropout_unscaled: return p.dropout.has_value();
    case k_untransposed: return p.m == p.d_k;
    case w_q_transposed: return square(p.W_q);
    case w_k_transposed: return square(p.W_k);
    case w_v_transposed: return square(p.W_v);
    case w_o_transposed: return square(p.W_o);
    case align_flipped:
      return (p.mask.kind == MaskKind::causal || p.mask.kind == MaskKind::sliding_window) && p.n != p.m;
    case gqa_first_head:
    case gqa_last_head: return p.h > p.g;  // a group of more than one query head: something to sum
    case backward_no_scale: return p.scale != 1;
    case softmax_d_from_da:
    case softmax_d_from_do:
    case softmax_backward_columns: return true;
    case dv_untransposed:
    case dk_untransposed:
    case dq_transposed: return p.n == p.m;  // dS and A are square: the transpose is a shape that fits
  }
  return false;
}

std::vector<Mistake> diagnosable(const Problem& p, bool backward) {
  std::vector<const MistakeInfo*> rows;
  for (const MistakeInfo& info : table())
    if (info.code && info.backward == backward && changes_something(info.mistake, p)) rows.push_back(&info);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const MistakeInfo* a, const MistakeInfo* b) { return *a->code < *b->code; });
  std::vector<Mistake> out;
  out.reserve(rows.size());
  for (const MistakeInfo* info : rows) out.push_back(info->mistake);
  return out;
}

std::string diagnosis_of(Mistake mistake, const Problem& p) {
  if (mistake == align_flipped)
    return p.mask.align == Align::bottom_right ? "the mask aligned top-left instead of bottom-right"
                                               : "the mask aligned bottom-right instead of top-left";
  return std::string(mistake_info(mistake).diagnosis);
}

Problem mistaken_problem(const Problem& p, Mistake mistake) {
  Problem q = p;
  if (mistake == no_scale) {
    q.scale = 1;
    q.scale_given = true;
  } else if (mistake == no_mask) {
    q.mask = Mask{.n = p.n, .m = p.m};
  } else if (mistake == shared_qkv) {
    q.W_k = q.W_v = p.W_q;
    q.b_k = q.b_v = p.b_q;
    q.g = p.h;
    q.d_v = p.d_k;
    if (!p.has_output_projection()) q.d_out = p.h * p.d_k;
  }
  return q;
}

}  // namespace attn
