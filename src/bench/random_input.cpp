#include "bench/random_input.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/estimate.hpp"
#include "ops/random.hpp"

namespace attn {

namespace {

// A uniform number in [-1, 1] from the top 53 bits of one draw.
double uniform_pm1(SplitMix64& rng) { return static_cast<double>(rng.next() >> 11) * 0x1p-52 - 1.0; }

Tensor<double> random_matrix(Shape shape, double scale, SplitMix64& rng) {
  Tensor<double> t(std::move(shape));
  for (double& x : t.values()) x = uniform_pm1(rng) * scale;
  return t;
}

}  // namespace

Problem bench_sizes(const BenchShape& s) {
  if (s.n == 0 || s.m == 0 || s.heads == 0 || s.kv_heads == 0 || s.d_model % s.heads != 0 || s.heads % s.kv_heads != 0)
    throw std::invalid_argument(fmt::format("bench_problem: n {}, m {}, d_model {}, {} heads, {} kv heads do not fit",
                                            s.n, s.m, s.d_model, s.heads, s.kv_heads));
  Problem p;
  p.description = fmt::format("attn-trace bench: random input, seed {}", s.seed);
  p.cross = s.m != s.n;
  p.n = s.n;
  p.m = s.m;
  p.d_model = p.d_context = s.d_model;
  p.h = s.heads;
  p.g = s.kv_heads;
  p.d_k = p.d_v = s.d_model / s.heads;
  p.d_out = s.d_model;
  p.scale = 1.0 / std::sqrt(static_cast<double>(p.d_k));
  p.mask.kind = s.mask;
  p.mask.n = s.n;
  p.mask.m = s.m;
  return p;
}

Problem bench_problem(const BenchShape& shape) {
  Problem p = bench_sizes(shape);
  SplitMix64 rng(shape.seed);
  const double shrink = 1.0 / std::sqrt(static_cast<double>(shape.d_model));
  p.X = random_matrix({1, p.n, p.d_model}, 1.0, rng);
  p.C = p.cross ? random_matrix({1, p.m, p.d_model}, 1.0, rng) : p.X;
  p.W_q = random_matrix({p.d_model, p.h * p.d_k}, shrink, rng);
  p.W_k = random_matrix({p.d_model, p.g * p.d_k}, shrink, rng);
  p.W_v = random_matrix({p.d_model, p.g * p.d_v}, shrink, rng);
  p.W_o = random_matrix({p.h * p.d_v, p.d_out}, shrink, rng);
  return p;
}

std::uint64_t bench_problem_bytes(const BenchShape& s) {
  const Count kv = checked_mul(s.kv_heads, s.heads == 0 ? 0 : s.d_model / s.heads);
  Count values = product(checked_add(s.n, s.m), s.d_model);        // X and the context
  values = checked_add(values, product(2, s.d_model, s.d_model));  // W_q, W_o
  values = checked_add(values, product(2, s.d_model, kv));         // W_k, W_v
  return checked_mul(values, sizeof(double));
}

}  // namespace attn
