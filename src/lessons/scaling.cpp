#include "lessons/scaling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "ops/attention.hpp"
#include "ops/attention_backward.hpp"

namespace attn {

double mean(std::span<const double> x) {
  detail::require(!x.empty(), "mean", "needs at least one value");
  double sum = 0;
  for (const double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

double variance(std::span<const double> x) {
  const double m = mean(x);
  double sum = 0;
  for (const double v : x) sum += (v - m) * (v - m);
  return sum / static_cast<double>(x.size());
}

std::vector<double> softmax(std::span<const double> x) {
  detail::require(!x.empty(), "softmax", "needs at least one value");
  const double max = *std::max_element(x.begin(), x.end());
  std::vector<double> s(x.size());
  double l = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    s[i] = std::exp(x[i] - max);
    l += s[i];
  }
  for (double& v : s) v /= l;
  return s;
}

double mean_softmax_gradient(std::span<const double> x) {
  detail::require(!x.empty(), "mean_softmax_gradient", "needs at least one value");
  const auto top = static_cast<std::size_t>(std::max_element(x.begin(), x.end()) - x.begin());
  // pass 1: the unnormalised weights e_j = exp(x_j − max), and the others' sum, Σ_{j≠top} e_j
  std::vector<double> e(x.size());
  double others = 0;
  for (std::size_t j = 0; j < x.size(); ++j) {
    e[j] = std::exp(x[j] - x[top]);
    if (j != top) others += e[j];
  }
  const double l = e[top] + others;
  // pass 2: Σ_j s_j·(1 − s_j), with 1 − s_top = others / l (no cancellation); every other s_j <= 1/2
  double sum = 0;
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double s = e[j] / l;
    sum += s * (j == top ? others / l : 1.0 - s);
  }
  return sum / static_cast<double>(x.size());
}

double softmax_gradient_norm(std::span<const double> x, std::span<const double> v, double factor) {
  detail::require(x.size() == v.size() && !x.empty(), "softmax_gradient_norm",
                  fmt::format("{} scores and {} values", x.size(), v.size()));
  std::vector<double> scaled(x.begin(), x.end());
  for (double& s : scaled) s *= factor;
  const Tensor<double> A({scaled.size()}, softmax(scaled));
  const Tensor<double> dA({v.size()}, std::vector<double>(v.begin(), v.end()));
  const Tensor<double> dS = d_softmax_rows(A, dA);  // ∂L/∂(x·factor): what the softmax passes back
  double sum = 0;
  for (const double g : dS.values()) sum += g * g;
  return std::sqrt(sum);
}

std::vector<double> row_dots(std::span<const double> q, std::span<const double> k, std::size_t d_k) {
  detail::require(d_k > 0 && q.size() == k.size() && q.size() % d_k == 0, "row_dots",
                  fmt::format("q has {} values, k {}, d_k is {}: expected two (N, d_k)", q.size(), k.size(), d_k));
  const std::size_t n = q.size() / d_k;
  std::vector<double> scores(n);  // (N)
  for (std::size_t i = 0; i < n; ++i) {
    double acc = 0;
    for (std::size_t c = 0; c < d_k; ++c) acc += q[i * d_k + c] * k[i * d_k + c];
    scores[i] = acc;
  }
  return scores;
}

std::size_t scaling_memory(std::size_t samples, std::span<const std::size_t> d_ks) {
  constexpr std::size_t overflow = std::numeric_limits<std::size_t>::max();
  const std::size_t largest = d_ks.empty() ? 0 : *std::max_element(d_ks.begin(), d_ks.end());
  // 2·N·d_k + 5·N doubles, each product checked before it is taken.
  const std::size_t values_per_sample = 2 * largest + 5;
  if (largest > overflow / 4 || samples > overflow / sizeof(double) / values_per_sample) return overflow;
  return samples * values_per_sample * sizeof(double);
}

ScalingResult scaling_experiment(std::span<const std::size_t> d_ks, std::size_t samples, std::uint64_t seed) {
  detail::require(samples >= 2, "scaling_experiment", fmt::format("needs at least 2 samples, has {}", samples));
  ScalingResult result{samples, seed, {}};
  NormalSampler normal(seed);
  NormalSampler values(seed + 1);      // wraps to 0 for the largest seed
  std::vector<double> reads(samples);  // (N) v: what L reads each weight with
  for (double& x : reads) x = values.next();
  for (const std::size_t d_k : d_ks) {
    detail::require(d_k >= 1, "scaling_experiment", "d_k must be at least 1");
    // pass 1: q, k (N, d_k) with standard normal entries, q first, row by row
    std::vector<double> q(samples * d_k), k(samples * d_k);
    for (double& v : q) v = normal.next();
    for (double& v : k) v = normal.next();
    // pass 2: the raw scores q·k and the scaled ones q·k / √d_k, (N) each
    const std::vector<double> raw = row_dots(q, k, d_k);
    std::vector<double> scaled(raw);
    const double root = std::sqrt(static_cast<double>(d_k));
    for (double& v : scaled) v /= root;
    // pass 3: the figures, each softmax over the N samples as the explainer's torch.softmax(…, dim=0)
    const std::vector<double> raw_s = softmax(raw), scaled_s = softmax(scaled);
    result.rows.push_back({d_k, variance(raw), variance(scaled), mean_softmax_gradient(raw),
                           mean_softmax_gradient(scaled), *std::max_element(raw_s.begin(), raw_s.end()),
                           *std::max_element(scaled_s.begin(), scaled_s.end()), softmax_gradient_norm(raw, reads, 1.0),
                           softmax_gradient_norm(raw, reads, 1.0 / root)});
  }
  return result;
}

}  // namespace attn
