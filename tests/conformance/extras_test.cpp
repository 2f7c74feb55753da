// Conformance of soft-capping, sinks and dropout: both engines' forward steps and gradients against
// PyTorch. Every file of tests/conformance/golden_extras holds an input in our format with "softcap",
// "sinks" and/or "dropout", the steps PyTorch computes for it in float64 and the gradients autograd
// gives (make_extras.py, checked there against a NumPy pass written out by hand and central
// differences). The test reads only the committed JSON, so it needs no Python.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <limits>
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
#include "engine/compare.hpp"
#include "engine/compare_backward.hpp"
#include "engine/fast.hpp"
#include "engine/fast_backward.hpp"
#include "io/load.hpp"

using namespace attn;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The same bars as the backward goldens (backward_test.cpp): float64 to 1e-9 of a step's size.
constexpr double float64_tol = 1e-9;
constexpr std::size_t max_reported = 5;

struct Flat {
  Shape shape;
  std::vector<double> values;
};

// Nested lists of numbers, with the mask's "-inf" as a string (JSON has no infinity).
void flatten(const json& j, std::size_t depth, Flat& out) {
  if (j.is_number() || j.is_string()) {
    out.values.push_back(j.is_number() ? j.get<double>() : -std::numeric_limits<double>::infinity());
    return;
  }
  if (depth == out.shape.size()) out.shape.push_back(j.size());
  for (const json& item : j) flatten(item, depth + 1, out);
}

struct Case {
  std::string name;
  Problem problem;
  std::map<Step, Flat> expected;
  Flat keep_mask;  // (B, h, n, m) 1 where make_extras.py's own Philox keeps a weight; with "dropout" only
};

// p = 0 is no dropout at all: the engines trace no dropped step (docs/input-format.md), and PyTorch's
// dropped and d_dropped are then the weights and their gradient, which is checked here and then left out.
void without_dropout_steps(Case& c) {
  if (c.problem.dropout) return;
  for (const auto& [drop, same] :
       {std::pair(Step::dropped, Step::weights), std::pair(Step::d_dropped, Step::d_weights)}) {
    const auto it = c.expected.find(drop);
    if (it == c.expected.end()) continue;
    REQUIRE(c.expected.count(same) == 1);
    CHECK(it->second.values == c.expected.at(same).values);
    c.expected.erase(it);
  }
}

std::vector<Case> read_cases() {
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(fs::path(ATTN_SOURCE_DIR) / "tests/conformance/golden_extras"))
    if (entry.path().extension() == ".json") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  std::vector<Case> cases;
  for (const fs::path& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const json doc = json::parse(text.str());
    Case c{doc.at("name").get<std::string>(), load_problem(doc.at("input").dump(), path.filename().string()), {}, {}};
    if (doc.contains("keep_mask")) flatten(doc.at("keep_mask"), 0, c.keep_mask);
    for (const auto& [key, value] : doc.at("expected").items()) {
      const std::optional<Step> step = step_from_name(key);
      if (!step) throw std::runtime_error(fmt::format("{}: expected.{} is not a step", c.name, key));
      Flat f;
      flatten(value, 0, f);
      c.expected.emplace(*step, std::move(f));
    }
    without_dropout_steps(c);
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = read_cases();
  return all;
}

// Keeps every step an engine reports, forward and backward, in double.
class Steps final : public Observer {
 public:
  bool wants(Step) const override { return true; }
  void on(Step step, const Tensor<float>& v) override { kept_.insert_or_assign(step, cast<double>(v)); }
  void on(Step step, const Tensor<double>& v) override { kept_.insert_or_assign(step, v); }
  const Tensor<double>* find(Step step) const {
    const auto it = kept_.find(step);
    return it == kept_.end() ? nullptr : &it->second;
  }

 private:
  std::map<Step, Tensor<double>> kept_;
};

// The engines hold a batch axis for every step but a parameter's gradient; the goldens only for a batch.
Shape as_golden(const Tensor<double>& t, const Problem& p, Step step) {
  Shape shape = t.shape();
  if (!p.batched && !step_info(step).parameter) shape.erase(shape.begin());
  return shape;
}

// Every step of `got` that the golden has, to tol · max(1, max|expected|), -inf exactly where expected;
// a step the engine must report (every one but the n × m ones of flash) and did not is a failure.
void check_steps(const Case& c, const std::string& run, const Steps& got, double tol, bool flash) {
  for (const auto& [step, want] : c.expected) {
    const std::string_view name = step_info(step).name;
    const Tensor<double>* t = got.find(step);
    if (t == nullptr) {
      if (!(flash && is_score_step(step))) FAIL_CHECK(fmt::format("{}: {}: {} was never reported", c.name, run, name));
      continue;
    }
    if (as_golden(*t, c.problem, step) != want.shape) {
      FAIL_CHECK(fmt::format("{}: {}: {} has shape [{}], PyTorch's [{}]", c.name, run, name,
                             fmt::join(as_golden(*t, c.problem, step), ", "), fmt::join(want.shape, ", ")));
      continue;
    }
    double size = 1;
    for (const double e : want.values)
      if (std::isfinite(e)) size = std::max(size, std::abs(e));
    std::size_t bad = 0;
    for (std::size_t k = 0; k < want.values.size(); ++k) {
      const double a = t->values()[k], e = want.values[k];
      if (std::isinf(e) ? a == e : std::abs(a - e) <= tol * size) continue;  // a NaN fails here too
      if (++bad <= max_reported)
        FAIL_CHECK(fmt::format("{}: {}: {} at flat index {}: got {}, PyTorch {} (error {:.3g} > {:.3g})", c.name, run,
                               name, k, a, e, std::abs(a - e), tol * size));
    }
    if (bad > max_reported)
      FAIL_CHECK(fmt::format("{}: {}: {}: {} more mismatches", c.name, run, name, bad - max_reported));
  }
}

std::vector<TileSize> tilings(const Problem& p) { return {default_tiles(p.n, p.m), {3, 2}, {1, 1}, {64, 64}}; }

}  // namespace

TEST_CASE("the goldens of soft-capping, sinks and dropout cover what they are for",
          "[softcap][sinks][dropout][conformance]") {
  std::size_t softcap = 0;
  bool alibi = false, causal = false, batch = false, gqa = false, out_in = false, saturated = false;
  for (const Case& c : cases()) {
    const Problem& p = c.problem;
    if (!p.softcap) continue;
    ++softcap;
    alibi |= p.alibi.has_value();
    causal |= p.mask.kind == MaskKind::causal;
    batch |= p.batched;
    gqa |= p.g < p.h;
    out_in |= p.layout == Layout::out_in;
    const auto it = c.expected.find(Step::capped);
    REQUIRE(it != c.expected.end());
    for (const double x : it->second.values) saturated |= std::abs(x) == *p.softcap;  // tanh rounded to ±1
  }
  std::size_t sinks = 0, dropout = 0;
  bool sink_takes_all = false, dropped_some = false;
  for (const Case& c : cases()) {
    if (!c.problem.sinks.empty()) {
      ++sinks;
      for (const double a : c.expected.at(Step::sink_weights).values) sink_takes_all |= a == 1;  // an emptied row
    }
    if (c.problem.dropout) {
      ++dropout;
      for (const double z : c.keep_mask.values) dropped_some |= z == 0;
    }
  }
  CHECK(softcap >= 6);
  CHECK(sinks >= 6);
  CHECK(dropout >= 4);
  CHECK(sink_takes_all);
  CHECK(dropped_some);
  CHECK(alibi);
  CHECK(causal);
  CHECK(batch);
  CHECK(gqa);
  CHECK(out_in);
  CHECK(saturated);
}

TEST_CASE("naive's steps and gradients with softcap, sinks and dropout are PyTorch's in float64, to 1e-9 of their size",
          "[softcap][sinks][dropout][conformance]") {
  for (const Case& c : cases()) {
    Steps got;
    run_naive_backward<double>(c.problem, got);
    check_steps(c, "naive float64", got, float64_tol, false);
  }
}

TEST_CASE("flash's steps and gradients with softcap, sinks and dropout are PyTorch's in float64 at four tilings",
          "[softcap][sinks][dropout][conformance][flash]") {
  for (const Case& c : cases())
    for (const TileSize tiles : tilings(c.problem)) {
      Steps got;
      run_flash_backward<double>(c.problem, got, tiles);
      check_steps(c, fmt::format("flash float64 Br={} Bc={}", tiles.Br, tiles.Bc), got, float64_tol, true);
    }
}

TEST_CASE(
    "in float32, flash with softcap, sinks and dropout passes compare's rule forward and backward at four tilings",
    "[softcap][sinks][dropout][conformance][flash]") {
  for (const Case& c : cases())
    for (const TileSize tiles : tilings(c.problem)) {
      INFO(fmt::format("{}: float32 Br={} Bc={}", c.name, tiles.Br, tiles.Bc));
      NullObserver none;
      CHECK(compare_engines<float>(c.problem, tiles, none, none).pass);
      const CompareRecord r = compare_backward<float>(c.problem, tiles, none, none);
      for (const GradientCheck& g : r.gradients) {
        INFO(fmt::format("{}: flash {:.3g} > bound {:.3g} (naive {:.3g}, noise {:.3g})", step_info(g.step).name,
                         g.flash_vs_ref.max_abs, g.bound, g.naive_vs_ref.max_abs, g.noise));
        CHECK(g.pass);
      }
      CHECK(r.pass);
    }
}

TEST_CASE("the fast path with softcap, sinks and dropout gives PyTorch's output and gradients in float64",
          "[softcap][sinks][dropout][conformance][fast]") {
  for (const Case& c : cases())
    for (const Engine engine : {Engine::naive, Engine::flash}) {
      const AttentionResult<double> y = run_fast<double>(c.problem, engine, FastOptions{});
      Steps got;
      got.on(Step::output, y.output);
      Case only_output{c.name, c.problem, {{Step::output, c.expected.at(Step::output)}}, {}};
      check_steps(only_output, fmt::format("fast {} float64", name_of(engine)), got, float64_tol, false);
    }
  for (const Case& c : cases()) {
    const FastBackward<double> g = run_fast_backward<double>(c.problem, FastOptions{});
    Steps got;
    for (const auto& [step, value] : g.gradients) got.on(step, value);
    Case some{c.name, c.problem, {}, {}};
    for (const auto& [step, value] : g.gradients)
      if (c.expected.count(step) != 0) some.expected.emplace(step, c.expected.at(step));
    REQUIRE(some.expected.count(Step::d_X) == 1);
    check_steps(some, "fast backward float64", got, float64_tol, false);
  }
}

TEST_CASE("our dropout mask is make_extras.py's own Philox4x32-10 mask, entry by entry", "[dropout][conformance]") {
  std::size_t checked = 0;
  for (const Case& c : cases()) {
    if (!c.problem.dropout) continue;
    const Problem& p = c.problem;
    REQUIRE(c.keep_mask.shape == Shape{p.B, p.h, p.n, p.m});
    const DropoutMask mask(*p.dropout);
    std::size_t k = 0, bad = 0;
    for (std::size_t b = 0; b < p.B; ++b)
      for (std::size_t hd = 0; hd < p.h; ++hd)
        for (std::size_t i = 0; i < p.n; ++i)
          for (std::size_t j = 0; j < p.m; ++j, ++k)
            if (mask.keeps(b, hd, i, j) != (c.keep_mask.values[k] == 1) && ++bad <= max_reported)
              FAIL_CHECK(fmt::format("{}: entry ({}, {}, {}, {}): ours {}, make_extras.py's {}", c.name, b, hd, i, j,
                                     mask.keeps(b, hd, i, j), c.keep_mask.values[k]));
    checked += k;
  }
  CHECK(checked > 100);
}
