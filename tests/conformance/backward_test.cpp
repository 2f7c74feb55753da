// Conformance of the backward pass: both engines' gradients against PyTorch autograd. Every file of
// tests/conformance/golden_backward holds an input in our format (with its upstream gradient "dY", or
// none: dY = 1) and the gradients torch.autograd computed for it in float64 (make_backward.py, checked
// there against a NumPy backward written out by hand, nn.MultiheadAttention's autograd and central
// differences). The test reads only the committed JSON, so it needs no Python.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/backward.hpp"
#include "engine/compare_backward.hpp"
#include "io/load.hpp"

using namespace attn;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// float64 runs the same equations as autograd in the same precision; only the order of the sums differs.
// The bar: 1e-9 of the gradient's size, max(1, max|expected|).
constexpr double float64_tol = 1e-9;
constexpr std::size_t min_cases = 25;
constexpr std::size_t max_reported = 5;

struct Flat {
  Shape shape;
  std::vector<double> values;
};

void flatten(const json& j, std::size_t depth, Flat& out) {
  if (j.is_number()) {
    out.values.push_back(j.get<double>());
    return;
  }
  if (depth == out.shape.size()) out.shape.push_back(j.size());
  for (const json& item : j) flatten(item, depth + 1, out);
}

struct Case {
  std::string name;
  Problem problem;
  std::map<Step, Flat> expected;
};

std::vector<Case> read_cases() {
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(fs::path(ATTN_SOURCE_DIR) / "tests/conformance/golden_backward"))
    if (entry.path().extension() == ".json") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  std::vector<Case> cases;
  for (const fs::path& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const json doc = json::parse(text.str());
    Case c{doc.at("name").get<std::string>(), load_problem(doc.at("input").dump(), path.filename().string()), {}};
    for (const auto& [key, value] : doc.at("expected").items()) {
      const std::optional<Step> step = step_from_name(key);
      if (!step) throw std::runtime_error(fmt::format("{}: expected.{} is not a step", c.name, key));
      Flat f;
      flatten(value, 0, f);
      c.expected.emplace(*step, std::move(f));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = read_cases();
  return all;
}

// Keeps every gradient an engine reports, in double.
class GradientKeeper final : public Observer {
 public:
  bool wants(Step step) const override { return is_gradient_step(step); }
  void on(Step step, const Tensor<float>& v) override { kept_.insert_or_assign(step, cast<double>(v)); }
  void on(Step step, const Tensor<double>& v) override { kept_.insert_or_assign(step, v); }
  const Tensor<double>* find(Step step) const {
    const auto it = kept_.find(step);
    return it == kept_.end() ? nullptr : &it->second;
  }

 private:
  std::map<Step, Tensor<double>> kept_;
};

// The engines hold a batch axis for every step but a parameter's; the goldens only for a batch.
Shape as_golden(const Tensor<double>& t, const Problem& p, Step step) {
  Shape shape = t.shape();
  if (!p.batched && !step_info(step).parameter) shape.erase(shape.begin());
  return shape;
}

// Every gradient of `got` that the golden has, to tol · max(1, max|expected|); a gradient the engine
// must report (every one but the n × m ones of flash) and did not is a failure.
void check_gradients(const Case& c, const std::string& run, const GradientKeeper& got, double tol, bool flash) {
  for (const auto& [step, want] : c.expected) {
    const std::string_view name = step_info(step).name;
    const Tensor<double>* t = got.find(step);
    if (t == nullptr) {
      if (!(flash && is_score_step(step))) FAIL_CHECK(fmt::format("{}: {}: {} was never reported", c.name, run, name));
      continue;
    }
    if (as_golden(*t, c.problem, step) != want.shape) {
      FAIL_CHECK(fmt::format("{}: {}: {} has shape [{}], autograd's [{}]", c.name, run, name,
                             fmt::join(as_golden(*t, c.problem, step), ", "), fmt::join(want.shape, ", ")));
      continue;
    }
    double size = 1;
    for (const double e : want.values) size = std::max(size, std::abs(e));
    std::size_t bad = 0;
    for (std::size_t k = 0; k < want.values.size(); ++k) {
      const double a = t->values()[k], e = want.values[k];
      if (std::abs(a - e) <= tol * size) continue;  // a NaN fails here too
      if (++bad <= max_reported)
        FAIL_CHECK(fmt::format("{}: {}: {} at flat index {}: got {}, autograd {} (error {:.3g} > {:.3g})", c.name, run,
                               name, k, a, e, std::abs(a - e), tol * size));
    }
    if (bad > max_reported)
      FAIL_CHECK(fmt::format("{}: {}: {}: {} more mismatches", c.name, run, name, bad - max_reported));
  }
}

std::vector<TileSize> tilings(const Problem& p) { return {default_tiles(p.n, p.m), {3, 2}, {1, 1}, {64, 64}}; }

}  // namespace

TEST_CASE("the backward goldens cover the cases the issue lists", "[backward][conformance]") {
  REQUIRE(cases().size() >= min_cases);
  bool rope = false, alibi = false, cross = false, batch = false, gqa = false, out_in = false, empty = false,
       no_dy = false;
  for (const Case& c : cases()) {
    const Problem& p = c.problem;
    rope |= p.rope.has_value();
    alibi |= p.alibi.has_value();
    cross |= p.cross;
    batch |= p.batched;
    gqa |= p.g < p.h;
    out_in |= p.layout == Layout::out_in;
    empty |= !find_empty_rows(p).empty();
    no_dy |= p.dY.empty();
  }
  CHECK(rope);
  CHECK(alibi);
  CHECK(cross);
  CHECK(batch);
  CHECK(gqa);
  CHECK(out_in);
  CHECK(empty);
  CHECK(no_dy);
}

TEST_CASE("naive's gradients are PyTorch autograd's in float64, to 1e-9 of their size", "[backward][conformance]") {
  for (const Case& c : cases()) {
    GradientKeeper got;
    run_naive_backward<double>(c.problem, got);
    check_gradients(c, "naive float64", got, float64_tol, false);
  }
}

TEST_CASE("flash's gradients are PyTorch autograd's in float64 at four tilings, to 1e-9 of their size",
          "[backward][conformance][flash]") {
  for (const Case& c : cases())
    for (const TileSize tiles : tilings(c.problem)) {
      GradientKeeper got;
      run_flash_backward<double>(c.problem, got, tiles);
      check_gradients(c, fmt::format("flash float64 Br={} Bc={}", tiles.Br, tiles.Bc), got, float64_tol, true);
    }
}

TEST_CASE("in float32, flash's gradients pass compare's rule at four tilings, large logits included",
          "[backward][conformance][flash]") {
  for (const Case& c : cases())
    for (const TileSize tiles : tilings(c.problem)) {
      NullObserver none;
      const CompareRecord r = compare_backward<float>(c.problem, tiles, none, none);
      INFO(fmt::format("{}: float32 Br={} Bc={}", c.name, tiles.Br, tiles.Bc));
      CHECK(r.pass);
      for (const GradientCheck& g : r.gradients) {
        INFO(fmt::format("{}: flash {:.3g} > bound {:.3g} (naive {:.3g}, noise {:.3g})", step_info(g.step).name,
                         g.flash_vs_ref.max_abs, g.bound, g.naive_vs_ref.max_abs, g.noise));
        CHECK(g.pass);
      }
    }
}

TEST_CASE("in float32, naive's gradients are within a few float32 roundings of autograd's", "[backward][conformance]") {
  // Every input is rounded to 24 bits and every sum runs in float32: gradients of order 1 land within
  // about 1e-6 of the float64 truth; a wrong scale, head or axis moves a gradient by 1e-2 or more. Not so
  // once the logits are large: at |S'| = 5·10⁵ a float32 score is a multiple of 1/32, so a weight can
  // move by a few percent in a correct float32 run (and the rule above is what judges it there).
  for (const Case& c : cases()) {
    NullObserver none;
    const CompareRecord r = compare_backward<double>(c.problem, default_tiles(c.problem.n, c.problem.m), none, none);
    if (r.largest_logit > 1e4) continue;
    GradientKeeper got;
    run_naive_backward<float>(c.problem, got);
    check_gradients(c, "naive float32", got, 1e-4, false);
  }
}

TEST_CASE("\"The cat sat\" with dY = 1: every d_weights entry is 2 and d_scores is 0", "[backward]") {
  // By hand: with no dY in the input, dY = 1 everywhere and there is no W_o, so dO = 1 for every query.
  // Every row of V is [1, 1], so dA[i][j] = dO_i · v_j = 1 + 1 = 2 for every pair; the softmax backward
  // gives A ⊙ (2 - Σ_j A_j · 2) = A ⊙ (2 - 2) = 0, and so d_scores = 0: moving weight between keys whose
  // values pull L alike cannot change L.
  const Problem p = load_problem_file((fs::path(ATTN_SOURCE_DIR) / "data" / "the_cat_sat.json").string());
  GradientKeeper got;
  run_naive_backward<double>(p, got);
  REQUIRE(got.find(Step::d_weights) != nullptr);
  for (const double x : got.find(Step::d_weights)->values()) CHECK(x == 2.0);
  for (const Step s : {Step::d_masked, Step::d_scaled, Step::d_scores, Step::d_q, Step::d_k, Step::d_W_q})
    for (const double x : got.find(s)->values()) CHECK(std::abs(x) < 1e-15);
}
