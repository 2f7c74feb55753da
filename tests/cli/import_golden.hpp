#pragma once
// What the import tests share: the goldens of tests/data/models/golden (tests/models/README.md), a
// layer imported and run through the real binary, and the error bound a run is judged by.
//
// The bound is derived, value by value, from the standard model of floating-point arithmetic
// (fl(a ∘ b) = (a ∘ b)(1 + δ), |δ| <= u; a sum of k products is off by at most γ_k · Σ|terms|, with
// γ_k = k·u / (1 − k·u); Higham, "Accuracy and Stability of Numerical Algorithms", §3.1), with u the
// unit roundoff of the run's dtype (2^-24 for float32, 2^-53 for float64). The file's numbers reach the
// engine exactly (float32 and float16 values are float32 values), so every error comes from the run:
//
//   Q = X·W_q + b_q          e_Q = γ_{d+1} · (|X|·|W_q| + |b_q|)                      (K, V alike)
//   (RoPE)                   e_Q' = |cos|·e_Q + |sin|·e_Q' + (4 + 4|angle|)·u·(|q| + |q'|)
//   S = scale · Q_h·K_hᵀ     e_S = scale · (e_Q·|K| + |Q|·e_K + γ_{d_k} · |Q|·|K|) + 2u·|S|
//                            (2u: the scale rounded to the dtype, and the product)
//   (softcap)  S_c = c·tanh(S/c)   e_Sc = (1 − tanh²)·e_S + 5u·|S_c|: the slope of the cap carries e_S, and
//                            the division, tanh within 2 ulp (3u) and the product add their own
//   P = softmax(S)           dP_ij = P_ij (dS_ij − Σ_k P_ik dS_ik), so with E_i = max_k (e_S_ik + u·|S_ik − max_i|)
//                            (the max subtracted, rounded): e_P_ij = P_ij · (2·E_i + (4m + 4)·u), where
//                            (4m + 4)u covers exp within 1 ulp (2u), the sum of m terms (m·u), the
//                            division (u), and flash's rescaling, at most 3u per key tile (3m·u)
//   O_h = P·V_h              e_O = e_P·|V| + P·e_V + γ_m · P·|V|
//   Y = O·W_o + b_o          e_Y = e_O·|W_o| + γ_{h·d_v+1} · (|O|·|W_o| + |b_o|)
//
// First order in u: the terms of u² are below 1e-13 for float32 at these sizes, far under the bound.
// |Q|, |K|, P, |V| are the golden's, so the bound does not lean on the run it judges.

#include <cmath>
#include <cstddef>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "run_binary.hpp"

namespace attn::test {

// One golden array: its shape and its values, row-major.
struct GoldenArray {
  Shape shape;
  std::vector<double> values;
  double at(std::initializer_list<std::size_t> index) const {
    std::size_t flat = 0, axis = 0;
    for (const std::size_t i : index) flat = flat * shape[axis++] + i;
    return values[flat];
  }
};

inline void flatten_golden(const nlohmann::json& j, std::size_t depth, GoldenArray& out) {
  if (j.is_number()) {
    out.values.push_back(j.get<double>());
    return;
  }
  if (depth == out.shape.size()) out.shape.push_back(j.size());
  for (const nlohmann::json& item : j) flatten_golden(item, depth + 1, out);
}

// tests/data/models/golden/NAME.json: q, k, v, weights, output (and q_rot, k_rot for llama).
inline std::map<std::string, GoldenArray> read_golden(const std::string& name) {
  const nlohmann::json doc =
      nlohmann::json::parse(read_file(source_path("tests/data/models/golden/" + name + ".json")));
  std::map<std::string, GoldenArray> out;
  for (const auto& [key, value] : doc.items()) {
    if (!value.is_array()) continue;
    GoldenArray a;
    flatten_golden(value, 0, a);
    out.emplace(key, std::move(a));
  }
  return out;
}

inline std::string model_path(const std::string& relative) { return source_path("tests/data/models/" + relative); }

// `attn-trace import ARGS -o FILE` in `dir`, checked to succeed; the file's path.
inline std::string import_to(const TempDir& dir, std::vector<std::string> args, const std::string& name) {
  const std::string file = dir / (name + ".json");
  args.insert(args.begin(), "import");
  args.insert(args.end(), {"-o", file});
  const RunResult r = run_binary(args);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return file;
}

// `attn-trace run FILE --json -` with this engine and dtype, read back.
inline Trace run_trace(const std::string& file, const std::string& engine, const std::string& dtype) {
  const RunResult r = run_binary({"run", file, "--engine", engine, "--dtype", dtype, "--json", "-"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return trace_from_json(r.out, "run");
}

// The bound of each golden step for a run in unit roundoff `u`, as the header derives it.
struct Bounds {
  std::map<std::string, std::vector<double>> of;  // step name -> one bound per value, as the golden's shape
};

struct RopeAngles {
  double theta = 0;    // 0: no RoPE
  double softcap = 0;  // 0: no logit cap
};

inline Bounds error_bounds(const Problem& p, const std::map<std::string, GoldenArray>& golden, double u,
                           RopeAngles rope = {}) {
  const auto gamma = [u](double k) { return k * u / (1 - k * u); };
  const std::size_t B = p.B, n = p.n, m = p.m, d = p.d_model, h = p.h, g = p.g, dk = p.d_k, dv = p.d_v;
  const std::size_t group = h / g;
  const std::string q_key = rope.theta > 0 ? "q_rot" : "q", k_key = rope.theta > 0 ? "k_rot" : "k";
  const GoldenArray &Q = golden.at(q_key), &K = golden.at(k_key), &V = golden.at("v"), &P = golden.at("weights");
  const GoldenArray &Q0 = golden.at("q"), &K0 = golden.at("k");
  const bool batched = p.batched;
  const auto at2 = [&](const GoldenArray& a, std::size_t b, std::size_t i, std::size_t c) {
    return batched ? a.at({b, i, c}) : a.at({i, c});
  };
  const auto at3 = [&](const GoldenArray& a, std::size_t b, std::size_t x, std::size_t i, std::size_t j) {
    return batched ? a.at({b, x, i, j}) : a.at({x, i, j});
  };

  Bounds out;
  // pass 1: the projections, e = γ_{d+1} · (|X|·|W| + |b|)
  const auto projection = [&](const Tensor<double>& W, const std::vector<double>& bias) {
    const std::size_t cols = W.dim(1);
    std::vector<double> e(B * n * cols);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < cols; ++c) {
          double sum = bias.empty() ? 0 : std::abs(bias[c]);
          for (std::size_t a = 0; a < d; ++a)
            sum += std::abs(p.X.values()[(b * n + i) * d + a]) * std::abs(W.values()[a * cols + c]);
          e[(b * n + i) * cols + c] = gamma(static_cast<double>(d + 1)) * sum;
        }
    return e;
  };
  out.of["q"] = projection(p.W_q, p.b_q);
  out.of["k"] = projection(p.W_k, p.b_k);
  out.of["v"] = projection(p.W_v, p.b_v);
  std::vector<double> eQ = out.of["q"], eK = out.of["k"];
  const std::vector<double>& eV = out.of["v"];

  // pass 2: RoPE turns column c with c ± d_k/2 by pos · θ^(−2(c mod d_k/2)/d_k)
  const auto rotate = [&](const std::vector<double>& e, const GoldenArray& x0, std::size_t heads) {
    std::vector<double> r(e.size());
    const std::size_t half = dk / 2, width = heads * dk;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < width; ++c) {
          const std::size_t in_head = c % dk, partner = c - in_head + (in_head + half) % dk;
          const double angle =
              static_cast<double>(i) *
              std::pow(rope.theta, -2.0 * static_cast<double>(in_head % half) / static_cast<double>(dk));
          const std::size_t at = (b * n + i) * width;
          r[at + c] = std::abs(std::cos(angle)) * e[at + c] + std::abs(std::sin(angle)) * e[at + partner] +
                      (4 + 4 * angle) * u * (std::abs(at2(x0, b, i, c)) + std::abs(at2(x0, b, i, partner)));
        }
    return r;
  };
  if (rope.theta > 0) {
    eQ = rotate(eQ, Q0, h);
    eK = rotate(eK, K0, g);
  }

  // pass 3: scores, weights and head outputs, head by head
  std::vector<double> eP(B * h * n * m), O(B * n * h * dv), eO(B * n * h * dv);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t x = 0; x < h; ++x) {
      const std::size_t kv = x / group;
      for (std::size_t i = 0; i < n; ++i) {
        std::vector<double> eS(m), S(m);
        double max_s = -INFINITY;
        for (std::size_t j = 0; j < m; ++j) {
          double s = 0, e = 0, mag = 0;
          for (std::size_t c = 0; c < dk; ++c) {
            const std::size_t qc = x * dk + c, kc = kv * dk + c;
            const double q = at2(Q, b, i, qc), k = at2(K, b, j, kc);
            s += q * k;
            mag += std::abs(q) * std::abs(k);
            e += eQ[(b * n + i) * h * dk + qc] * std::abs(k) + std::abs(q) * eK[(b * m + j) * g * dk + kc];
          }
          S[j] = p.scale * s;
          eS[j] = p.scale * (e + gamma(static_cast<double>(dk)) * mag) + 2 * u * std::abs(S[j]);
          if (rope.softcap > 0) {
            const double t = std::tanh(S[j] / rope.softcap);
            S[j] = rope.softcap * t;
            eS[j] = (1 - t * t) * eS[j] + 5 * u * std::abs(S[j]);
          }
          if (at3(P, b, x, i, j) > 0) max_s = std::max(max_s, S[j]);
        }
        double E = 0;
        for (std::size_t j = 0; j < m; ++j)
          if (at3(P, b, x, i, j) > 0) E = std::max(E, eS[j] + u * std::abs(S[j] - max_s));
        for (std::size_t j = 0; j < m; ++j)
          eP[((b * h + x) * n + i) * m + j] = at3(P, b, x, i, j) * (2 * E + (4 * static_cast<double>(m) + 4) * u);
        for (std::size_t c = 0; c < dv; ++c) {
          double o = 0, e = 0, mag = 0;
          for (std::size_t j = 0; j < m; ++j) {
            const double pij = at3(P, b, x, i, j), v = at2(V, b, j, kv * dv + c);
            o += pij * v;
            mag += pij * std::abs(v);
            e += eP[((b * h + x) * n + i) * m + j] * std::abs(v) + pij * eV[(b * m + j) * g * dv + kv * dv + c];
          }
          O[(b * n + i) * h * dv + x * dv + c] = o;
          eO[(b * n + i) * h * dv + x * dv + c] = e + gamma(static_cast<double>(m)) * mag;
        }
      }
    }
  out.of["weights"] = eP;

  // pass 4: the output projection
  const std::size_t width = h * dv, d_out = p.d_out;
  std::vector<double> eY(B * n * d_out);
  for (std::size_t r = 0; r < B * n; ++r)
    for (std::size_t k = 0; k < d_out; ++k) {
      double e = 0, mag = p.b_o.empty() ? 0 : std::abs(p.b_o[k]);
      for (std::size_t c = 0; c < width; ++c) {
        const double w = std::abs(p.W_o.values()[c * d_out + k]);
        e += eO[r * width + c] * w;
        mag += std::abs(O[r * width + c]) * w;
      }
      eY[r * d_out + k] = e + gamma(static_cast<double>(width + 1)) * mag;
    }
  out.of["output"] = eY;
  return out;
}

// Every step of `trace` that the golden has, within its bound, value by value; a failure names the
// run, the step, the index and both values.
inline void check_run(const Trace& trace, const std::map<std::string, GoldenArray>& golden, const Bounds& bounds,
                      const std::string& run, const std::vector<std::string>& steps) {
  std::size_t checked = 0;
  for (const StepRecord& record : trace.steps) {
    const std::string name(step_info(record.step).name);
    if (std::find(steps.begin(), steps.end(), name) == steps.end()) continue;
    const GoldenArray& want = golden.at(name);
    const std::vector<double>& bound = bounds.of.at(name);
    INFO(run << ": step " << name);
    REQUIRE(record.value.shape() == want.shape);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.values.size(); ++i) {
      const double got = record.value.values()[i];
      if (std::abs(got - want.values[i]) <= bound[i]) continue;
      if (++bad <= 3)
        FAIL_CHECK(fmt::format("{}: step {} at [{}]: got {}, golden {} (|difference| {:.3g} > bound {:.3g})", run, name,
                               fmt::join(unravel_index(i, want.shape), ", "), got, want.values[i],
                               std::abs(got - want.values[i]), bound[i]));
    }
    CHECK(bad == 0);
    ++checked;
  }
  CHECK(checked > 0);
  // The output is the layer's result: every run must report it.
  CHECK(std::any_of(trace.steps.begin(), trace.steps.end(),
                    [](const StepRecord& s) { return step_info(s.step).name == "output"; }));
}

inline double unit_roundoff_of(const std::string& dtype) {
  return dtype == "float32" ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
}

}  // namespace attn::test
