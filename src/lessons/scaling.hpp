#pragma once
// Why attention divides q·k by √d_k, measured: the explainer's experiment (docs/cli.md, "scaling")
// with its random numbers written down here, so that every standard library, and the Python check
// (tests/scaling/check_scaling.py), draws the same ones. std::normal_distribution is not specified
// exactly and differs between libstdc++, libc++ and MSVC.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ops/random.hpp"

namespace attn {

// mean(x) = Σ x_i / N
double mean(std::span<const double> x);

// var(x) = Σ (x_i − mean)² / N: the population variance, the mean subtracted first (two passes), so
// large scores do not cancel each other's digits.
double variance(std::span<const double> x);

// s = softmax(x): s_i = exp(x_i − max x) / Σ_j exp(x_j − max x); subtracting the max is so exp never overflows.
std::vector<double> softmax(std::span<const double> x);  // (N) -> (N)

// ‖∂L/∂z‖₂ for L = Σ_j softmax(z)_j · v_j, z = x·factor: the softmax's backward s ⊙ (v − s·v). x, v (N).
double softmax_gradient_norm(std::span<const double> x, std::span<const double> v, double factor);

// mean(s ⊙ (1 − s)) for s = softmax(x): the explainer's "gradient", the diagonal of the softmax's Jacobian.
// 1 − s of the largest weight is taken as the others' share, Σ_{j≠max} exp(x_j − max) / Σ_j, because
// 1 − s cancels to rounding noise when s is within a hair of 1, exactly when the scores saturate.
double mean_softmax_gradient(std::span<const double> x);

// scores[i] = q[i]·k[i] = Σ_c q[i][c]·k[i][c]: one score per sample, summed in order of c.
std::vector<double> row_dots(std::span<const double> q, std::span<const double> k,
                             std::size_t d_k);  // q, k (N, d_k) -> (N)

// What one d_k shows.
struct ScalingRow {
  std::size_t d_k = 0;
  double raw_var = 0;           // var(q·k)          ≈ d_k
  double scaled_var = 0;        // var(q·k / √d_k)   ≈ 1
  double raw_mean_grad = 0;     // mean s(1−s) over the softmax of the raw scores
  double scaled_mean_grad = 0;  // ... of the scaled scores, ≈ 1/N
  double raw_max_weight = 0;    // the largest weight: near 1 when one sample takes everything
  double scaled_max_weight = 0;
  // The backward pass's real gradient: ‖∂L/∂z‖₂ of the logits z the softmax sees (z = q·k raw, q·k/√d_k
  // scaled) for L = Σ_j a_j·v_j, v a fixed standard normal vector (one value per sample), by the
  // softmax's backward of ops/attention_backward.hpp: how much gradient the softmax passes back at all.
  double raw_grad_norm = 0;
  double scaled_grad_norm = 0;
};

struct ScalingResult {
  std::size_t samples = 0;  // N
  std::uint64_t seed = 0;
  std::vector<ScalingRow> rows;  // one per d_k, in the order asked
};

// The bytes the experiment holds at its largest d_k: q and k (N, d_k) and five (N) vectors (the raw and
// scaled scores, their two softmaxes, the gradient's working copy); SIZE_MAX when that overflows.
std::size_t scaling_memory(std::size_t samples, std::span<const std::size_t> d_ks);

// The experiment: one NormalSampler seeded with `seed`, drawing, for each d_k in turn, q (N, d_k) then
// k (N, d_k) row by row; the draws continue from one d_k to the next, as the explainer's loop does. The
// loss's v (N) comes from a second NormalSampler seeded with seed + 1, the same for every d_k.
// Needs samples >= 2 and every d_k >= 1.
ScalingResult scaling_experiment(std::span<const std::size_t> d_ks, std::size_t samples, std::uint64_t seed);

}  // namespace attn
