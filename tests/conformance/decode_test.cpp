// Conformance of decoding: the decode engine against PyTorch. Every file of tests/conformance/golden_decode
// holds a causal input, a prompt, a split, and what make_decode.py computed with PyTorch in float64 for every
// decode step from the definitions (the cache filled token by token, RoPE at each token's position, GQA by
// repeat_interleave, flash-decoding's chunks by torch.logsumexp and their merge), independently of attn-trace.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/decoder.hpp"
#include "io/load.hpp"

using namespace attn;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The tolerance, per value: |got - want| <= tol · max(1, |want|).
// float64: the same equations in the same precision; only the order of the sums, libm's exp, log, cos and
// sin, and (split) torch.logsumexp's order differ, by an ulp or so each (~1e-16 relative); 1e-12 leaves four
// orders of room. float32: every input and table entry is rounded to 24 bits and every sum, exp and log is
// done in float32, about (d + 8)·6e-8 times the magnitudes summed (under 10 here): 2e-5 is the bound, and a
// wrong position, head or chunk moves values by 1e-2 or more.
constexpr double float64_tol = 1e-12;
constexpr double float32_tol = 2e-5;

struct Expected {
  Shape shape;
  std::vector<double> values;
};

void flatten(const json& j, std::size_t depth, Expected& out) {
  if (depth == out.shape.size() && j.is_array()) out.shape.push_back(j.size());
  if (j.is_string()) {  // "-inf": an empty chunk's log-sum-exp; nothing else is written as text
    REQUIRE(j == "-inf");
    out.values.push_back(-std::numeric_limits<double>::infinity());
    return;
  }
  if (j.is_number()) {
    out.values.push_back(j.get<double>());
    return;
  }
  for (const json& item : j) flatten(item, depth + 1, out);
}

struct Golden {
  std::string name;
  Problem problem;
  DecodePlan plan;
  std::vector<std::map<std::string, Expected>> steps;  // by decode step, by name
  std::vector<std::size_t> positions;
};

std::vector<Golden> goldens() {
  std::vector<Golden> out;
  for (const auto& entry : fs::directory_iterator(fs::path(ATTN_SOURCE_DIR) / "tests/conformance/golden_decode")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const json doc = json::parse(text.str());
    Golden g{doc.at("name"),
             load_problem(doc.at("input").dump(), entry.path().string()),
             DecodePlan{.prompt = doc.at("prompt"), .split = doc.at("split")},
             {},
             {}};
    for (const json& step : doc.at("steps")) {
      std::map<std::string, Expected> values;
      for (const auto& [name, value] : step.items()) {
        if (name == "position") continue;
        Expected e;
        flatten(value, 0, e);
        values[name] = std::move(e);
      }
      g.positions.push_back(step.at("position"));
      g.steps.push_back(std::move(values));
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const Golden& a, const Golden& b) { return a.name < b.name; });
  return out;
}

// Keeps what each decode step reports, by the golden's names.
class Recorder final : public DecodeObserver, public Observer {
 public:
  Observer& prefill(const Problem&) override { return none_; }
  Observer& step(std::size_t position, const Problem&, const Problem&) override {
    positions.push_back(position);
    steps.emplace_back();
    return *this;
  }
  bool wants(Step) const override { return true; }
  void on(Step step, const Tensor<float>& value) override { keep(step, cast<double>(value)); }
  void on(Step step, const Tensor<double>& value) override { keep(step, value); }
  void on_step(const DecodeStepEvent<float>& e) override { event(e); }
  void on_step(const DecodeStepEvent<double>& e) override { event(e); }

  std::vector<std::size_t> positions;
  std::vector<std::map<std::string, Tensor<double>>> steps;

 private:
  void keep(Step step, Tensor<double> value) {
    for (const Step s : {Step::scores, Step::weights, Step::head_outputs, Step::output})
      if (s == step) steps.back()[std::string(step_info(s).name)] = std::move(value);
  }
  template <class T>
  void event(const DecodeStepEvent<T>& e) {
    steps.back()["k_cache"] = cast<double>(e.k_cache);
    if (e.split) steps.back()["chunk_lse"] = cast<double>(e.split->lse);
  }
  NullObserver none_;
};

std::vector<std::string> mismatches(const Tensor<double>& got, const Expected& want, double tol) {
  std::vector<std::string> out;
  if (got.shape() != want.shape) {
    out.push_back(fmt::format("shape [{}], PyTorch [{}]", fmt::join(got.shape(), ", "), fmt::join(want.shape, ", ")));
    return out;
  }
  for (std::size_t k = 0; k < want.values.size() && out.size() < 5; ++k) {
    const double g = got.values()[k], w = want.values[k];
    if (std::isinf(w) ? g == w : std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w))) continue;
    out.push_back(fmt::format("at [{}]: got {}, PyTorch {} (error {:.3g} > tolerance {})",
                              fmt::join(unravel_index(k, want.shape), ", "), g, w, std::fabs(g - w), tol));
  }
  return out;
}

template <class T>
void check_decode(const Golden& g, double tol, std::size_t page_size) {
  Recorder rec;
  DecodePlan plan = g.plan;
  plan.page_size = page_size;
  (void)run_decode<T>(g.problem, plan, rec);
  const std::string run = fmt::format("{}: decode {}{}", g.name, sizeof(T) == 4 ? "float32" : "float64",
                                      page_size ? fmt::format(", pages of {}", page_size) : "");
  INFO(run);
  REQUIRE(rec.positions == g.positions);
  for (std::size_t k = 0; k < g.steps.size(); ++k)
    for (const auto& [name, want] : g.steps[k]) {
      INFO(fmt::format("decode step at position {}: {}", g.positions[k], name));
      REQUIRE(rec.steps[k].count(name) == 1);
      const std::vector<std::string> bad = mismatches(rec.steps[k].at(name), want, tol);
      INFO(fmt::format("{}", fmt::join(bad, "\n")));
      CHECK(bad.empty());
    }
}

}  // namespace

TEST_CASE("Decoding fills the cache and attends as PyTorch does, split and merged as flash-decoding, paged or not",
          "[conformance][decode]") {
  const std::vector<Golden> all = goldens();
  REQUIRE(all.size() >= 8);
  std::size_t split = 0, unsplit = 0;
  for (const Golden& g : all) {
    (g.plan.split > 1 ? split : unsplit) += 1;
    for (const std::size_t page : {0, 1, 3}) {
      check_decode<double>(g, float64_tol, page);
      check_decode<float>(g, float32_tol, page);
    }
  }
  CHECK(split >= 4);
  CHECK(unsplit >= 3);
}
