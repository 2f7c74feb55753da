#pragma once
// The one catalogue of attention done wrong on purpose. `run --mistake` shows the mistakes it offers
// (all_mistakes); `diff` tries every mistake that has a diagnosis code on a user's dump and names those
// that reproduce it (diagnosable). Both compute the mistaken steps with the one mistaken forward pass of
// lessons/mistaken_forward.hpp. A new mistake is one row here (catalogue.cpp) and its change in forward.cpp.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/problem.hpp"

namespace attn {

enum class Mistake {
  none,                // the intended computation
  no_scale,            // S' = S: the 1/√d_k left out
  no_mask,             // the mask left out: queries see the keys they must not
  mask_after_softmax,  // softmax first, then the forbidden weights set to 0
  softmax_columns,     // the softmax taken over the queries (down each column) instead of the keys
  shared_qkv,          // one projection for all three: Q = K = V = X·W_q
  wrong_reshape,       // heads split (and merged) by a reshape without the transpose
  minus_1e9,           // -1e9 (or the half type's lowest) for a forbidden score instead of -infinity
  dropout_unscaled,    // dropout without the 1/(1 - p) rescale of the kept weights
  scale_twice,         // S' = S · scale²
  k_untransposed,      // S = Q·K, with K (m, d_k) read as (d_k, m)
  w_q_transposed,      // a square weight used transposed
  w_k_transposed,
  w_v_transposed,
  w_o_transposed,
  mask_sees_next,        // the mask shifted by one: each query also sees the next key
  mask_misses_diagonal,  // the mask shifted by one: each query sees one key fewer
  align_flipped,         // a causal or sliding-window mask aligned at the other corner
  // the backward pass's (lessons/mistaken_backward.hpp): diff alone tries them, on dumps of gradients
  gqa_first_head,            // dK_h, dV_h from the first query head of each group only, not the group's sum
  gqa_last_head,             // dK_h, dV_h assigned per query head, not added: the group's last head is kept
  backward_no_scale,         // dS = dS': the scale left out of the backward, so dQ and dK are 1/scale times too large
  softmax_d_from_da,         // D = rowsum(dA) instead of rowsum(dA ⊙ A)
  softmax_d_from_do,         // D = rowsum(dO) instead of rowsum(dO ⊙ O): FlashAttention's D misread
  softmax_backward_columns,  // the softmax's backward along each column: D summed over the queries
  dv_untransposed,           // dV = A·dO instead of Aᵀ·dO (n = m)
  dk_untransposed,           // dK = dS·Q instead of dSᵀ·Q (n = m)
  dq_transposed,             // dQ = dSᵀ·K instead of dS·K (n = m)
};

// The family a mistake belongs to, as diff names it ("scale", "transpose", …), in the order diff lists
// its diagnoses; precision is diff's own (computed in a less precise dtype), not a mistake of the table.
// gqa_sum and softmax_backward are the backward pass's own.
enum class DiagnosisCode {
  scale,
  transpose,
  softmax_axis,
  mask,
  alignment,
  head_split,
  large_negative,
  gqa_sum,
  softmax_backward,
  precision
};
std::string_view to_string(DiagnosisCode code);

struct MistakeInfo {
  Mistake mistake;
  std::string_view name;                // "no-scale", as --mistake takes it
  std::string_view summary;             // one line for --mistake list
  std::string_view intended;            // the right formula of the step the mistake changes
  std::string_view mistaken;            // and the mistaken one
  std::string_view why;                 // what goes wrong, in a sentence or two
  bool offered = true;                  // run --mistake shows it; otherwise diff alone tries it
  std::optional<DiagnosisCode> code{};  // diff tries it on a dump, under this code
  std::string_view diagnosis{};         // how diff names it: "the scale left out"
  bool backward = false;                // made in the backward pass: diff tries it on dumped gradients only
};

// The mistakes `run --mistake` offers, in the order --mistake list prints them.
const std::vector<MistakeInfo>& all_mistakes();
const MistakeInfo& mistake_info(Mistake mistake);
// An offered mistake by its name ("no-scale").
std::optional<Mistake> mistake_from_name(std::string_view name);

// Whether `mistake` can be made on `p` and changes something there (the scale is not 1, the mask
// forbids something, a weight is square, …).
bool changes_something(Mistake mistake, const Problem& p);

// The mistakes diff tries on a dump of `p`: every one with a diagnosis code that changes something
// here, in the order of their codes; those of the forward pass, or with `backward` those of the
// backward pass (tried at a gradient step).
std::vector<Mistake> diagnosable(const Problem& p, bool backward = false);
// How diff names `mistake` for `p`: "the scale left out", "the mask aligned top-left instead of
// bottom-right".
std::string diagnosis_of(Mistake mistake, const Problem& p);

// Whether `mistake` is a different problem rather than a different computation (no scale, no mask, one
// shared projection), and that problem: what the mistaken run's trace describes.
Problem mistaken_problem(const Problem& p, Mistake mistake);

}  // namespace attn
