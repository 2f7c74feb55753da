// The JSON trace read back (docs/trace-format.md, "Numbers"): every value comes back bit for bit, in float32
// and float64, over seeded random inputs whose values span 1e-30 to 1e30 with subnormals and negative
// zero; -inf, inf and nan travel as strings; float32 values are written in their shortest form; and
// a trace of another format or a newer version is refused with the JSON Pointer of the culprit.

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/naive.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "json/error.hpp"
#include "trace/collector.hpp"

using namespace attn;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
const std::string generator = "attn-trace test";

// ---- random values of wildly different magnitudes ---------------------------------------------

// One value of type T: ordinary, huge or tiny (1e-30..1e30), subnormal, signed zero, or a limit.
template <class T>
T wild_value(std::mt19937& rng) {
  using limits = std::numeric_limits<T>;
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_real_distribution<double> exponent(-30.0, 30.0);
  const double sign = rng() % 2 == 0 ? 1.0 : -1.0;
  switch (rng() % 8) {
    case 0: return static_cast<T>(unit(rng) * 10);
    case 1:
    case 2: return static_cast<T>(sign * std::pow(10.0, exponent(rng)));
    case 3: return static_cast<T>(sign * limits::denorm_min() * static_cast<T>(1 + rng() % 1000));  // subnormal
    case 4: return static_cast<T>(sign * 0.0);                                                      // ±0
    case 5:
      return std::bit_cast<T>(static_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(
          rng() % 2 == 0 ? std::uint64_t{rng()} : (std::uint64_t{rng()} << 32 | rng())));  // any bits
    case 6: {
      const T special[] = {limits::max(), limits::lowest(), limits::min(), limits::epsilon(), T(0.1), T(1) / T(3)};
      return special[rng() % std::size(special)];
    }
    default: return static_cast<T>(sign * std::ldexp(unit(rng), static_cast<int>(rng() % 200) - 100));
  }
}

// A finite wild value (arbitrary bits may be inf or nan; the input format refuses those).
template <class T>
T finite_wild_value(std::mt19937& rng) {
  for (;;) {
    const T x = wild_value<T>(rng);
    if (std::isfinite(x)) return x;
  }
}

// A JSON number that the loader reads back as exactly `x` (negative zero included).
std::string json_number(double x) {
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  return fmt::format("{:.17g}", x);
}

std::string json_matrix(std::mt19937& rng, std::size_t rows, std::size_t cols, bool float32) {
  std::vector<std::string> out;
  for (std::size_t r = 0; r < rows; ++r) {
    std::vector<std::string> row;
    for (std::size_t c = 0; c < cols; ++c)
      row.push_back(
          json_number(float32 ? static_cast<double>(finite_wild_value<float>(rng)) : finite_wild_value<double>(rng)));
    out.push_back(fmt::format("[{}]", fmt::join(row, ", ")));
  }
  return fmt::format("[{}]", fmt::join(out, ", "));
}

// An input (docs/input-format.md) of random sizes and wild values: maybe a batch, several heads, GQA, W_o,
// biases and a causal mask (so that the masked step holds -inf).
std::string random_input(std::mt19937& rng, bool float32) {
  const auto pick = [&rng](std::size_t lo, std::size_t hi) { return lo + rng() % (hi - lo + 1); };
  const std::size_t B = pick(1, 2), n = pick(1, 4), d_model = pick(1, 4), g = pick(1, 2), h = g * pick(1, 2);
  const std::size_t d_k = pick(1, 3), d_v = pick(1, 3), d_out = pick(1, 3);
  std::string X;
  if (B == 1) X = json_matrix(rng, n, d_model, float32);
  else {
    std::vector<std::string> items;
    for (std::size_t b = 0; b < B; ++b) items.push_back(json_matrix(rng, n, d_model, float32));
    X = fmt::format("[{}]", fmt::join(items, ", "));
  }
  const auto bias = [&](std::size_t width) {
    const std::string m = json_matrix(rng, 1, width, float32);
    return m.substr(1, m.size() - 2);
  };
  std::string text =
      fmt::format(R"({{"X": {}, "n_heads": {}, "n_kv_heads": {},
  "W_q": {}, "W_k": {}, "W_v": {})",
                  X, h, g, json_matrix(rng, d_model, h * d_k, float32), json_matrix(rng, d_model, g * d_k, float32),
                  json_matrix(rng, d_model, g * d_v, float32));
  if (rng() % 2 == 0)
    text += fmt::format(R"(, "W_o": {}, "b_o": {})", json_matrix(rng, h * d_v, d_out, float32), bias(d_out));
  if (rng() % 2 == 0)
    text += fmt::format(R"(, "b_q": {}, "b_k": {}, "b_v": {})", bias(h * d_k), bias(g * d_k), bias(g * d_v));
  if (rng() % 2 == 0) text += R"(, "mask": "causal")";
  if (rng() % 3 == 0) text += fmt::format(R"(, "scale": {})", json_number(finite_wild_value<float>(rng)));
  return text + "}";
}

// ---- traces ------------------------------------------------------------------------------------

template <class T>
Trace make_trace(const std::string& input, StepFilter filter = {}) {
  auto problem = std::make_shared<const Problem>(load_problem(input, "random.json"));
  TraceCollector collector(problem, sizeof(T) == 4 ? DType::float32 : DType::float64, std::move(filter));
  AttentionResult<T> result = run_naive<T>(*problem, collector);
  return std::move(collector).finish(std::move(result.empty_rows));
}

// Every value of every step replaced by a wild value of T, so that each kind of number is written.
template <class T>
void fill_wild(Trace& trace, std::mt19937& rng) {
  for (StepRecord& s : trace.steps)
    for (double& x : s.value.values()) x = static_cast<double>(wild_value<T>(rng));
}

std::string bits(double x) { return fmt::format("{} (bits {:#018x})", x, std::bit_cast<std::uint64_t>(x)); }

// The same value, bit for bit; any NaN stands for any NaN (the trace writes "nan", not a payload).
bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// Counts the values that did not come back bit for bit; reports the first few of a trace (what, flat
// index, both values) through `reported`.
std::size_t check_bits(const std::string& what, std::span<const double> written, std::span<const double> read,
                       std::size_t& reported) {
  REQUIRE(written.size() == read.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < written.size(); ++i) {
    if (same_bits(written[i], read[i])) continue;
    ++mismatches;
    if (++reported <= 3)
      FAIL_CHECK(fmt::format("{} [{}]: wrote {}, read back {}", what, i, bits(written[i]), bits(read[i])));
  }
  return mismatches;
}

std::span<const double> span_of(const std::vector<double>& v) { return v; }

// `back` is `trace` written and read again: every step and input value bit for bit.
void check_read_back(const Trace& trace, const Trace& back) {
  REQUIRE(back.dtype == trace.dtype);
  REQUIRE(back.head == trace.head);
  REQUIRE(back.steps.size() == trace.steps.size());
  std::size_t mismatches = 0, reported = 0;
  for (std::size_t i = 0; i < trace.steps.size(); ++i) {
    const StepRecord& s = trace.steps[i];
    const StepRecord& r = back.steps[i];
    const std::string name(step_info(s.step).name);
    REQUIRE(r.step == s.step);
    CHECK(r.formula == s.formula);
    CHECK(r.description == s.description);
    REQUIRE(r.value.shape() == s.value.shape());
    mismatches += check_bits("step " + name, s.value.values(), r.value.values(), reported);
  }
  const Problem& p = *trace.problem;
  const Problem& q = *back.problem;
  mismatches += check_bits("input X", p.X.values(), q.X.values(), reported);
  mismatches += check_bits("input W_q", p.W_q.values(), q.W_q.values(), reported);
  mismatches += check_bits("input W_k", p.W_k.values(), q.W_k.values(), reported);
  mismatches += check_bits("input W_v", p.W_v.values(), q.W_v.values(), reported);
  mismatches += check_bits("input W_o", p.W_o.values(), q.W_o.values(), reported);
  mismatches += check_bits("input b_q", span_of(p.b_q), span_of(q.b_q), reported);
  mismatches += check_bits("input b_o", span_of(p.b_o), span_of(q.b_o), reported);
  CHECK(same_bits(p.scale, q.scale));
  INFO(mismatches << " values did not read back bit for bit");
  CHECK(mismatches == 0);
}

// "line N: A | B" for the first line where two texts differ, "" when they are the same.
std::string first_difference(const std::string& a, const std::string& b) {
  std::size_t line = 1, start = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) {
      const auto line_at = [start](const std::string& t) { return t.substr(start, t.find('\n', start) - start); };
      return fmt::format("line {}: `{}` became `{}`", line, line_at(a), line_at(b));
    }
    if (a[i] == '\n') ++line, start = i + 1;
  }
  return a.size() == b.size() ? "" : fmt::format("one text ends at line {}", line);
}

bool has_negative_zero(const Trace& t) {
  for (const StepRecord& s : t.steps)
    for (const double x : s.value.values())
      if (x == 0 && std::signbit(x)) return true;
  return false;
}

// The significant digits of a number's text: "-0.00125e+3" -> "125".
std::string significant_digits(const std::string& text) {
  std::string digits;
  for (const char c : text.substr(0, text.find_first_of("eE")))
    if (c >= '0' && c <= '9') digits += c;
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  digits.erase(digits.find_last_not_of('0') + 1);
  return digits;
}

}  // namespace

// ---- bit-exact read-back -----------------------------------------------------------------------

TEMPLATE_TEST_CASE("A float32 or float64 trace of a random input reads back bit for bit, its input included",
                   "[trace][json][property]", float, double) {
  constexpr bool float32 = sizeof(TestType) == 4;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const std::string input = random_input(rng, float32);
    INFO("seed " << seed << ", input " << input);
    const Trace trace = make_trace<TestType>(input);
    const std::string text = trace_to_json(trace, generator);
    check_read_back(trace, trace_from_json(text, "trace.json"));
  }
}

TEMPLATE_TEST_CASE(
    "Every kind of value, from 1e-30 to 1e30, subnormal, zero, the limits and any bit pattern, reads back bit for bit",
    "[trace][json][property]", float, double) {
  std::size_t negative_zeros = 0;
  for (unsigned seed = 100; seed < 140; ++seed) {
    std::mt19937 rng(seed);
    Trace trace = make_trace<TestType>(random_input(rng, sizeof(TestType) == 4));
    fill_wild<TestType>(trace, rng);
    negative_zeros += has_negative_zero(trace) ? 1 : 0;
    INFO("seed " << seed);
    check_read_back(trace, trace_from_json(trace_to_json(trace, generator), "trace.json"));
  }
  CHECK(negative_zeros > 0);  // the sweep did write -0
}

TEMPLATE_TEST_CASE("Negative zero in a step reads back as negative zero", "[trace][json]", float, double) {
  Trace trace = make_trace<TestType>(R"({"X": [[1, 0]], "W_q": [[1], [0]], "W_k": [[1], [0]], "W_v": [[1], [0]]})");
  trace.steps.at(0).value.values()[0] = -0.0;
  const Trace back = trace_from_json(trace_to_json(trace, generator), "trace.json");
  const double x = back.steps.at(0).value.values()[0];
  INFO("written as " << format_trace_number(-0.0, sizeof(TestType) == 4) << ", read back as " << bits(x));
  CHECK(x == 0);
  CHECK(std::signbit(x));
}

TEMPLATE_TEST_CASE("A trace written, read back and written again is the same text", "[trace][json]", float, double) {
  for (unsigned seed = 200; seed < 210; ++seed) {
    std::mt19937 rng(seed);
    const Trace trace = make_trace<TestType>(random_input(rng, sizeof(TestType) == 4));
    const std::string text = trace_to_json(trace, generator);
    INFO("seed " << seed);
    CHECK(first_difference(text, trace_to_json(trace_from_json(text, "trace.json"), generator)) == "");
  }
}

TEST_CASE("A trace with an empty row keeps its empty rows and warnings when read back", "[trace][json]") {
  // query 0 may see no key at all: zero weights, a warning and an empty_rows entry
  const Trace trace = make_trace<float>(R"({"X": [[1, 0], [0, 1]], "W_q": [[1], [0]], "W_k": [[1], [0]],
    "W_v": [[1], [0]], "mask": {"type": "custom", "allow": [[false, false], [true, true]]}})");
  REQUIRE(trace.empty_rows == std::vector<EmptyRow>{{0, 0}});
  REQUIRE(trace.warnings.size() == 1);
  const Trace back = trace_from_json(trace_to_json(trace, generator), "trace.json");
  CHECK(back.warnings == trace.warnings);
  CHECK(back.empty_rows == trace.empty_rows);
}

TEST_CASE("A trace of some steps of one head reads back with that head and those steps", "[trace][json]") {
  // ordinary values: this is about which steps and head come back, not about the numbers
  const std::string input = R"({"n_heads": 2, "n_kv_heads": 1, "mask": "causal",
    "X": [[0.5, -1.25, 2, 0.1], [1, 0.3, -0.7, 2.5], [-1.5, 0.25, 0.6, -2]],
    "W_q": [[0.1, 0.2, -0.3, 0.4], [0.5, -0.6, 0.7, 0.8], [-0.9, 1.1, 0.2, -0.4], [0.3, 0.6, -0.2, 0.9]],
    "W_k": [[0.2, -0.1], [0.4, 0.3], [-0.5, 0.6], [0.7, -0.8]],
    "W_v": [[1, 0.5], [-0.5, 1], [0.25, -1], [0.75, 0.125]]})";
  StepFilter filter;
  filter.only = {Step::k_heads, Step::masked, Step::weights};
  filter.head = 1;
  const Trace trace = make_trace<float>(input, filter);
  REQUIRE(trace.steps.size() == 3);
  const Trace back = trace_from_json(trace_to_json(trace, generator), "trace.json");
  CHECK(back.head == std::optional<std::size_t>(1));
  check_read_back(trace, back);
}

// ---- non-finite values -------------------------------------------------------------------------

TEMPLATE_TEST_CASE("A causal mask writes -inf in the masked step as the string \"-inf\" and reads it back",
                   "[trace][json]", float, double) {
  const Trace trace = make_trace<TestType>(R"({"mask": "causal", "X": [[1, 0], [0, 1], [1, 1]],
    "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [0, 1]]})");
  const std::string text = trace_to_json(trace, generator);
  CHECK(text.find("\"-inf\"") != std::string::npos);
  CHECK(text.find("-Infinity") == std::string::npos);
  CHECK(text.find("null", text.find("\"steps\"")) == std::string::npos);  // no value became null

  const Trace back = trace_from_json(text, "trace.json");
  const auto masked =
      std::find_if(back.steps.begin(), back.steps.end(), [](const StepRecord& s) { return s.step == Step::masked; });
  REQUIRE(masked != back.steps.end());
  // (1, 3, 3): query i sees keys 0..i, so 3 of the 9 scores are hidden
  const auto values = masked->value.values();
  CHECK(std::count(values.begin(), values.end(), -inf) == 3);
  CHECK(masked->value(0, 0, 1) == -inf);
  CHECK(masked->value(0, 0, 2) == -inf);
  CHECK(masked->value(0, 1, 2) == -inf);
  CHECK(std::isfinite(masked->value(0, 2, 0)));
}

TEST_CASE("format_trace_number writes -inf, inf and nan as the strings of docs/trace-format.md", "[trace][json]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const bool float32 : {true, false}) {
    INFO("float32 " << float32);
    CHECK(format_trace_number(-inf, float32) == "\"-inf\"");
    CHECK(format_trace_number(inf, float32) == "\"inf\"");
    CHECK(format_trace_number(nan, float32) == "\"nan\"");
    CHECK(format_trace_number(-nan, float32) == "\"nan\"");
    CHECK(format_trace_number(static_cast<double>(std::numeric_limits<float>::infinity()), float32) == "\"inf\"");
  }
}

TEMPLATE_TEST_CASE("inf, -inf and nan in any step read back as inf, -inf and nan", "[trace][json]", float, double) {
  Trace trace = make_trace<TestType>(R"({"X": [[1]], "W_q": [[1, 2, 3]], "W_k": [[1, 2, 3]], "W_v": [[1, 2, 3]]})");
  auto q = trace.steps.at(0).value.values();
  REQUIRE(q.size() == 3);
  q[0] = inf;
  q[1] = -inf;
  q[2] = std::numeric_limits<double>::quiet_NaN();
  const Trace back = trace_from_json(trace_to_json(trace, generator), "trace.json");
  const auto r = back.steps.at(0).value.values();
  CHECK(r[0] == inf);
  CHECK(r[1] == -inf);
  CHECK(std::isnan(r[2]));
}

// ---- the shortest form -------------------------------------------------------------------------

TEST_CASE("float32 values are written in their shortest form, 0.1f as 0.1 and not 0.10000000149011612",
          "[trace][json]") {
  CHECK(format_trace_number(static_cast<double>(0.1f), true) == "0.1");
  CHECK(format_trace_number(static_cast<double>(1.0f / 3.0f), true) == "0.33333334");
  CHECK(format_trace_number(static_cast<double>(0.76791793f), true) == "0.76791793");
  CHECK(format_trace_number(2.0, true) == "2");
  // float64 keeps every digit a double needs
  CHECK(format_trace_number(0.1, false) == "0.1");
  CHECK(format_trace_number(static_cast<double>(0.1f), false) == "0.10000000149011612");

  // and so in a float32 trace's steps: X = [[0.1]] and W_q = [[1]] make q = [[0.1f]]
  const Trace trace = make_trace<float>(R"({"X": [[0.1]], "W_q": [[1]], "W_k": [[1]], "W_v": [[1]]})");
  REQUIRE(trace.steps.at(0).value.values()[0] == static_cast<double>(0.1f));
  const std::string text = trace_to_json(trace, generator);
  const std::string steps = text.substr(text.find("\"steps\""));
  CHECK(steps.find("[0.1]") != std::string::npos);
  CHECK(steps.find("0.10000000149011612") == std::string::npos);
}

TEST_CASE("Random float32 values are written with no more digits than the shortest round trip needs",
          "[trace][json][property]") {
  std::mt19937 rng(2024);
  for (int i = 0; i < 20000; ++i) {
    const float x = finite_wild_value<float>(rng);
    const std::string text = format_trace_number(static_cast<double>(x), true);
    // std::to_chars in scientific form without a precision has the fewest significant digits that
    // read back (an independent writer; its plain form may spell out every digit of a large integer)
    char shortest[64];
    const auto end = std::to_chars(shortest, shortest + sizeof shortest, x, std::chars_format::scientific).ptr;
    const std::string reference(shortest, end);
    INFO(fmt::format("{:a}: written {}, shortest {}", x, text, reference));
    REQUIRE(std::strtof(text.c_str(), nullptr) == x);
    REQUIRE(std::signbit(std::strtof(text.c_str(), nullptr)) == std::signbit(x));
    REQUIRE(significant_digits(text).size() == significant_digits(reference).size());
  }
}

// ---- refused traces ----------------------------------------------------------------------------

namespace {

std::string cat_trace_text() {
  const Trace trace = make_trace<float>(R"({"X": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
    "W_q": [[1, 0], [0, 1], [1, 0], [0, 1]], "W_k": [[0, 1], [1, 0], [0, 1], [1, 0]],
    "W_v": [[1, 0], [0, 1], [0, 1], [1, 0]]})");
  return trace_to_json(trace, generator);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The InputError that reading `text` throws; fails the test when there is none.
InputError refusal(const std::string& text) {
  try {
    trace_from_json(text, "old.json");
  } catch (const InputError& e) {
    return e;
  }
  FAIL("the trace was accepted");
  return InputError("", "", "");  // not reached: FAIL ends the test
}

}  // namespace

TEST_CASE("A trace of another format is refused with an InputError naming /format", "[trace][json][errors]") {
  const std::string text = cat_trace_text();
  const InputError e = refusal(replaced(text, R"("format": "attn-trace.trace")", R"("format": "attn-trace.input")"));
  INFO(e.what());
  CHECK(e.pointer() == "/format");
  CHECK(e.file() == "old.json");
  CHECK(std::string(e.what()).find("attn-trace.input") != std::string::npos);

  const InputError no_format = refusal(replaced(text, R"("format": "attn-trace.trace",)", ""));
  CHECK(no_format.pointer() == "/format");
  // an input file is not a trace
  CHECK(refusal(R"({"X": [[1]], "W_q": [[1]], "W_k": [[1]], "W_v": [[1]]})").pointer() == "/format");
  CHECK(refusal("[1, 2, 3]").pointer() == "/format");
}

TEST_CASE("A trace of a newer version (2) is refused with an InputError naming /version", "[trace][json][errors]") {
  const std::string text = cat_trace_text();
  const InputError e = refusal(replaced(text, R"("version": 1)", R"("version": 2)"));
  INFO(e.what());
  CHECK(e.pointer() == "/version");
  CHECK(std::string(e.what()).find('2') != std::string::npos);
  CHECK(refusal(replaced(text, R"("version": 1)", R"("version": "1")")).pointer() == "/version");
  CHECK(refusal(replaced(text, R"("version": 1)", R"("version": 0)")).pointer() == "/version");
  // the unchanged text is accepted
  CHECK_NOTHROW(trace_from_json(text, "old.json"));
}

TEST_CASE("A data value that is neither a number nor -inf, inf or nan is refused with its JSON Pointer",
          "[trace][json][errors]") {
  const std::string text = cat_trace_text();
  // the first row of the first step (q) is [2, 0]
  const InputError e = refusal(replaced(text, "[2, 0]", R"(["x", 0])"));
  INFO(e.what());
  CHECK(e.pointer() == "/steps/0/data/0/0");
}
