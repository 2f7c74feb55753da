#pragma once
// Naive vs flash vs a wider reference: the errors, the memory, and the verdict of docs/cli.md.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/bits.hpp"
#include "engine/common.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "engine/row_terms.hpp"
#include "ops/bounds.hpp"
#include "observe/records.hpp"

namespace attn {

// The problem with every value rounded as a run in T stores it (to the half type when `storage` is one)
// and back: the reference sees exactly what the engines see. The scale is a T number in every storage.
template <class T>
Problem rounded_inputs(const Problem& p, DType storage = DType::float32) {
  Problem q = p;
  const auto round = [storage](double& x) { x = static_cast<double>(stored_input<T>(storage, x)); };
  for (Tensor<double>* t : {&q.X, &q.C, &q.W_q, &q.W_k, &q.W_v, &q.W_o, &q.dY})
    for (double& x : t->values()) round(x);
  for (std::vector<double>* b : {&q.b_q, &q.b_k, &q.b_v, &q.b_o})
    for (double& x : *b) round(x);
  if (q.rope)
    for (Tensor<double>* t : {&q.rope->cos_q, &q.rope->sin_q, &q.rope->cos_k, &q.rope->sin_k})
      for (double& x : t->values()) round(x);
  round_as_held<T>(q, storage);  // the score chain's inputs, as ScoreChain<T> holds them
  return q;
}

// Position of x on the line of all values of T, so that neighbouring values are 1 apart.
template <class T>
std::int64_t ulp_index(T x) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  const Bits bits = attn::bit_cast<Bits>(x);
  // Negative values count down from -0 (which lands on 0, like +0).
  return bits < 0 ? -static_cast<std::int64_t>(bits & std::numeric_limits<Bits>::max())
                  : static_cast<std::int64_t>(bits);
}

// The same for the bits of a float16 or bfloat16 (sign and magnitude, like a float's).
inline std::int64_t half_ulp_index(std::uint16_t bits) {
  return (bits & 0x8000u) != 0 ? -static_cast<std::int64_t>(bits & 0x7FFFu) : static_cast<std::int64_t>(bits);
}

// Errors of `a` against `b` (same size), computed in B's precision; the ULPs measured in T after
// rounding both to T, or in the half type that `storage` names after rounding both to it. A NaN on
// either side, or infinities that differ, make every figure NaN (and the ULPs the most there are): an
// error that max() would otherwise skip over.
template <class T, class B>
ErrorStats error_stats(std::span<const double> a, std::span<const B> b, DType storage = DType::float32) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const auto index = [storage](auto x) {
    if (storage == DType::float16) return half_ulp_index(double_to_float16(static_cast<double>(x)));
    if (storage == DType::bfloat16) return half_ulp_index(double_to_bfloat16(static_cast<double>(x)));
    return ulp_index(static_cast<T>(x));
  };
  ErrorStats s;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const B x = static_cast<B>(a[k]);
    const B diff = x == b[k] ? B{0} : std::fabs(x - b[k]);  // equal infinities differ by nothing
    if (!std::isfinite(diff)) {
      s.max_abs = s.max_rel = nan;
      s.max_ulp = std::numeric_limits<std::uint64_t>::max();
      continue;
    }
    if (!std::isnan(s.max_abs)) s.max_abs = std::max(s.max_abs, static_cast<double>(diff));
    if (b[k] != 0 && !std::isnan(s.max_rel))
      s.max_rel = std::max(s.max_rel, static_cast<double>(diff / std::fabs(b[k])));
    // Unsigned arithmetic: the distance between two indices of T always fits in 64 bits.
    const std::int64_t ia = index(a[k]), ib = index(b[k]);
    const auto ua = static_cast<std::uint64_t>(ia);
    const auto ub = static_cast<std::uint64_t>(ib);
    const bool a_above = ia > ib;
    s.max_ulp = std::max(s.max_ulp, a_above ? ua - ub : ub - ua);
  }
  return s;
}

// ------------------------------------------------------------------ the noise floor of the verdict
//
// How far rounding in T can move a correct flash output from the exact one, output by output
// (docs/flash.md, "The noise floor of the verdict"). Every operation of T is exact times (1 + δ),
// |δ| <= u (2^-24 in float32, 2^-53 in float64), and a product, quotient or exp that lands among the
// subnormals is off by at most η more (the smallest subnormal); exp is within 1 ULP, 2u. A sum of n
// terms in any order is then off by at most n·u·Σ|terms|, so every step is off by u times the
// magnitudes it sums, plus what its inputs were off by:
//   1. Q, K, V = X·W + b    ΔY = (d_in + 1)·u·(|X|·|W| + |b|) + d_in·η
//   2. s_j = scale·q·k_j    Δs_j = |scale|·Σ_e ((d_k + 1)·u·|q_e|·|k_je| + Δq_e·|k_je| + |q_e|·Δk_je + Δq_e·Δk_je)
//                                  + (d_k·|scale| + 1)·η
//   3. one query row of one head: weights a_j (N of them nonzero, in T_r of flash's key tiles), o = Σ_j a_j·v_j.
//      A weight reaches O and l as exp(s_j - m) times the rescales exp(m_prev - m_new) of the later
//      tiles: the arguments telescope to M - s_j = log(a_max / a_j), each subtraction off by u times
//      its size, and at most T_r exps each off by 2u; so O and l share a factor e^±D_j on term j,
//      D_j = Δs_j + u·(log(a_max / a_j) + 2·T_r), and o moves by Σ_j a_j·(w_j - 1)·(v_j - o) / Σ_j a_j·w_j:
//      Δo_c = Σ_j a_j·ΔV_jc                                       the values' own error
//           + Σ_j a_j·(e^D_j - 1)·|v_jc - o_c| / Σ_j a_j·e^-D_j    the weights', for any size of D
//           + (N + T_r)·u·Σ_j a_j·|v_jc|                           O: p·v, the additions, the rescales
//           + (N + 2·T_r + 1)·u·|o_c|                              l: additions, rescales; then O / l
//           + (N + 1)·(T_r + 1)·η·(1 + max_j |v_jc| + |o_c|)        what underflow can lose
//   4. y = concat·W_o + b_o  Δy = Δconcat·|W_o| + (h·d_v + 1)·u·(|concat|·|W_o| + |b_o|) + h·d_v·η
//      (no W_o: Δy = Δconcat)
//   RoPE (between 1 and 2, on Q and K): y_a = x_a·c - x_b·s is two products and one sum, on the
//      T-rounded table that the reference uses as well, so
//      Δy_a = |c|·Δx_a + |s|·Δx_b + 2·u·(|x_a·c| + |x_b·s|) + 2·η, and the same for y_b;
//      step 2 then reads the turned |q|, |k| and these ΔQ, ΔK.
//   ALiBi (in step 2): s_j + b_j with b_j = -slope·(pos_i - pos_j), whose difference is exact: one
//      product and one sum more, Δs_j += u·|scale|·Σ_e |q_e|·|k_je| + 2·u·|b_j| + η
//      (the sum's u·|s_j + b_j| split between the two terms).
// noise = 2 · max Δy. The bound is first order: γ_n = n·u / (1 - n·u) <= 2·n·u while n·u <= 1/2, and
// the reference's own rounding (the same bound with 2^-53 or 2^-64) fits in the other half. The
// magnitudes are the reference's, on the same T-rounded inputs. Nothing here assumes that flash
// shares a step with naive, so the verdict stays sound when either engine changes its order of sums.
//
// A half storage type (float16, bfloat16) computes in float32 and rounds each stored step once more.
// The derivation holds with u and η of the half type (u = 2^-11 float16, 2^-8 bfloat16; η = 2^-24
// float16, 2^-133 bfloat16): each n above counts at least two operations, the last of which is stored,
// and n·2^-24 + u_half <= n·u_half (the float32 work plus one rounding to storage) as soon as n >= 2,
// since u_half >= 2^13·2^-24; likewise float32's η (2^-149) and half an η of the half type's
// subnormals fit in one η_half. Naive stores the scores twice (scores, scaled), three times with ALiBi
// (bias), and the turned q and k once more: for d_k >= 2 the first two roundings fit in (d_k + 1)·u, the
// third in ALiBi's u·|scale|·Σ|q|·|k| + u·|b_j|, the turned ones in RoPE's 2·u (n = 2 above), and for d_k = 1 the
// second fits in the 2·T_r·u that D_j keeps for the exps, which run in float32 (2·2^-24 each). The weights (naive) or P
// (flash) are stored once more: a_j·(1 + δ_j) moves o by at most u·Σ_j a_j·|v_jc|, within the (N + T_r)·u of step 3
// beside the float32 products and additions; the stored O / l within the (N + 2·T_r + 1)·u·|o_c| beside them.

struct Rounding {
  double u;    // unit roundoff: the largest relative error of one operation
  double eta;  // the smallest subnormal: the most that underflow adds to one operation
};

template <class T>
constexpr Rounding rounding_of() {
  return {std::numeric_limits<T>::epsilon() / 2, static_cast<double>(std::numeric_limits<T>::denorm_min())};
}

// The rounding of a run in T that stores in `storage`: the half type's for float16 and bfloat16 (above),
// else T's own.
template <class T>
constexpr Rounding rounding_of(DType storage) {
  if (is_half(storage)) return {unit_roundoff(storage), smallest_subnormal(storage)};
  return rounding_of<T>();
}

// ΔY = (d_in + 1)·u·(|X|·|W| + |b|) + d_in·η     X (B, n, d_in), W (d_in, d_out), b (d_out) or empty
// how far rounding can move Y = X·W + b, whatever the order of its sum      -> (B, n, d_out)
// (the projection's terms: its row's, engine/row_terms.hpp, over d_in + 1 of them)
inline Tensor<double> projection_error(const Tensor<double>& X, const Tensor<double>& W, std::span<const double> b,
                                       Rounding r) {
  Terms t = rows::projected_terms(X, W, b);
  for (double& x : t.of.values()) x = t.count * r.u * x + (t.count - 1) * r.eta;
  return std::move(t.of);
}

// Δs_j = |scale|·Σ_e ((d_k + 1)·u·|q_e|·|k_je| + Δq_e·|k_je| + |q_e|·Δk_je + Δq_e·Δk_je) + (d_k·|scale| + 1)·η
// q, dq (d_k): one query row (at `row`: b, hd, i) and its error; K, dK (m, d_k): the keys of its head, as
// magnitudes. Each stage of the score chain (model/score_chain.hpp) adds its own: the roundings it counts
// with the product's (ALiBi's product and sum: one more u·|scale|·Σ|q|·|k|), and what it adds besides (the
// cap's three roundings, u·|s| + 2·u·c + η, its slope at most 1 passing Δs on no larger; ALiBi's
// 2·u·|b_j| + η).
inline std::vector<double> score_error(const ScoreChain<double>& chain, const Where& row, std::span<const double> q,
                                       std::span<const double> dq, const double* K, const double* dK, std::size_t m,
                                       Rounding r) {
  const std::size_t d_k = q.size();
  const double a = std::fabs(chain.scale());
  double dots = static_cast<double>(d_k);
  for (const StageInfo& s : chain_stages())
    if (s.kind == StageKind::elementwise && chain.has(s.stage)) dots += s.dot_roundings;
  std::vector<double> ds(m);
  for (std::size_t j = 0; j < m; ++j) {
    const double* k = K + j * d_k;
    const double* dk = dK + j * d_k;
    double sum = 0, size = 0;
    for (std::size_t e = 0; e < d_k; ++e) {
      sum += dots * r.u * q[e] * k[e] + dq[e] * k[e] + q[e] * dk[e] + dq[e] * dk[e];
      size += q[e] * k[e];
    }
    ds[j] = a * sum + (static_cast<double>(d_k) * a + 1) * r.eta;
    const Where w{row.b, row.hd, row.i, j};
    for (const StageInfo& s : chain_stages())
      if (s.kind == StageKind::elementwise && chain.has(s.stage))
        ds[j] += chain.added_error(s.stage, w, a * size, r.u, r.eta);
  }
  return ds;
}

// ΔY_a = |c|·ΔX_a + |s|·ΔX_b + 2·u·(|X_a·c| + |X_b·s|) + 2·η for each turned pair (a, b), and likewise
// for b; features past the turned ones keep their ΔX. X (B, H, T, d) as magnitudes, dX its bound, cos
// and sin (T, dims/2) the table.                                                    -> (B, H, T, d)
inline Tensor<double> rotation_error(const Tensor<double>& X, const Tensor<double>& dX, const Tensor<double>& cos,
                                     const Tensor<double>& sin, RopeStyle style, Rounding r) {
  // |c|·ΔX_a + |s|·ΔX_b is the same sum over the errors; the rounding adds 2·u·(|X_a·c| + |X_b·s|) + 2·η.
  const Tensor<double> M = rotation_magnitude(X, cos, sin, style);
  Tensor<double> dY = rotation_magnitude(dX, cos, sin, style);
  each_turned_pair(X, cos.dim(1), style,
                   [&](std::size_t b, std::size_t hd, std::size_t t, std::size_t, std::size_t a, std::size_t c) {
                     dY(b, hd, t, a) = dY(b, hd, t, a) + 2 * r.u * M(b, hd, t, a) + 2 * r.eta;
                     dY(b, hd, t, c) = dY(b, hd, t, c) + 2 * r.u * M(b, hd, t, c) + 2 * r.eta;
                   });
  return dY;
}

// One query row of one head: its output o and the bound Δo (step 3 above), both (d_v).
struct RowError {
  std::vector<double> o, d_o;
};

// a (m): the weights; log_ratio (m): log(a_max / a_j) where a_j != 0; N: the nonzero weights; tiles: the
// key tiles holding them (T_r); ds (m): Δs; V, dV (m, d_v): the values of the head and their errors.
inline RowError attention_row_error(std::span<const double> a, std::span<const double> log_ratio, std::size_t N,
                                    std::size_t tiles, std::span<const double> ds, const double* V, const double* dV,
                                    std::size_t d_v, Rounding r) {
  const std::size_t m = a.size();
  const double n_o = static_cast<double>(N + tiles), n_l = static_cast<double>(N + 2 * tiles + 1);
  const double underflow = static_cast<double>(N + 1) * static_cast<double>(tiles + 1);
  RowError out{std::vector<double>(d_v, 0.0), std::vector<double>(d_v, 0.0)};
  if (N == 0) return out;  // nothing to attend: both engines give exactly 0
  // D_j = Δs_j + u·(log(a_max / a_j) + 2·T_r); the weights' spread is Σ_j a_j·e^-D_j
  std::vector<double> D(m, 0.0);
  double spread = 0;
  for (std::size_t j = 0; j < m; ++j) {
    if (a[j] == 0) continue;
    D[j] = ds[j] + r.u * (log_ratio[j] + 2 * static_cast<double>(tiles));
    spread += a[j] * std::exp(-D[j]);
  }
  for (std::size_t c = 0; c < d_v; ++c) {
    // o_c = Σ_j a_j·v_jc
    double o = 0, v_max = 0;
    for (std::size_t j = 0; j < m; ++j) {
      if (a[j] == 0) continue;
      o += a[j] * V[j * d_v + c];
      v_max = std::max(v_max, std::fabs(V[j * d_v + c]));
    }
    double values = 0, weights = 0, products = 0;
    for (std::size_t j = 0; j < m; ++j) {
      if (a[j] == 0) continue;
      const double v = V[j * d_v + c], gap = std::fabs(v - o);
      values += a[j] * dV[j * d_v + c];
      if (gap != 0) weights += a[j] * std::expm1(D[j]) * gap;  // gap 0: no error, whatever D (even inf)
      products += a[j] * std::fabs(v);
    }
    out.o[c] = o;
    out.d_o[c] = values + (weights == 0 ? 0 : weights / spread) + n_o * r.u * products + n_l * r.u * std::fabs(o) +
                 underflow * r.eta * (1 + v_max + std::fabs(o));
  }
  return out;
}

// Watches the reference run for the magnitudes the bound sums (Q, K and V per head, the weights) and
// works out o and Δo of every query row as the weights go by, so that no (B, h, n, m) buffer is kept.
template <class T>
class NoiseFloor final : public Observer {
 public:
  // p: the T-rounded inputs that the reference runs on; Bc: flash's key tile; storage: the engines'.
  NoiseFloor(const Problem& p, std::size_t Bc, DType storage = DType::float32)
      : p_(p), Bc_(Bc), r_(rounding_of<T>(storage)) {
    dQ_ = split_heads(projection_error(p.X, p.W_q, p.b_q, r_), p.h);  // (B, h, n, d_k)
    dK_ = split_heads(projection_error(p.C, p.W_k, p.b_k, r_), p.g);  // (B, g, m, d_k)
    dV_ = split_heads(projection_error(p.C, p.W_v, p.b_v, r_), p.g);  // (B, g, m, d_v)
    O_ = Tensor<double>({p.B, p.h, p.n, p.d_v});
    dO_ = Tensor<double>({p.B, p.h, p.n, p.d_v});
  }

  bool wants(Step step) const override {
    return step == Step::q_heads || step == Step::k_heads || step == Step::v_heads || step == Step::q_rot ||
           step == Step::k_rot || step == Step::weights;
  }
  void on(Step step, const Tensor<float>& value) override { take(step, value); }
  void on(Step step, const Tensor<double>& value) override { take(step, value); }
  void on(Step step, const Tensor<long double>& value) override { take(step, value); }

  // Δy (B, n, d_out), step 4: the bound of every output, once the reference has run.
  Tensor<double> output_error() const {
    const Tensor<double> concat = merge_heads(O_);  // (B, n, h·d_v)
    Tensor<double> d_concat = merge_heads(dO_);     // (B, n, h·d_v)
    if (!p_.has_output_projection()) return d_concat;
    const Tensor<double> W_o = magnitude(p_.W_o);
    Tensor<double> dY = project(d_concat, W_o, std::span<const double>());
    const Tensor<double> rounding = projection_error(concat, p_.W_o, p_.b_o, r_);
    for (std::size_t k = 0; k < dY.size(); ++k) dY.values()[k] += rounding.values()[k];
    return dY;
  }

 private:
  template <class U>
  void take(Step step, const Tensor<U>& value) {
    if (step == Step::q_heads) Q_ = magnitude(cast<double>(value));
    if (step == Step::k_heads) K_ = magnitude(cast<double>(value));
    // RoPE: the error of the turned heads from the unturned ones (above), then their magnitudes.
    if (step == Step::q_rot) {
      dQ_ = rotation_error(Q_, dQ_, p_.rope->cos_q, p_.rope->sin_q, p_.rope->style, r_);
      Q_ = magnitude(cast<double>(value));
    }
    if (step == Step::k_rot) {
      dK_ = rotation_error(K_, dK_, p_.rope->cos_k, p_.rope->sin_k, p_.rope->style, r_);
      K_ = magnitude(cast<double>(value));
    }
    if (step == Step::v_heads) V_ = cast<double>(value);
    if (step == Step::weights) rows(value);
  }

  // A (B, h, n, m): o and Δo of every row, from its weights.
  template <class U>
  void rows(const Tensor<U>& A) {
    const std::size_t m = p_.m, d_k = p_.d_k, d_v = p_.d_v;
    if (m == 0) return;                                  // no keys: every output is 0 (or b_o) in both engines
    const ScoreChain<double> chain(p_, DType::float64);  // on the T-rounded inputs
    std::vector<double> a(m), log_ratio(m);
    for (std::size_t b = 0; b < p_.B; ++b)
      for (std::size_t hd = 0; hd < p_.h; ++hd) {
        const std::size_t kv = kv_head_of(hd, p_.h, p_.g);
        for (std::size_t i = 0; i < p_.n; ++i) {
          const U* row = &A(b, hd, i, 0);
          const U a_max = *std::max_element(row, row + m);
          std::size_t N = 0, tiles = 0, last_tile = 0;
          for (std::size_t j = 0; j < m; ++j) {
            a[j] = static_cast<double>(row[j]);
            log_ratio[j] = row[j] == 0 ? 0.0 : static_cast<double>(std::log(a_max) - std::log(row[j]));
            if (row[j] == 0) continue;
            ++N;
            if (tiles == 0 || j / Bc_ != last_tile) ++tiles;
            last_tile = j / Bc_;
          }
          const std::vector<double> ds =
              score_error(chain, {b, hd, i, 0}, std::span<const double>(&Q_(b, hd, i, 0), d_k),
                          std::span<const double>(&dQ_(b, hd, i, 0), d_k), &K_(b, kv, 0, 0), &dK_(b, kv, 0, 0), m, r_);
          const RowError e =
              attention_row_error(a, log_ratio, N, tiles, ds, &V_(b, kv, 0, 0), &dV_(b, kv, 0, 0), d_v, r_);
          for (std::size_t c = 0; c < d_v; ++c) {
            O_(b, hd, i, c) = e.o[c];
            dO_(b, hd, i, c) = e.d_o[c];
          }
        }
      }
  }

  const Problem& p_;
  std::size_t Bc_;
  Rounding r_;
  Tensor<double> Q_, K_, V_;     // |Q| (B, h, n, d_k), |K| (B, g, m, d_k), V (B, g, m, d_v) of the reference
  Tensor<double> dQ_, dK_, dV_;  // their bounds ΔQ, ΔK, ΔV
  Tensor<double> O_, dO_;        // o and Δo (B, h, n, d_v)
};

// The arithmetic of the reference: wider than the engines', or the reference would be naive itself.
// For float64 that is x86's 80-bit long double (64-bit significand).
template <class T>
using Reference = std::conditional_t<std::is_same_v<T, float>, double, long double>;

// Judges a flash result (made with `tiles`) against naive's and naive's in a wider type on the
// T-rounded inputs, by the rule that FlashAttention's own tests use:
// max|flash - ref| <= 2 · max|naive - ref| + noise.
// `storage`: what both engines stored in (engine/common.hpp); for a half type the inputs are rounded to
// it, the ULPs are the half type's, and the noise floor uses its rounding. The reference stores nothing
// rounded: it is the float64 computation on those inputs.
template <class T>
CompareRecord judge_flash(const Problem& p, TileSize tiles, const AttentionResult<T>& naive,
                          const AttentionResult<T>& flash, DType storage = DType::float32) {
  using R = Reference<T>;
  const Problem rounded = rounded_inputs<T>(p, storage);
  NoiseFloor<T> noise_floor(rounded, tiles.Bc, storage);
  const AttentionResult<R> ref = run_naive<R>(rounded, noise_floor);

  CompareRecord c;
  c.dtype = is_half(storage) ? storage : sizeof(T) == 4 ? DType::float32 : DType::float64;
  c.tile_size = tiles;
  c.naive = cast<double>(naive.output);
  c.flash = cast<double>(flash.output);
  c.reference = cast<double>(ref.output);
  c.naive_vs_ref = error_stats<T, R>(c.naive.values(), ref.output.values(), storage);
  c.flash_vs_ref = error_stats<T, R>(c.flash.values(), ref.output.values(), storage);
  c.flash_vs_naive = error_stats<T, double>(c.flash.values(), c.naive.values(), storage);
  c.naive_peak_bytes = naive.peak_score_bytes;
  c.flash_peak_bytes = flash.peak_score_bytes;
  // The noise floor: twice the largest bound Δy on how far rounding in T (or storage) can move a correct output
  // (the derivation above).
  const Tensor<double> dy = noise_floor.output_error();  // (B, n, d_out)
  double largest = 0;
  for (const double d : dy.values())  // NaN: a bound overflowed (inf · 0), so there is none
    largest = std::max(largest, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
  c.noise = 2 * largest;
  c.bound = 2 * c.naive_vs_ref.max_abs + c.noise;
  c.pass = c.flash_vs_ref.max_abs <= c.bound;  // false when either is NaN
  return c;
}

// Runs naive and flash in T, storing in `storage`, and judges flash (judge_flash).
template <class T>
CompareRecord compare_engines(const Problem& p, TileSize tiles, Observer& naive_observer, Observer& flash_observer,
                              DType storage = DType::float32) {
  const AttentionResult<T> naive = run_naive<T>(p, naive_observer, storage);
  const AttentionResult<T> flash = run_flash<T>(p, flash_observer, tiles, storage);
  return judge_flash<T>(p, tiles, naive, flash, storage);
}

// Compiled once, in engine/instances.cpp, rather than in every file that compares the engines.
extern template CompareRecord judge_flash<float>(const Problem&, TileSize, const AttentionResult<float>&,
                                                 const AttentionResult<float>&, DType);
extern template CompareRecord judge_flash<double>(const Problem&, TileSize, const AttentionResult<double>&,
                                                  const AttentionResult<double>&, DType);
extern template CompareRecord compare_engines<float>(const Problem&, TileSize, Observer&, Observer&, DType);
extern template CompareRecord compare_engines<double>(const Problem&, TileSize, Observer&, Observer&, DType);

}  // namespace attn
