// One harness for every row of engine/rows.hpp, as ggml's test-backend-ops checks every op: on seeded
// problems that between them have every `Needs` of the step table (rope in both styles, alibi, softcap,
// sinks, dropout, cross-attention, W_o, each bias, GQA, a batch, a mask, the out_in layout), in float64,
//   - each row's forward against an independent formula, written here in plain loops from the
//     definitions of docs/trace-format.md (not from ops/);
//   - each row's backward against central differences of its own forward, for every input it sends a
//     gradient to (the steps it read, and the leaves X, the context and the parameters);
//   - each row's error terms against the rounding of float32: its forward in float32 and in float64 from
//     the same float32 numbers within (count + 2)·u·terms, and every gradient of a float32 walk of the
//     rows within compare --backward's noise floor of the float64 walk's, the floor built from the rows'
//     d_terms (gradient_magnitudes);
//   - each row's error terms as its own formula on magnitudes: at least |value| (the triangle
//     inequality), and equal to it where the row only adds products of numbers that are all >= 0.
// A step added to the table without a case in `independent` fails to compile (-Wswitch, no default).

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/compare.hpp"
#include "engine/compare_backward.hpp"
#include "engine/rows.hpp"
#include "row_cases.hpp"
#include "io/load.hpp"
#include "model/dropout.hpp"

namespace attn {

namespace {

constexpr double minus_inf = -std::numeric_limits<double>::infinity();

using row_cases::backward_walk;
using row_cases::Case;
using row_cases::cases;
using row_cases::forward_walk;

// ---- the independent formulas

using Values = ForwardValues<double>;

// Y[b][i][c] = Σ_r X[b][i][r]·W[r][c] + b[c]
Tensor<double> linear(const Tensor<double>& X, const Tensor<double>& W, const std::vector<double>& bias) {
  Tensor<double> Y({X.dim(0), X.dim(1), W.dim(1)});
  for (std::size_t b = 0; b < X.dim(0); ++b)
    for (std::size_t i = 0; i < X.dim(1); ++i)
      for (std::size_t c = 0; c < W.dim(1); ++c) {
        double sum = bias.empty() ? 0.0 : bias[c];
        for (std::size_t r = 0; r < W.dim(0); ++r) sum += X(b, i, r) * W(r, c);
        Y(b, i, c) = sum;
      }
  return Y;
}

// H[b][hd][i][c] = Y[b][i][hd·d + c]
Tensor<double> heads_of(const Tensor<double>& Y, std::size_t heads) {
  const std::size_t d = Y.dim(2) / heads;
  Tensor<double> H({Y.dim(0), heads, Y.dim(1), d});
  for (std::size_t b = 0; b < Y.dim(0); ++b)
    for (std::size_t hd = 0; hd < heads; ++hd)
      for (std::size_t i = 0; i < Y.dim(1); ++i)
        for (std::size_t c = 0; c < d; ++c) H(b, hd, i, c) = Y(b, i, hd * d + c);
  return H;
}

// Each pair (a, b) of the first `dims` features turned by position·θ_i.
Tensor<double> turned(const Tensor<double>& X, const Rope& r, const Tensor<double>& cos, const Tensor<double>& sin) {
  Tensor<double> Y = X;
  const std::size_t pairs = r.dims / 2;
  for (std::size_t b = 0; b < X.dim(0); ++b)
    for (std::size_t hd = 0; hd < X.dim(1); ++hd)
      for (std::size_t t = 0; t < X.dim(2); ++t)
        for (std::size_t i = 0; i < pairs; ++i) {
          const std::size_t a = r.style == RopeStyle::half ? i : 2 * i;
          const std::size_t e = r.style == RopeStyle::half ? i + pairs : 2 * i + 1;
          Y(b, hd, t, a) = X(b, hd, t, a) * cos(t, i) - X(b, hd, t, e) * sin(t, i);
          Y(b, hd, t, e) = X(b, hd, t, e) * cos(t, i) + X(b, hd, t, a) * sin(t, i);
        }
  return Y;
}

// The value the steps after `step` read in place of those it stands for.
const Tensor<double>& read(const Values& x, const Problem& p, Step step) {
  if (step == Step::q_heads && p.rope) return x[slot(Step::q_rot)];
  if (step == Step::k_heads && p.rope) return x[slot(Step::k_rot)];
  if (step == Step::scaled && p.alibi) return x[slot(Step::bias)];
  if (step == Step::scaled && p.softcap) return x[slot(Step::capped)];
  if (step == Step::capped && p.alibi) return x[slot(Step::bias)];
  if (step == Step::weights && p.dropout) return x[slot(Step::dropped)];
  return x[slot(step)];
}

// The softmax of row (b, hd, i) of S'' with the head's sink: each weight and the sink's share.
std::pair<std::vector<double>, double> softmax_row(const Tensor<double>& S, const Problem& p, std::size_t b,
                                                   std::size_t hd, std::size_t i) {
  const bool sink = !p.sinks.empty();
  double M = sink ? p.sinks[hd] : minus_inf;
  for (std::size_t j = 0; j < p.m; ++j) M = std::max(M, S(b, hd, i, j));
  std::vector<double> e(p.m, 0.0);
  double l = sink ? std::exp(p.sinks[hd] - M) : 0.0;
  for (std::size_t j = 0; j < p.m; ++j) {
    e[j] = S(b, hd, i, j) == minus_inf ? 0.0 : std::exp(S(b, hd, i, j) - M);
    l += e[j];
  }
  if (l == 0) return {e, 0.0};  // nothing to attend: zero weights
  for (double& w : e) w /= l;
  return {e, sink ? std::exp(p.sinks[hd] - M) / l : 0.0};
}

Tensor<double> independent(Step step, const Values& x, const Problem& p) {
  const std::size_t B = p.B, h = p.h, g = p.g, n = p.n, m = p.m;
  switch (step) {
    case Step::q: return linear(p.X, p.W_q, p.b_q);
    case Step::k: return linear(p.C, p.W_k, p.b_k);
    case Step::v: return linear(p.C, p.W_v, p.b_v);
    case Step::q_heads: return heads_of(x[slot(Step::q)], h);
    case Step::k_heads: return heads_of(x[slot(Step::k)], g);
    case Step::v_heads: return heads_of(x[slot(Step::v)], g);
    case Step::q_rot: return turned(x[slot(Step::q_heads)], *p.rope, p.rope->cos_q, p.rope->sin_q);
    case Step::k_rot: return turned(x[slot(Step::k_heads)], *p.rope, p.rope->cos_k, p.rope->sin_k);
    case Step::scores: {
      const Tensor<double>& Q = read(x, p, Step::q_heads);
      const Tensor<double>& K = read(x, p, Step::k_heads);
      Tensor<double> S({B, h, n, m});
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t hd = 0; hd < h; ++hd)
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < m; ++j) {
              double dot = 0;
              for (std::size_t c = 0; c < p.d_k; ++c) dot += Q(b, hd, i, c) * K(b, hd / (h / g), j, c);
              S(b, hd, i, j) = dot;
            }
      return S;
    }
    case Step::scaled: {
      Tensor<double> S = x[slot(Step::scores)];
      for (double& s : S.values()) s *= p.scale;
      return S;
    }
    case Step::capped: {
      Tensor<double> S = x[slot(Step::scaled)];
      for (double& s : S.values()) s = *p.softcap * std::tanh(s / *p.softcap);
      return S;
    }
    case Step::bias: {
      Tensor<double> S = p.softcap ? x[slot(Step::capped)] : x[slot(Step::scaled)];
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t hd = 0; hd < h; ++hd)
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < m; ++j)
              S(b, hd, i, j) -= p.alibi->slopes[hd] * (p.alibi->query_positions[i] - p.alibi->key_positions[j]);
      return S;
    }
    case Step::masked: {
      Tensor<double> S = read(x, p, Step::scaled);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t hd = 0; hd < h; ++hd)
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < m; ++j)
              if (!p.mask.allows(b, i, j)) S(b, hd, i, j) = minus_inf;
      return S;
    }
    case Step::weights:
    case Step::sink_weights: {
      Tensor<double> A({B, h, n, m}), share({B, h, n});
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t hd = 0; hd < h; ++hd)
          for (std::size_t i = 0; i < n; ++i) {
            const auto [row, sink] = softmax_row(x[slot(Step::masked)], p, b, hd, i);
            for (std::size_t j = 0; j < m; ++j) A(b, hd, i, j) = row[j];
            share(b, hd, i) = sink;
          }
      return step == Step::weights ? A : share;
    }
    case Step::dropped: {
      Tensor<double> A = x[slot(Step::weights)];
      const DropoutMask mask(*p.dropout);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t hd = 0; hd < h; ++hd)
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < m; ++j)
              A(b, hd, i, j) = mask.keeps(b, hd, i, j) ? A(b, hd, i, j) / (1 - p.dropout->p) : 0.0;
      return A;
    }
    case Step::head_outputs: {
      const Tensor<double>& A = read(x, p, Step::weights);
      const Tensor<double>& V = x[slot(Step::v_heads)];
      Tensor<double> O({B, h, n, p.d_v});
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t hd = 0; hd < h; ++hd)
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t c = 0; c < p.d_v; ++c) {
              double sum = 0;
              for (std::size_t j = 0; j < m; ++j) sum += A(b, hd, i, j) * V(b, hd / (h / g), j, c);
              O(b, hd, i, c) = sum;
            }
      return O;
    }
    case Step::concat: {
      const Tensor<double>& O = x[slot(Step::head_outputs)];
      Tensor<double> Y({B, n, h * p.d_v});
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t hd = 0; hd < h; ++hd)
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t c = 0; c < p.d_v; ++c) Y(b, i, hd * p.d_v + c) = O(b, hd, i, c);
      return Y;
    }
    case Step::output:
      return p.has_output_projection() ? linear(x[slot(Step::concat)], p.W_o, p.b_o) : x[slot(Step::concat)];
    // the gradient steps are the rows' backwards, checked below
    case Step::d_output:
    case Step::d_concat:
    case Step::d_head_outputs:
    case Step::d_dropped:
    case Step::d_weights:
    case Step::d_v_heads:
    case Step::d_masked:
    case Step::d_capped:
    case Step::d_scaled:
    case Step::d_scores:
    case Step::d_q_rot:
    case Step::d_k_rot:
    case Step::d_q_heads:
    case Step::d_k_heads:
    case Step::d_q:
    case Step::d_k:
    case Step::d_v:
    case Step::d_X:
    case Step::d_context:
    case Step::d_W_q:
    case Step::d_W_k:
    case Step::d_W_v:
    case Step::d_W_o:
    case Step::d_b_q:
    case Step::d_b_k:
    case Step::d_b_v:
    case Step::d_b_o:
    case Step::d_sinks: break;
  }
  FAIL("no independent formula for " << step_info(step).name);
  return {};
}

// ---- the backward against central differences

// Where a row's inputs live when they are perturbed: a step of x, or a leaf of the inputs.
struct Perturbable {
  Step gradient;                        // the slot of d the backward sends it to
  std::span<double> values;             // the numbers to perturb
  const Tensor<double>* file_layout{};  // a weight: its gradient is in the input file's layout
};

// <dy, f(x + h·e) − f(x − h·e)> / 2h for each element e of one input, against the backward's d at e.
void check_backward(const Case& c, Step step, Values x, Inputs<double> in, std::mt19937& rng) {
  const Problem& p = c.p;
  const RowMath<double>& row = row_of<double>(step);
  const Tensor<double> y = row.forward(x, RowContext<double>{p, in});
  Tensor<double> dy(y.shape());
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (std::size_t k = 0; k < dy.size(); ++k) dy.values()[k] = std::isinf(y.values()[k]) ? 0.0 : u(rng);
  Gradients<double> d;
  row.backward(dy, x, RowContext<double>{p, in}, d);

  std::vector<Perturbable> inputs;
  for (const Step s : inputs_of(step, p)) inputs.push_back({s, x[slot(s)].values()});
  if (step == Step::q || step == Step::k || step == Step::v || step == Step::output) {
    const bool keys = step == Step::k || step == Step::v;
    Tensor<double>& W = step == Step::q ? in.W_q : step == Step::k ? in.W_k : step == Step::v ? in.W_v : in.W_o;
    std::vector<double>& b = step == Step::q ? in.b_q : step == Step::k ? in.b_k : step == Step::v ? in.b_v : in.b_o;
    const Step dW = step == Step::q   ? Step::d_W_q
                    : step == Step::k ? Step::d_W_k
                    : step == Step::v ? Step::d_W_v
                                      : Step::d_W_o;
    const Step db = step == Step::q   ? Step::d_b_q
                    : step == Step::k ? Step::d_b_k
                    : step == Step::v ? Step::d_b_v
                                      : Step::d_b_o;
    if (step != Step::output) {
      const Step dX = keys && p.cross ? Step::d_context : Step::d_X;
      inputs.push_back({dX, keys ? in.C.values() : in.X.values()});
    }
    if (step != Step::output || p.has_output_projection()) {
      inputs.push_back({dW, W.values(), &W});
      if (!b.empty()) inputs.push_back({db, std::span<double>(b)});
    }
  }
  if ((step == Step::weights || step == Step::sink_weights) && !p.sinks.empty())
    inputs.push_back({Step::d_sinks, in.chain.sinks()});

  for (const Perturbable& input : inputs) {
    INFO(c.name << ": the backward of " << step_info(step).name << " to " << step_info(input.gradient).name);
    const Tensor<double>& analytic = d[slot(input.gradient)];
    REQUIRE(analytic.size() == input.values.size());
    for (std::size_t e = 0; e < input.values.size(); ++e) {
      double& v = input.values[e];
      if (std::isinf(v)) continue;  // a masked score: nothing to move
      // The gradient of a weight is written in the file's layout: (out, in) for out_in.
      std::size_t at = e;
      if (input.file_layout != nullptr && p.layout == Layout::out_in) {
        const std::size_t cols = input.file_layout->dim(1);
        at = (e % cols) * input.file_layout->dim(0) + e / cols;
      }
      const double h = 1e-6 * std::max(1.0, std::fabs(v)), saved = v;
      double moved = 0;
      for (const double sign : {1.0, -1.0}) {
        v = saved + sign * h;
        // a leaf of the inputs is read through `in`; a step's value through x
        const Tensor<double> f = row.forward(x, RowContext<double>{p, in});
        for (std::size_t k = 0; k < f.size(); ++k)
          if (dy.values()[k] != 0) moved += sign * dy.values()[k] * f.values()[k];
      }
      v = saved;
      const double numeric = moved / (2 * h), exact = analytic.values()[at];
      INFO("element " << e << ": backward " << exact << ", central differences " << numeric);
      CHECK(std::fabs(numeric - exact) <= 1e-6 * (1 + std::fabs(exact)));
    }
  }
}

constexpr double u32 = 0x1p-24;                                                      // float32's unit roundoff
const double eta32 = static_cast<double>(std::numeric_limits<float>::denorm_min());  // its smallest subnormal

}  // namespace

TEST_CASE("Every row is the table's step, in the table's order", "[rows]") {
  for (std::size_t k = 0; k < step_count; ++k) CHECK(slot(row_math<double>()[k].step) == k);
}

TEST_CASE("Every row's forward equals an independent formula, and its backward central differences of it", "[rows]") {
  std::vector<std::size_t> covered(step_count, 0);
  std::mt19937 rng(20261204);
  for (const Case& c : cases()) {
    const Problem& p = c.p;
    const Inputs<double> in(p, DType::float64);
    const Values x = forward_walk<double>(p, in);
    for (const Step s : steps_of(p)) {
      INFO(c.name << ": " << step_info(s).name);
      const Tensor<double> want = independent(s, x, p);
      const Tensor<double>& got = x[slot(s)];
      REQUIRE(got.shape() == want.shape());
      for (std::size_t k = 0; k < want.size(); ++k) {
        const double a = got.values()[k], b = want.values()[k];
        INFO("element " << k << ": the row " << a << ", the formula " << b);
        CHECK((std::isinf(b) ? a == b : std::fabs(a - b) <= 1e-12 * (1 + std::fabs(b))));
      }
      check_backward(c, s, x, Inputs<double>(p, DType::float64), rng);
      ++covered[slot(s)];
    }
  }
  // Every row was tried on some input that has its step.
  for (std::size_t k = 0; k < step_count; ++k) {
    INFO(step_info(static_cast<Step>(k)).name);
    CHECK(covered[k] > 0);
  }
}

TEST_CASE("Every row's error terms bound the rounding of float32, forward row by row and backward along the walk",
          "[rows]") {
  std::vector<std::size_t> covered(step_count, 0);
  std::mt19937 rng(20261205);
  for (const Case& c : cases()) {
    // the inputs rounded to float32, so that both runs start from the same numbers
    const Problem p = rounded_inputs<float>(c.p, DType::float32);
    const Inputs<double> in(p, DType::float64);
    const Inputs<float> in32(p, DType::float32);
    const ForwardValues<double> exact = forward_walk<double>(p, in);

    // forward: each row in float32 and in float64 from the float32 numbers of the steps before it
    ForwardValues<float> x32;
    ForwardValues<double> x;
    for (const Step s : steps_of(p)) {
      x32[slot(s)] = cast<float>(exact[slot(s)]);
      x[slot(s)] = cast<double>(x32[slot(s)]);
    }
    for (const Step s : steps_of(p)) {
      INFO(c.name << ": " << step_info(s).name << " in float32");
      const Tensor<float> y32 = row_of<float>(s).forward(x32, RowContext<float>{p, in32});
      const Tensor<double> y = row_of<double>(s).forward(x, RowContext<double>{p, in});
      const Terms t = row_of<double>(s).terms(ExactValues(x), y, p);
      REQUIRE(t.of.shape() == y.shape());
      for (std::size_t k = 0; k < y.size(); ++k) {
        const double a = y32.values()[k], b = y.values()[k];
        const double tolerance = (t.count + 2) * (u32 * t.of.values()[k] + eta32);
        INFO("element " << k << ": float32 " << a << ", float64 " << b << ", tolerance " << tolerance);
        CHECK((std::isinf(b) ? a == b : std::fabs(a - b) <= tolerance));
      }
      ++covered[slot(s)];
    }

    // backward: the walk in float32 against the walk in float64, from the same dY, within compare's
    // noise floor 2·((ε_P + u·sums)·M + sums·η), ε_P = u·(4·Λ + 2·d_k + 8), M from the rows' d_terms
    const ForwardValues<float> f32 = forward_walk<float>(p, in32);
    Tensor<float> dY32(exact[slot(Step::output)].shape());
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    for (float& v : dY32.values()) v = uniform(rng);
    const Tensor<double> dY = cast<double>(dY32);
    const Gradients<float> g32 = backward_walk<float>(p, in32, f32, dY32);
    const Gradients<double> g = backward_walk<double>(p, in, exact, dY);
    const Gradients<double> M = gradient_magnitudes(
        p, [&](Step s) -> const Tensor<double>& { return s == Step::d_output ? dY : exact[slot(s)]; });
    const double lambda =
        largest_logit(p, magnitude(exact[slot(rows::queries_read(p))]), magnitude(exact[slot(rows::keys_read(p))]));
    const double eps_P = u32 * (4 * lambda + 2 * static_cast<double>(p.d_k) + 8);
    const double sums = static_cast<double>(p.n + p.m + p.d_k + p.d_v + p.d_model + p.d_context + 8);
    for (const Step s : gradient_steps()) {
      if (!step_applies(s, p)) continue;
      INFO(c.name << ": " << step_info(s).name << " in float32, along the walk");
      const Tensor<double>& want = g[slot(s)];
      REQUIRE(g32[slot(s)].shape() == want.shape());
      REQUIRE(M[slot(s)].shape() == want.shape());
      for (std::size_t k = 0; k < want.size(); ++k) {
        const double a = g32[slot(s)].values()[k], b = want.values()[k];
        const double floor = 2 * ((eps_P + sums * u32) * M[slot(s)].values()[k] + sums * eta32);
        INFO("element " << k << ": float32 " << a << ", float64 " << b << ", floor " << floor);
        CHECK(std::fabs(a - b) <= floor);
      }
    }

    // the sinks' shares, which nothing reads, so the walk sends them nothing: their d_terms alone, on a
    // random gradient, within (B·n + 3)·u of them (the sum over the rows into each sink, three products)
    if (!p.sinks.empty()) {
      INFO(c.name << ": the backward of sink_weights in float32");
      Tensor<float> dy32(x32[slot(Step::sink_weights)].shape());
      for (float& v : dy32.values()) v = uniform(rng);
      Gradients<float> d32;
      Gradients<double> d, terms;
      row_of<float>(Step::sink_weights).backward(dy32, x32, RowContext<float>{p, in32}, d32);
      row_of<double>(Step::sink_weights).backward(cast<double>(dy32), x, RowContext<double>{p, in}, d);
      ForwardValues<double> sizes;
      for (const Step s : steps_of(p)) sizes[slot(s)] = magnitude(x[slot(s)]);
      row_of<double>(Step::sink_weights)
          .d_terms(magnitude(cast<double>(dy32)), sizes, RowContext<double>{p, in}, terms);
      const double count = static_cast<double>(p.B * p.n) + 3;
      for (const Step to : {Step::masked, Step::d_sinks}) {
        REQUIRE(terms[slot(to)].shape() == d[slot(to)].shape());
        for (std::size_t k = 0; k < d[slot(to)].size(); ++k) {
          const double a = d32[slot(to)].values()[k], b = d[slot(to)].values()[k];
          CHECK(std::fabs(a - b) <= (count + 2) * (u32 * terms[slot(to)].values()[k] + eta32));
        }
      }
    }
  }
  for (std::size_t k = 0; k < step_count; ++k) {
    INFO(step_info(static_cast<Step>(k)).name);
    CHECK(covered[k] > 0);
  }
}

namespace {

// `p` with every input made >= 0: then a row that only adds products sums no cancelling terms.
Problem nonnegative(Problem p) {
  for (Tensor<double>* t : {&p.X, &p.C, &p.W_q, &p.W_k, &p.W_v, &p.W_o})
    for (double& v : t->values()) v = std::fabs(v);
  for (std::vector<double>* b : {&p.b_q, &p.b_k, &p.b_v, &p.b_o, &p.sinks})
    for (double& v : *b) v = std::fabs(v);
  return p;
}

bool all_nonnegative(const Tensor<double>& t) {
  return std::all_of(t.values().begin(), t.values().end(), [](double v) { return v >= 0 && !std::isinf(v); });
}

// The ops that only add products (a relayout, a product by a constant >= 0, a sum of products).
bool adds_products(Step s) {
  const Op op = step_info(s).op;
  return op == Op::projection || op == Op::dot_products || op == Op::weighted_sum || op == Op::relayout ||
         op == Op::scale || op == Op::dropout;
}

// |got| <= terms everywhere; == where `sharp`.
void check_sizes(const Tensor<double>& got, const Tensor<double>& terms, bool sharp) {
  REQUIRE(terms.shape() == got.shape());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const double a = std::fabs(got.values()[k]), t = terms.values()[k];
    INFO("element " << k << ": |value| " << a << ", terms " << t << (sharp ? " (equal)" : " (at least)"));
    if (std::isinf(a)) continue;  // a masked score
    CHECK(a <= t * (1 + 1e-12) + 1e-300);
    if (sharp) CHECK(t <= a * (1 + 1e-12) + 1e-300);
  }
}

}  // namespace

TEST_CASE("Every row's error terms are its formula on magnitudes: at least the value, equal without cancellation",
          "[rows]") {
  std::mt19937 rng(20261206);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (const Case& c : cases()) {
    for (const bool positive : {false, true}) {
      const Problem p = positive ? nonnegative(c.p) : c.p;
      const Inputs<double> in(p, DType::float64);
      const RowContext<double> ctx{p, in};
      const ForwardValues<double> x = forward_walk<double>(p, in);
      ForwardValues<double> sizes;
      for (const Step s : steps_of(p)) sizes[slot(s)] = magnitude(x[slot(s)]);
      for (const Step s : steps_of(p)) {
        bool inputs_nonnegative = positive;
        for (const Step from : inputs_of(s, p))
          inputs_nonnegative = inputs_nonnegative && all_nonnegative(x[slot(from)]);
        const bool sharp = inputs_nonnegative && adds_products(s);
        {
          INFO(c.name << (positive ? ", every input >= 0: " : ": ") << step_info(s).name << "'s terms");
          check_sizes(x[slot(s)], row_of<double>(s).terms(ExactValues(x), x[slot(s)], p).of, sharp);
        }
        // the softmax's d_terms read the head outputs' gradient, which only the walk has (tested above)
        if (s == Step::weights) continue;
        Tensor<double> dy(x[slot(s)].shape());
        for (std::size_t k = 0; k < dy.size(); ++k)
          dy.values()[k] = std::isinf(x[slot(s)].values()[k]) ? 0 : uniform(rng);
        Gradients<double> d, terms;
        row_of<double>(s).backward(dy, x, ctx, d);
        row_of<double>(s).d_terms(dy, sizes, ctx, terms);
        for (std::size_t k = 0; k < table_size; ++k) {
          if (d[k].empty()) continue;
          INFO(c.name << (positive ? ", every input >= 0: " : ": ") << step_info(s).name << "'s d_terms to "
                      << step_info(static_cast<Step>(k)).name);
          // with dropout, what reads the dropped weights bounds each by the largest factor 1/(1 − p)
          const bool bounded = p.dropout && (s == Step::dropped || s == Step::head_outputs);
          check_sizes(d[k], terms[k], sharp && !bounded);
        }
      }
    }
  }
}

}  // namespace attn
