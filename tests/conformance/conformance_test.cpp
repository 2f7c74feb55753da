// Conformance: both engines against PyTorch. Every file of tests/conformance/golden holds an input in
// our format and the q, k, v, weights and output that PyTorch computed for it in float64
// (make_golden.py: nn.MultiheadAttention where it applies, plain tensor ops otherwise, and
// docs/input-format.md's zero policy for rows with nothing to attend). The test reads only the committed
// JSON, so it needs no Python.

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

#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"
#include "tensor/half.hpp"

using namespace attn;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// float64 runs the same equations as PyTorch in the same precision; only the order of the sums
// differs, a few ulps (~1e-16) per operation on values of order 1.
constexpr double float64_tol = 1e-12;
// float32 rounds every input to 24 bits (relative 6e-8) and sums up to 16 products and 12
// exponentials in float32, so values of order 1 land a few 1e-7 from the float64 truth; 1e-5 leaves
// room for that and still catches any real error (a wrong head, mask or scale moves values by 1e-2).
constexpr double float32_tol = 1e-5;

constexpr std::size_t min_cases = 25;
constexpr std::size_t max_reported = 5;  // mismatches printed per tensor; the rest are counted

const std::vector<std::pair<Step, std::string>> golden_steps = {
    {Step::q, "q"}, {Step::k, "k"}, {Step::v, "v"}, {Step::weights, "weights"}, {Step::output, "output"}};

// A nested JSON list of numbers, flattened row-major, with its shape.
struct Expected {
  Shape shape;
  std::vector<double> values;
};

void flatten(const json& j, std::size_t depth, Expected& out, const std::string& where) {
  if (j.is_number()) {
    if (depth != out.shape.size()) throw std::runtime_error(fmt::format("{}: a number at depth {}", where, depth));
    out.values.push_back(j.get<double>());
    return;
  }
  if (!j.is_array() || j.empty()) throw std::runtime_error(fmt::format("{}: expected a non-empty list", where));
  if (depth == out.shape.size()) out.shape.push_back(j.size());
  else if (out.shape[depth] != j.size())
    throw std::runtime_error(
        fmt::format("{}: ragged list at depth {} ({} vs {})", where, depth, j.size(), out.shape[depth]));
  for (const json& item : j) flatten(item, depth + 1, out, where);
}

struct Golden {
  std::string name;
  std::string what;
  std::string how;
  std::string file;
  Problem problem;
  std::map<Step, Expected> expected;
};

fs::path golden_dir() { return fs::path(ATTN_SOURCE_DIR) / "tests" / "conformance" / "golden"; }

Golden read_golden(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str());
  Golden g;
  g.file = path.filename().string();
  g.name = doc.at("name").get<std::string>();
  g.what = doc.at("what").get<std::string>();
  g.how = doc.at("how").get<std::string>();
  g.problem = load_problem(doc.at("input").dump(), g.file);
  for (const auto& [step, key] : golden_steps) {
    Expected e;
    flatten(doc.at("expected").at(key), 0, e, fmt::format("{}: expected.{}", g.file, key));
    g.expected.emplace(step, std::move(e));
  }
  return g;
}

// Every golden case, read once, in file-name order.
const std::vector<Golden>& goldens() {
  static const std::vector<Golden> all = [] {
    std::vector<fs::path> paths;
    for (const auto& entry : fs::directory_iterator(golden_dir()))
      if (entry.is_regular_file() && entry.path().extension() == ".json") paths.push_back(entry.path());
    std::sort(paths.begin(), paths.end());
    std::vector<Golden> cases;
    for (const auto& path : paths) cases.push_back(read_golden(path));
    return cases;
  }();
  return all;
}

// Keeps the steps of `steps` that an engine reports, in double (exact for float values too).
class Recorder final : public Observer {
 public:
  explicit Recorder(const std::vector<std::pair<Step, std::string>>& steps = golden_steps) : steps_(steps) {}
  bool wants(Step step) const override {
    return std::any_of(steps_.begin(), steps_.end(), [&](const auto& s) { return s.first == step; });
  }
  void on(Step step, const Tensor<float>& value) override { values_.insert_or_assign(step, cast<double>(value)); }
  void on(Step step, const Tensor<double>& value) override { values_.insert_or_assign(step, value); }
  const Tensor<double>* find(Step step) const {
    const auto it = values_.find(step);
    return it == values_.end() ? nullptr : &it->second;
  }

 private:
  const std::vector<std::pair<Step, std::string>>& steps_;
  std::map<Step, Tensor<double>> values_;
};

std::string index_of(const Shape& shape, std::size_t at) {
  std::vector<std::size_t> index(shape.size());
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    index[axis] = at % shape[axis];
    at /= shape[axis];
  }
  return fmt::format("[{}]", fmt::join(index, ", "));
}

// Whether the engine reported the step, in the golden's shape (a failed check saying which when not). The
// engines hold a batch axis even for a single sequence; the goldens have it only for a batch.
bool reported_in_shape(const std::string& name, bool batched, const std::string& run, const std::string& step_name,
                       const Tensor<double>* got, const Shape& want) {
  if (got == nullptr) {
    FAIL_CHECK(fmt::format("{}: {}: step {} was never reported", name, run, step_name));
    return false;
  }
  Shape shape = got->shape();
  if (!batched && !shape.empty() && shape.front() == 1) shape.erase(shape.begin());
  if (shape != want) {
    FAIL_CHECK(fmt::format("{}: {}: step {} has shape [{}], PyTorch's has [{}]", name, run, step_name,
                           fmt::join(shape, ", "), fmt::join(want, ", ")));
    return false;
  }
  return true;
}

// One engine's step against PyTorch's: |got - want| <= tol · max(1, |want|) everywhere. The engines
// hold a batch axis even for a single sequence; the goldens have it only for a batch.
void check_step(const Golden& g, const std::string& run, Step step, const std::string& step_name,
                const Tensor<double>* got, double tol) {
  const Expected& want = g.expected.at(step);
  if (!reported_in_shape(g.name, g.problem.batched, run, step_name, got, want.shape)) return;
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t at = 0; at < want.values.size(); ++at) {
    const double a = got->values()[at], e = want.values[at];
    const double err = std::abs(a - e) / std::max(1.0, std::abs(e));
    if (err <= tol) continue;  // a NaN fails here too
    worst = std::isnan(err) ? err : std::max(worst, err);
    if (++bad <= max_reported)
      FAIL_CHECK(fmt::format("{}: {}: step {} at {}: got {}, PyTorch {} (error {:.3g} > tolerance {:g})", g.name, run,
                             step_name, index_of(want.shape, at), a, e, err, tol));
  }
  if (bad > max_reported)
    FAIL_CHECK(fmt::format("{}: {}: step {}: {} more mismatches (worst error {:.3g})", g.name, run, step_name,
                           bad - max_reported, worst));
}

// The rows PyTorch leaves with nothing to attend are those whose weights are zero in every head (the
// goldens record the zero policy there); the engine must report exactly those as empty.
void check_empty_rows(const Golden& g, const std::string& run, const std::vector<EmptyRow>& reported) {
  const Problem& p = g.problem;
  const Expected& w = g.expected.at(Step::weights);  // ([B,] h, n, m)
  std::vector<EmptyRow> want;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      bool all_zero = true;
      for (std::size_t hd = 0; hd < p.h && all_zero; ++hd)
        for (std::size_t j = 0; j < p.m && all_zero; ++j)
          all_zero = w.values[((b * p.h + hd) * p.n + i) * p.m + j] == 0.0;
      if (all_zero) want.push_back({b, i});
    }
  const auto show = [](const std::vector<EmptyRow>& rows) {
    std::vector<std::string> parts;
    for (const auto& r : rows) parts.push_back(fmt::format("({}, {})", r.batch, r.query));
    return fmt::format("[{}]", fmt::join(parts, ", "));
  };
  if (reported != want)
    FAIL_CHECK(fmt::format("{}: {}: empty rows (batch, query) {}, PyTorch's zero rows {}", g.name, run, show(reported),
                           show(want)));
}

template <class T>
constexpr const char* dtype_name() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

template <class T>
void check_naive(const Golden& g, double tol) {
  const std::string run = fmt::format("naive {}", dtype_name<T>());
  Recorder rec;
  const AttentionResult<T> result = run_naive<T>(g.problem, rec);
  for (const auto& [step, name] : golden_steps) check_step(g, run, step, name, rec.find(step), tol);
  check_empty_rows(g, run, result.empty_rows);
}

// Flash never forms the weights; it is held to q, k, v and output, for the default tiles, tiles that
// divide nothing evenly, single-element tiles and one tile covering everything.
template <class T>
void check_flash(const Golden& g, double tol) {
  const Problem& p = g.problem;
  for (const TileSize tiles : {default_tiles(p.n, p.m), TileSize{3, 2}, TileSize{1, 1}, TileSize{64, 64}}) {
    const std::string run = fmt::format("flash {} Br={} Bc={}", dtype_name<T>(), tiles.Br, tiles.Bc);
    Recorder rec;
    const AttentionResult<T> result = run_flash<T>(p, rec, tiles);
    for (const auto& [step, name] : golden_steps)
      if (step != Step::weights) check_step(g, run, step, name, rec.find(step), tol);
    check_empty_rows(g, run, result.empty_rows);
  }
}

template <class F>
void for_every_golden(F check) {
  const auto& cases = goldens();
  REQUIRE(cases.size() >= min_cases);
  for (const Golden& g : cases) check(g);
}

}  // namespace

TEST_CASE("The golden folder holds at least 25 PyTorch cases, each named after its file", "[conformance]") {
  INFO("golden folder: " << golden_dir().string()
                         << " (regenerate: /usr/bin/python3 tests/conformance/make_golden.py)");
  const auto& cases = goldens();
  CHECK(cases.size() >= min_cases);
  for (const Golden& g : cases) {
    INFO("case " << g.file);
    CHECK(g.file == g.name + ".json");
    CHECK_FALSE(g.what.empty());
    CHECK_FALSE(g.how.empty());
  }
}

TEST_CASE("Naive attention in float64 matches PyTorch on every golden case", "[conformance][naive]") {
  for_every_golden([](const Golden& g) { check_naive<double>(g, float64_tol); });
}

TEST_CASE("Naive attention in float32 matches PyTorch on every golden case", "[conformance][naive]") {
  for_every_golden([](const Golden& g) { check_naive<float>(g, float32_tol); });
}

TEST_CASE("Flash attention in float64 matches PyTorch on every golden case and tile size", "[conformance][flash]") {
  for_every_golden([](const Golden& g) { check_flash<double>(g, float64_tol); });
}

TEST_CASE("Flash attention in float32 matches PyTorch on every golden case and tile size", "[conformance][flash]") {
  for_every_golden([](const Golden& g) { check_flash<float>(g, float32_tol); });
}

// ------------------------------------------------------------------ float16 and bfloat16
//
// tests/conformance/golden_half holds every bundled input of data/ with the steps PyTorch stores for it in
// float16 and bfloat16 (make_golden.py, half_golden: half inputs, float32 sums rounded once per step,
// softmax in float32). The allowance, in the half type (README.md, "Half precision"):
//   - naive, every step, and flash's q, k and v: 1 ULP. Both sides run the same operations on the same
//     stored inputs and differ only in the order of float32 sums (at most d·2^-24 relative, a 2^-13·d
//     part of a float16 ULP), which can put two results on either side of one rounding boundary.
//   - flash's head_outputs and output: flash rounds the unnormalised P and divides once by the unrounded
//     l, where PyTorch (and naive) round each normalised weight. Either way a weight is off by at most u
//     of the half type, relatively, so the two sums Σ_j a_j·v_jc differ by at most 2·u·Σ_j a_j·|v_jc|
//     before each is rounded once more (half an ULP each: 1 ULP of the larger); the output projection
//     carries that through |W_o| and rounds once more (1 ULP). Both bounds are computed value by value
//     from PyTorch's weights and values, with 2^-20 of the magnitudes for float32's own sums.

namespace {

const std::vector<std::pair<Step, std::string>> half_steps = {{Step::q, "q"},
                                                              {Step::k, "k"},
                                                              {Step::v, "v"},
                                                              {Step::scores, "scores"},
                                                              {Step::scaled, "scaled"},
                                                              {Step::weights, "weights"},
                                                              {Step::head_outputs, "head_outputs"},
                                                              {Step::output, "output"}};

struct HalfGolden {
  std::string name;
  std::string file;
  Problem problem;
  std::map<std::string, std::map<Step, Expected>> expected;  // by dtype name
};

fs::path half_golden_dir() { return fs::path(ATTN_SOURCE_DIR) / "tests" / "conformance" / "golden_half"; }

const std::vector<HalfGolden>& half_goldens() {
  static const std::vector<HalfGolden> all = [] {
    std::vector<fs::path> paths;
    for (const auto& entry : fs::directory_iterator(half_golden_dir()))
      if (entry.is_regular_file() && entry.path().extension() == ".json") paths.push_back(entry.path());
    std::sort(paths.begin(), paths.end());
    std::vector<HalfGolden> cases;
    for (const auto& path : paths) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      const json doc = json::parse(text.str());
      HalfGolden g{doc.at("name").get<std::string>(),
                   path.filename().string(),
                   load_problem(doc.at("input").dump(), path.filename().string()),
                   {}};
      for (const std::string dtype : {"float16", "bfloat16"})
        for (const auto& [step, key] : half_steps) {
          Expected e;
          flatten(doc.at("expected").at(dtype).at(key), 0, e, fmt::format("{}: expected.{}.{}", g.file, dtype, key));
          g.expected[dtype].emplace(step, std::move(e));
        }
      cases.push_back(std::move(g));
    }
    return cases;
  }();
  return all;
}

std::uint16_t half_bits(double x, DType dtype) {
  return dtype == DType::float16 ? float_to_float16(static_cast<float>(x)) : float_to_bfloat16(static_cast<float>(x));
}
double half_value(std::uint16_t bits, DType dtype) {
  return dtype == DType::float16 ? float16_to_float(bits) : bfloat16_to_float(bits);
}

// The gap from |x| (a value of the half type) to the next one up: its ULP.
double half_ulp(double x, DType dtype) {
  const std::uint16_t bits = half_bits(std::fabs(x), dtype);
  return half_value(static_cast<std::uint16_t>(bits + 1), dtype) - half_value(bits, dtype);
}

// Position on the line of the half type's values (neighbours 1 apart, -0 and +0 both at 0).
std::int64_t half_position(double x, DType dtype) {
  const std::uint16_t bits = half_bits(x, dtype);
  const std::int64_t magnitude = bits & 0x7FFF;
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

// One step of a half run against PyTorch's. `allowed(at, got, want)` is the largest |got - want| the
// allowance above leaves at flat position `at`.
template <class Allowed>
void check_half_step(const HalfGolden& g, const std::string& run, DType dtype, Step step, const std::string& step_name,
                     const Tensor<double>* got, Allowed allowed) {
  const Expected& want = g.expected.at(std::string(name_of(dtype))).at(step);
  if (!reported_in_shape(g.name, g.problem.batched, run, step_name, got, want.shape)) return;
  std::size_t bad = 0;
  for (std::size_t at = 0; at < want.values.size(); ++at) {
    const double a = got->values()[at], e = want.values[at];
    if (a == e) continue;  // -inf of a masked score too
    // Within half an ULP of PyTorch's would pass below: first, the step must be stored in the half type.
    if (half_value(half_bits(a, dtype), dtype) != a && ++bad <= max_reported) {
      FAIL_CHECK(fmt::format("{}: {}: step {} at {}: got {}, which is not a {} value", g.name, run, step_name,
                             index_of(want.shape, at), a, name_of(dtype)));
      continue;
    }
    const double limit = allowed(at, a, e);
    if (std::fabs(a - e) <= limit) continue;  // a NaN fails here
    if (++bad <= max_reported)
      FAIL_CHECK(fmt::format("{}: {}: step {} at {}: got {}, PyTorch {} ({} {} ULPs apart; allowed {:.3g})", g.name,
                             run, step_name, index_of(want.shape, at), a, e,
                             std::abs(half_position(a, dtype) - half_position(e, dtype)), name_of(dtype), limit));
  }
  if (bad > max_reported)
    FAIL_CHECK(fmt::format("{}: {}: step {}: {} more mismatches", g.name, run, step_name, bad - max_reported));
}

// The allowance of flash's head outputs, (B, h, n, d_v) flat: 2·u·Σ_j a_j·|v_jc| (plus 2^-20 of it for
// float32's sums), from PyTorch's weights and values.
std::vector<double> flash_head_output_allowance(const HalfGolden& g, DType dtype) {
  const Problem& p = g.problem;
  const auto& e = g.expected.at(std::string(name_of(dtype)));
  const std::vector<double>& A = e.at(Step::weights).values;  // (B, h, n, m)
  const std::vector<double>& v = e.at(Step::v).values;        // (B, m, g·d_v)
  const double u = unit_roundoff(dtype);
  std::vector<double> out(p.B * p.h * p.n * p.d_v, 0.0);
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd) {
      const std::size_t kv = kv_head_of(hd, p.h, p.g);
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t c = 0; c < p.d_v; ++c) {
          double sum = 0;
          for (std::size_t j = 0; j < p.m; ++j)
            sum +=
                A[((b * p.h + hd) * p.n + i) * p.m + j] * std::fabs(v[(b * p.m + j) * (p.g * p.d_v) + kv * p.d_v + c]);
          out[((b * p.h + hd) * p.n + i) * p.d_v + c] = (2 * u + 0x1p-20) * sum;
        }
    }
  return out;
}

void check_half(const HalfGolden& g, DType dtype) {
  const Problem& p = g.problem;
  const auto one_ulp = [dtype](std::size_t, double a, double e) {
    return half_ulp(std::max(std::fabs(a), std::fabs(e)), dtype);
  };
  {
    const std::string run = fmt::format("naive {}", name_of(dtype));
    Recorder rec(half_steps);
    run_naive<float>(p, rec, dtype);
    for (const auto& [step, name] : half_steps) check_half_step(g, run, dtype, step, name, rec.find(step), one_ulp);
  }
  // flash: head outputs within their bound and one ULP for the two roundings; the output within
  // Σ_c |W_o[c][k]| times the head outputs' bound, and one ULP more.
  const std::vector<double> d_o = flash_head_output_allowance(g, dtype);
  const std::vector<double>& o = g.expected.at(std::string(name_of(dtype))).at(Step::head_outputs).values;
  std::vector<double> d_y(p.B * p.n * p.d_out, 0.0);  // (B, n, d_out), the engines' flat order
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i)
      for (std::size_t hd = 0; hd < p.h; ++hd)
        for (std::size_t c = 0; c < p.d_v; ++c) {
          const std::size_t at = ((b * p.h + hd) * p.n + i) * p.d_v + c;
          if (!p.has_output_projection()) {  // the output is the concatenation itself
            d_y[(b * p.n + i) * p.d_out + hd * p.d_v + c] = d_o[at];
            continue;
          }
          // a stored head output is within d_o and one ULP of the larger value: two of PyTorch's at most
          const double stored = d_o[at] + 2 * half_ulp(o[at], dtype);
          for (std::size_t k = 0; k < p.d_out; ++k)
            d_y[(b * p.n + i) * p.d_out + k] += std::fabs(p.W_o(hd * p.d_v + c, k)) * stored;
        }
  for (const TileSize tiles : {default_tiles(p.n, p.m), TileSize{3, 2}, TileSize{1, 1}, TileSize{64, 64}}) {
    const std::string run = fmt::format("flash {} Br={} Bc={}", name_of(dtype), tiles.Br, tiles.Bc);
    Recorder rec(half_steps);
    run_flash<float>(p, rec, tiles, dtype);
    for (const Step step : {Step::q, Step::k, Step::v})
      check_half_step(g, run, dtype, step, std::string(step_info(step).name), rec.find(step), one_ulp);
    check_half_step(g, run, dtype, Step::head_outputs, "head_outputs", rec.find(Step::head_outputs),
                    [&](std::size_t at, double a, double e) { return d_o[at] + one_ulp(at, a, e); });
    check_half_step(g, run, dtype, Step::output, "output", rec.find(Step::output),
                    [&](std::size_t at, double a, double e) { return d_y[at] + one_ulp(at, a, e); });
  }
}

}  // namespace

TEST_CASE("Naive and flash in float16 and bfloat16 agree with PyTorch's half-precision steps on every bundled input",
          "[conformance][half]") {
  const auto& cases = half_goldens();
  REQUIRE(cases.size() >= 10);
  for (const HalfGolden& g : cases)
    for (const DType dtype : {DType::float16, DType::bfloat16}) check_half(g, dtype);
}
