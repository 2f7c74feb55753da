#pragma once
// What the unit tests share: an observer that records every step, random problems built directly in
// C++, and a comparison that says where it fails (the step, the index, both values).

#include <cmath>
#include <cstddef>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/naive.hpp"
#include "model/problem.hpp"
#include "tensor/tensor.hpp"
#include "observe/observer.hpp"
#include "observe/steps.hpp"

namespace attn::test {

// Keeps every step an engine reports, in double (exact for float values too), and the order.
class StepRecorder final : public Observer {
 public:
  bool wants(Step) const override { return true; }
  void on(Step step, const Tensor<float>& value) override { keep(step, cast<double>(value)); }
  void on(Step step, const Tensor<double>& value) override { keep(step, value); }

  const Tensor<double>& at(Step step) const {
    const auto it = values_.find(step);
    if (it == values_.end()) throw std::logic_error(fmt::format("step {} was never reported", step_info(step).name));
    return it->second;
  }
  const std::vector<Step>& order() const { return order_; }

 private:
  void keep(Step step, Tensor<double> value) {
    order_.push_back(step);
    values_.insert_or_assign(step, std::move(value));
  }

  std::vector<Step> order_;
  std::map<Step, Tensor<double>> values_;
};

// "[1, 0, 2]" for flat position `at` of a tensor of `shape`.
inline std::string index_of(const Shape& shape, std::size_t at) {
  std::vector<std::size_t> index(shape.size());
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    index[axis] = shape[axis] == 0 ? 0 : at % shape[axis];
    at = shape[axis] == 0 ? 0 : at / shape[axis];
  }
  return fmt::format("[{}]", fmt::join(index, ", "));
}

// `actual` has `shape` and every value within `tol` of `expected` (flat, row-major); infinities must
// match exactly. Each mismatch is reported with its index and both values.
inline void check_close(std::string_view what, const Tensor<double>& actual, const Shape& shape,
                        const std::vector<double>& expected, double tol) {
  INFO(what);
  REQUIRE(actual.shape() == shape);
  REQUIRE(actual.size() == expected.size());
  std::size_t mismatches = 0;
  for (std::size_t at = 0; at < expected.size(); ++at) {
    const double a = actual.values()[at];
    const double e = expected[at];
    const bool ok = std::isinf(e) ? a == e : std::abs(a - e) <= tol;
    if (!ok) {
      ++mismatches;
      FAIL_CHECK(fmt::format("{} at {}: expected {}, got {} (tolerance {})", what, index_of(shape, at), e, a, tol));
    }
  }
  CHECK(mismatches == 0);
}

// Two tensors of one shape agree within `tol`, reported as check_close does.
inline void check_close(std::string_view what, const Tensor<double>& actual, const Tensor<double>& expected,
                        double tol) {
  check_close(what, actual, expected.shape(), std::vector<double>(expected.values().begin(), expected.values().end()),
              tol);
}

// True when no value is NaN.
inline bool no_nan(const Tensor<double>& t) {
  for (const double x : t.values())
    if (std::isnan(x)) return false;
  return true;
}

inline Tensor<double> random_tensor(std::mt19937& rng, Shape shape, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> uniform(lo, hi);
  Tensor<double> t(std::move(shape));
  for (double& x : t.values()) x = uniform(rng);
  return t;
}

inline std::vector<double> random_vector(std::mt19937& rng, std::size_t size) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> v(size);
  for (double& x : v) x = uniform(rng);
  return v;
}

inline std::size_t pick(std::mt19937& rng, std::size_t lo, std::size_t hi) {  // uniform in [lo, hi]
  return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
}

// The sizes of a problem; 0 means "the default" where noted.
struct Dims {
  std::size_t B = 1;
  std::size_t n = 3;
  std::size_t m = 0;  // 0: self-attention (m = n, C = X)
  std::size_t d_model = 4;
  std::size_t d_context = 0;  // 0: d_model
  std::size_t h = 1;
  std::size_t g = 0;  // 0: h
  std::size_t d_k = 2;
  std::size_t d_v = 2;
  std::size_t d_out = 0;  // 0: no output projection
  bool biases = false;
};

// A fully resolved Problem with random inputs in [-1, 1] and weights scaled by 1/sqrt(fan-in), built
// without the loader; no mask.
inline Problem random_problem(std::mt19937& rng, const Dims& d) {
  Problem p;
  p.description = "random";
  p.batched = d.B > 1;
  p.cross = d.m != 0;
  p.B = d.B;
  p.n = d.n;
  p.m = d.m == 0 ? d.n : d.m;
  p.d_model = d.d_model;
  p.d_context = p.cross ? (d.d_context == 0 ? d.d_model : d.d_context) : d.d_model;
  p.h = d.h;
  p.g = d.g == 0 ? d.h : d.g;
  p.d_k = d.d_k;
  p.d_v = d.d_v;
  p.d_out = d.d_out == 0 ? p.h * p.d_v : d.d_out;

  const auto scaled_weight = [&](std::size_t in, std::size_t out) {
    Tensor<double> w = random_tensor(rng, {in, out});
    for (double& x : w.values()) x /= std::sqrt(static_cast<double>(in));
    return w;
  };
  p.X = random_tensor(rng, {p.B, p.n, p.d_model});
  p.C = p.cross ? random_tensor(rng, {p.B, p.m, p.d_context}) : p.X;
  p.W_q = scaled_weight(p.d_model, p.h * p.d_k);
  p.W_k = scaled_weight(p.d_context, p.g * p.d_k);
  p.W_v = scaled_weight(p.d_context, p.g * p.d_v);
  if (d.d_out != 0) p.W_o = scaled_weight(p.h * p.d_v, p.d_out);
  if (d.biases) {
    p.b_q = random_vector(rng, p.h * p.d_k);
    p.b_k = random_vector(rng, p.g * p.d_k);
    p.b_v = random_vector(rng, p.g * p.d_v);
    if (d.d_out != 0) p.b_o = random_vector(rng, p.d_out);
  }
  for (std::size_t b = 0; b < p.B; ++b) {
    std::vector<std::string> queries, keys;
    for (std::size_t i = 0; i < p.n; ++i) queries.push_back(fmt::format("t{}", i));
    for (std::size_t j = 0; j < p.m; ++j) keys.push_back(fmt::format("c{}", j));
    p.tokens.push_back(queries);
    p.context_tokens.push_back(p.cross ? keys : queries);
  }
  p.scale = 1.0 / std::sqrt(static_cast<double>(p.d_k));
  p.mask.n = p.n;
  p.mask.m = p.m;
  return p;
}

// Runs the naive engine in T, recording every step.
template <class T>
struct Run {
  StepRecorder steps;
  AttentionResult<T> result;
};

template <class T>
Run<T> run_recorded(const Problem& p) {
  Run<T> run;
  run.result = run_naive<T>(p, run.steps);
  return run;
}

}  // namespace attn::test
