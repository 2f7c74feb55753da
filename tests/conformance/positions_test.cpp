// Conformance of RoPE and ALiBi: both engines against NumPy. Every file of
// tests/conformance/golden_positions holds an input with "rope" and/or "alibi" and the q_rot, k_rot, bias,
// weights and output that make_positions.py computed for it in float64 from the published formulas
// (Hugging Face's rotate_half, RoFormer's complex pairs, GPT-NeoX's partial rotary, the ALiBi paper's
// reference slopes), written out independently of attn-trace's code.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"

using namespace attn;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The tolerance, per value: |got - want| <= tol · max(1, |want|).
// float64: the same equations in the same precision, only the order of the sums and libm's cos, sin
// and pow differ by an ulp or so (~1e-16 relative); 1e-12 leaves four orders of room.
// float32: every input and every entry of the cos/sin table is rounded to 24 bits (6e-8 relative), a
// turned feature is two products and a sum, a score at most 6 products and a sum plus the bias, the
// softmax 7 exponentials: each value lands within about (d_k + 4)·6e-8 times the magnitudes it sums
// (at most 20 here), under 1.2e-5; 2e-5 is the bound, and a wrong angle, pair or slope moves values by
// 1e-2 or more.
constexpr double float64_tol = 1e-12;
constexpr double float32_tol = 2e-5;

fs::path golden_dir() { return fs::path(ATTN_SOURCE_DIR) / "tests" / "conformance" / "golden_positions"; }

struct Expected {
  Shape shape;
  std::vector<double> values;
};

void flatten(const json& j, std::size_t depth, Expected& out) {
  if (j.is_number()) {
    out.values.push_back(j.get<double>());
    return;
  }
  if (depth == out.shape.size()) out.shape.push_back(j.size());
  for (const json& item : j) flatten(item, depth + 1, out);
}

struct Golden {
  std::string name;
  Problem problem;
  std::map<Step, Expected> expected;
};

std::vector<Golden> goldens() {
  std::vector<Golden> out;
  for (const auto& entry : fs::directory_iterator(golden_dir())) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const json doc = json::parse(text.str());
    Golden g{doc.at("name").get<std::string>(), load_problem(doc.at("input").dump(), entry.path().string()), {}};
    for (const auto& [name, values] : doc.at("expected").items()) {
      Expected e;
      flatten(values, 0, e);
      g.expected[*step_from_name(name)] = std::move(e);
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const Golden& a, const Golden& b) { return a.name < b.name; });
  return out;
}

// Keeps every step an engine reports, with its batch axis, in double.
class Recorder final : public Observer {
 public:
  bool wants(Step) const override { return true; }
  void on(Step step, const Tensor<float>& value) override { steps[step] = cast<double>(value); }
  void on(Step step, const Tensor<double>& value) override { steps[step] = value; }
  std::map<Step, Tensor<double>> steps;
};

// The mismatches of `got` against `want`, one line each (at most 5), for the failure message.
std::vector<std::string> mismatches(const Tensor<double>& got, const Expected& want, double tol) {
  std::vector<std::string> out;
  if (got.shape() != want.shape) {
    out.push_back(fmt::format("shape [{}], NumPy [{}]", fmt::join(got.shape(), ", "), fmt::join(want.shape, ", ")));
    return out;
  }
  for (std::size_t k = 0; k < want.values.size() && out.size() < 5; ++k) {
    const double g = got.values()[k], w = want.values[k];
    if (std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w))) continue;
    out.push_back(fmt::format("at [{}]: got {}, NumPy {} (error {:.3g} > tolerance {})",
                              fmt::join(unravel_index(k, want.shape), ", "), g, w, std::fabs(g - w), tol));
  }
  return out;
}

template <class T>
void check_run(const Golden& g, bool flash, TileSize tiles, double tol) {
  Recorder rec;
  if (flash) run_flash<T>(g.problem, rec, tiles);
  else run_naive<T>(g.problem, rec);
  const std::string run =
      fmt::format("{}: {} {}{}", g.name, flash ? "flash" : "naive", sizeof(T) == 4 ? "float32" : "float64",
                  flash ? fmt::format(" Br={} Bc={}", tiles.Br, tiles.Bc) : "");
  for (const auto& [step, want] : g.expected) {
    if (flash && is_score_step(step)) continue;  // flash never forms them whole
    INFO(run << ": step " << step_info(step).name);
    REQUIRE(rec.steps.count(step) == 1);
    const std::vector<std::string> bad = mismatches(rec.steps.at(step), want, tol);
    INFO(fmt::format("{}", fmt::join(bad, "\n")));
    CHECK(bad.empty());
  }
}

}  // namespace

TEST_CASE("Both engines turn q and k and bias the scores as NumPy's RoPE and ALiBi do, in float32 and float64",
          "[conformance][rope][alibi]") {
  const std::vector<Golden> all = goldens();
  REQUIRE(all.size() >= 9);
  for (const Golden& g : all) {
    check_run<double>(g, false, {}, float64_tol);
    check_run<float>(g, false, {}, float32_tol);
    for (const TileSize tiles :
         {default_tiles(g.problem.n, g.problem.m), TileSize{1, 1}, TileSize{3, 2}, TileSize{64, 64}}) {
      check_run<double>(g, true, tiles, float64_tol);
      check_run<float>(g, true, tiles, float32_tol);
    }
  }
}

TEST_CASE("The golden cases cover both RoPE styles, partial rotary, offset positions and ALiBi with 6 heads",
          "[conformance][rope][alibi]") {
  bool half = false, interleaved = false, partial = false, offset = false, six = false, explicit_slopes = false;
  for (const Golden& g : goldens()) {
    const Problem& p = g.problem;
    if (p.rope) {
      half = half || p.rope->style == RopeStyle::half;
      interleaved = interleaved || p.rope->style == RopeStyle::interleaved;
      partial = partial || p.rope->dims < p.d_k;
      offset = offset || p.rope->positions.front() > 0;
    }
    if (p.alibi) {
      six = six || (p.h == 6 && p.alibi->standard);
      explicit_slopes = explicit_slopes || !p.alibi->standard;
    }
  }
  CHECK(half);
  CHECK(interleaved);
  CHECK(partial);
  CHECK(offset);
  CHECK(six);
  CHECK(explicit_slopes);
}
