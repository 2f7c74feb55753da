// run --mistake (docs/cli.md, "--mistake"): the list, each mistake on a bundled example, --json, the
// refusals, and output that fits the terminal. Expected numbers are worked out by hand in each test.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");
const std::string gpt = source_path("data/gpt_causal.json");
const std::vector<std::string> names = {"no-scale",   "no-mask",       "mask-after-softmax", "softmax-columns",
                                        "shared-qkv", "wrong-reshape", "minus-1e9",          "dropout-unscaled"};

}  // namespace

TEST_CASE("run --mistake list names every mistake with one line, without an input file", "[cli][mistake]") {
  const RunResult r = run_binary({"run", "--mistake", "list"});
  check_success(r);
  for (const std::string& name : names) CHECK(contains(r.out, "  " + name + "  "));
}

TEST_CASE("run --mistake no-scale on the worked example: cat's weight on The rises from 0.7679 to 0.8668",
          "[cli][mistake]") {
  const RunResult r = run_binary({"run", cat_sat, "--mistake", "no-scale"});
  check_success(r);
  // By hand: softmax of cat's scores 4, 0, 2 with and without the 1/√2.
  const double s = std::sqrt(2.0);
  const double scaled = std::exp(4 / s) / (std::exp(4 / s) + 1 + std::exp(2 / s));
  const double unscaled = std::exp(4.0) / (std::exp(4.0) + 1 + std::exp(2.0));
  CHECK(contains(r.out, fmt::format("{:.4f}", scaled)));
  CHECK(contains(r.out, fmt::format("{:.4f}", unscaled)));
  CHECK(contains_in_order(r.out,
                          "mistake: no-scale...intended S' = S / √d_k...mistaken S' = S...step by step..."
                          "scaled...1.17  <- first difference...first difference: scaled...what it costs"));
  CHECK(contains(r.out, "the largest difference is at [head 0, query 0, key 1]"));
}

TEST_CASE("run --mistake runs every mistake on every bundled example that allows it", "[cli][mistake]") {
  for (const std::string& file : data_files())
    for (const std::string& name : names) {
      const RunResult r = run_binary({"run", file, "--mistake", name});
      INFO(file << " " << name << "\n" << r.err);
      if (contains(read_file(file), "\"rope\"")) {  // the mistakes are made on attention without positions
        check_usage_error(r, {"--mistake " + name, "this input has \"rope\""});
        continue;
      }
      if (name == "dropout-unscaled" && !contains(read_file(file), "\"dropout\"")) {
        check_usage_error(r, {"--mistake dropout-unscaled", "needs dropout", "--dropout P"});
        continue;
      }
      if (name == "shared-qkv" && (contains(file, "cross_attention") || contains(file, "kv_cache"))) {
        check_usage_error(r, {"--mistake shared-qkv", "self-attention"});
        continue;
      }
      if (r.exit_code == 2 && name == "shared-qkv") {
        check_usage_error(r, {"d_v = d_k"});
        continue;
      }
      check_success(r);
      CHECK(contains(r.out, "what it costs, measured"));
    }
}

TEST_CASE("run --mistake dropout-unscaled first differs at dropped, by the factor 1/(1 - p) it leaves out",
          "[cli][mistake][dropout]") {
  const std::string file = source_path("data/explainer_dropout.json");  // p = 0.1
  const RunResult r = run_binary({"run", file, "--mistake", "dropout-unscaled", "--json", "-"});
  check_success(r);
  const nlohmann::json m = nlohmann::json::parse(r.out);
  CHECK(m.at("first_difference").at("step") == "dropped");
  // Every kept weight is a, not a/(1 - p): the intended and mistaken dropped steps differ by that factor
  // (hand calculation: a/0.9 - a = a/9), and the steps before dropped do not differ at all.
  bool said = false;
  for (const auto& finding : m.at("findings"))
    said = said || contains(finding.get<std::string>(), "1 − p = 0.9 times as much");
  CHECK(said);
  const RunResult weights = run_binary({"run", file, "--steps", "weights,dropped", "--json", "-"});
  check_success(weights);
  const nlohmann::json t = nlohmann::json::parse(weights.out);
  std::vector<double> a, dropped;
  for (const auto& step : t.at("steps"))
    for (const auto& head : step.at("data"))
      for (const auto& row : head)
        for (const auto& x : row) (step.at("name") == "weights" ? a : dropped).push_back(x.get<double>());
  REQUIRE(a.size() == dropped.size());
  for (std::size_t k = 0; k < a.size(); ++k)
    if (dropped[k] != 0) CHECK(dropped[k] == Approx(a[k] / 0.9).epsilon(1e-6));
}

TEST_CASE("run --mistake no-mask --json writes the comparison as attn-trace.mistake", "[cli][mistake]") {
  TempDir dir;
  const RunResult r = run_binary({"run", gpt, "--mistake", "no-mask", "--json", dir / "mistake.json"});
  check_success(r);
  nlohmann::json j;
  REQUIRE_NOTHROW(j = nlohmann::json::parse(read_file(dir / "mistake.json")));
  CHECK(j["format"] == "attn-trace.mistake");
  CHECK(j["version"] == 1);
  CHECK(j["mistake"] == "no-mask");
  CHECK(j["dtype"] == "float32");
  CHECK(j["steps"].size() == 13);
  CHECK(j["first_difference"]["step"] == "masked");
  // The causal mask forbids "The" (query 0) every later key: intended -inf, mistaken a finite score.
  CHECK(j["first_difference"]["intended"] == "-inf");
  CHECK(j["first_difference"]["dims"] == nlohmann::json::array({"head", "query", "key"}));
  // Every restricted row leaks: its forbidden weight is 0 as intended and more than 0 without the mask.
  REQUIRE(j["costs"].size() == 1);
  for (const auto& row : j["costs"][0]["rows"]) {
    CHECK(row["intended"][0] == 0);
    CHECK(row["mistaken"][0].get<double>() > 0);
  }
  const RunResult only = run_binary({"run", gpt, "--mistake", "no-mask", "--json", "-"});
  check_success(only);
  CHECK(only.out == read_file(dir / "mistake.json"));
}

TEST_CASE("run --mistake refuses an unknown name, the options it has no use for, and a missing FILE",
          "[cli][mistake]") {
  check_usage_error(run_binary({"run", cat_sat, "--mistake", "no_scale"}), {"--mistake", "no-scale"});
  check_usage_error(run_binary({"run", cat_sat, "--mistake", "no-scale", "--engine", "flash"}), {"--engine"});
  check_usage_error(run_binary({"run", cat_sat, "--mistake", "no-scale", "--steps", "wieghts"}),
                    {"--steps", "weights"});
  check_usage_error(run_binary({"run", cat_sat, "--mistake", "no-scale", "--steps", "tiles"}),
                    {"--steps tiles: --mistake runs the naive computation, which has no tiles"});
  check_usage_error(run_binary({"run", cat_sat, "--mistake", "no-scale", "--head", "1"}),
                    {"--head 1: the input has one head"});
  check_usage_error(run_binary({"run", cat_sat, "--mistake", "no-scale", "--format", "csv"}), {"--format"});
  check_usage_error(run_binary({"run", "--mistake", "no-scale"}), {"FILE"});
  check_usage_error(run_binary({"run"}), {"FILE"});
  TempDir dir;
  check_usage_error(run_binary({"run", source_path("data/cross_attention.json"), "--mistake", "shared-qkv", "--json",
                                dir / "never.json"}),
                    {"self-attention"});
  CHECK_FALSE(std::filesystem::exists(dir / "never.json"));
}

TEST_CASE("run --mistake --steps shows just those steps side by side, in the text and the JSON", "[cli][mistake]") {
  TempDir dir;
  const RunResult r = run_binary(
      {"run", cat_sat, "--mistake", "no-scale", "--steps", "weights", "--json", dir / "m.json", "--view", "numbers"});
  check_success(r);
  // By hand, as above: cat's row of weights with and without the 1/√2 (scores 4, 0, 2).
  const double s = std::sqrt(2.0);
  const double scaled = std::exp(4 / s) / (std::exp(4 / s) + 1 + std::exp(2 / s));
  const double unscaled = std::exp(4.0) / (std::exp(4.0) + 1 + std::exp(2.0));
  CHECK(contains_in_order(r.out,
                          "step by step...weights...weights: intended beside mistaken...ok...bad...what it costs"));
  CHECK(contains(r.out, fmt::format("{:.4f}", scaled)));
  CHECK(contains(r.out, fmt::format("{:.4f}", unscaled)));
  // Only the step asked for: no other step in the list, no first-difference section.
  CHECK_FALSE(contains(r.out, "first difference: scaled"));
  CHECK_FALSE(contains(r.out, "  scaled  "));
  CHECK_FALSE(contains(r.out, "<- first difference"));
  const nlohmann::json j = nlohmann::json::parse(read_file(dir / "m.json"));
  REQUIRE(j["steps"].size() == 1);
  CHECK(j["steps"][0]["step"] == "weights");
  // The first difference is still the first of all the steps: scaled, the step the mistake changes.
  CHECK(j["first_difference"]["step"] == "scaled");
  CHECK(j["head"].is_null());
  REQUIRE(j["side_by_side"].size() == 1);
  const auto& w = j["side_by_side"][0];
  CHECK(w["step"] == "weights");
  CHECK(w["intended_shape"] == nlohmann::json::array({1, 3, 3}));
  // Row "cat" (query 1) is keys The, cat, sat: scores 4, 0, 2; The is index 3 of the flat (1, 3, 3).
  CHECK(std::abs(w["intended"][3].get<double>() - scaled) < 1e-6);
  CHECK(std::abs(w["mistaken"][3].get<double>() - unscaled) < 1e-6);

  // Two steps, in pipeline order whatever the order asked.
  const RunResult two = run_binary({"run", cat_sat, "--mistake", "no-scale", "--steps", "weights,scores"});
  check_success(two);
  CHECK(contains_in_order(two.out, "scores: intended beside mistaken...identical...weights: intended beside mistaken"));
}

TEST_CASE("run --mistake --head shows that head only, and --steps with it that head of those steps", "[cli][mistake]") {
  TempDir dir;
  const RunResult r = run_binary({"run", gpt, "--mistake", "no-mask", "--head", "1", "--json", dir / "m.json"});
  check_success(r);
  CHECK(contains(r.out, "in head 1"));
  CHECK(contains(r.out, "first difference: masked"));
  CHECK(contains(r.out, "[head 1, query 0, key 1]"));
  const nlohmann::json j = nlohmann::json::parse(read_file(dir / "m.json"));
  CHECK(j["head"] == 1);
  CHECK(j["steps"].size() == 13);
  // The weights' head axis holds head 1 alone: (1 head, 4 queries, 4 keys).
  for (const auto& step : j["steps"])
    if (step["step"] == "weights") CHECK(step["intended_shape"] == nlohmann::json::array({1, 4, 4}));
  for (const auto& table : j["costs"])
    for (const auto& row : table["rows"]) CHECK(row["head"] == 1);

  const RunResult both =
      run_binary({"run", gpt, "--mistake", "no-mask", "--head", "0", "--steps", "weights", "--json", "-"});
  check_success(both);
  const nlohmann::json k = nlohmann::json::parse(both.out);
  REQUIRE(k["side_by_side"].size() == 1);
  CHECK(k["side_by_side"][0]["intended_shape"] == nlohmann::json::array({1, 4, 4}));
  // The causal mask: "The" (query 0) attends to itself alone as intended, to every key without the mask.
  CHECK(k["side_by_side"][0]["intended"][0] == 1);
  CHECK(k["side_by_side"][0]["intended"][1] == 0);
  CHECK(k["side_by_side"][0]["mistaken"][1].get<double>() > 0);
}

TEST_CASE("run --mistake fits COLUMNS=40 and is ASCII when the locale is not UTF-8", "[cli][mistake]") {
  for (const std::string& name : names) {
    std::vector<std::string> args = {"run", gpt, "--mistake", name};
    if (name == "dropout-unscaled") args.insert(args.end(), {"--dropout", "0.2"});  // the example has none
    const RunResult r = run_binary(args, RunOptions().set_env("COLUMNS", "40").set_env("LC_ALL", "C"));
    check_success(r);
    for (const std::string& line : split_lines(r.out)) {
      INFO(name << ": " << line);
      CHECK(line.size() <= 40);
      CHECK(std::all_of(line.begin(), line.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
    }
  }
  const RunResult list =
      run_binary({"run", "--mistake", "list"}, RunOptions().set_env("COLUMNS", "40").set_env("LC_ALL", "C"));
  check_success(list);
  for (const std::string& line : split_lines(list.out)) CHECK(line.size() <= 40);
}

TEST_CASE("report --mistake opens the page with the mistake, and refuses what run --mistake refuses",
          "[cli][mistake][report]") {
  TempDir dir;
  const RunResult leak = run_binary({"report", gpt, "--mistake", "no-mask", "-o", dir / "leak.html"});
  CHECK(leak.exit_code == 0);
  CHECK(leak.err.empty());
  const std::string page = read_file(dir / "leak.html");
  CHECK(contains_in_order(page,
                          "<a href=\"#mistake\">mistake</a>...<section id=\"mistake\"...mistake: no-mask..."
                          "first difference: masked...what it costs, measured...<section id=\"pipeline\""));
  CHECK(contains(page, "\"mistake\":{\"name\":\"no-mask\",\"first_difference\":\"masked\""));
  // Without --mistake the page has no such section, and its data says so.
  CHECK(run_binary({"report", gpt, "-o", dir / "plain.html"}).exit_code == 0);
  CHECK_FALSE(contains(read_file(dir / "plain.html"), "<section id=\"mistake\""));
  CHECK(contains(read_file(dir / "plain.html"), "\"mistake\":null"));
  check_usage_error(run_binary({"report", gpt, "--mistake", "nope", "-o", dir / "never.html"}), {"--mistake"});
  check_usage_error(run_binary({"report", source_path("data/cross_attention.json"), "--mistake", "shared-qkv", "-o",
                                dir / "never.html"}),
                    {"self-attention"});
  CHECK_FALSE(std::filesystem::exists(dir / "never.html"));
}

TEST_CASE("run --mistake counts both runs against --max-memory", "[cli][mistake]") {
  // 200 tokens, 4 heads, causal: one run keeping every step needs about 6.6 MiB, the two of --mistake
  // about twice that (docs/cli.md, --max-memory).
  TempDir dir;
  std::string tokens;
  for (int i = 0; i < 200; ++i) tokens += fmt::format("{}t{}", i == 0 ? "" : " ", i);
  REQUIRE(run_binary({"new", "--tokens", tokens, "--d-model", "16", "--heads", "4", "--mask", "causal", "-o",
                      dir / "big.json"})
              .exit_code == 0);
  CHECK(run_binary({"run", dir / "big.json", "--max-memory", "8M"}).exit_code == 0);
  check_error(run_binary({"run", dir / "big.json", "--mistake", "no-mask", "--max-memory", "8M"}),
              "attn-trace: error: ", {"2 runs", "--max-memory 8M"});
  CHECK(run_binary({"run", dir / "big.json", "--mistake", "no-mask", "--max-memory", "16M"}).exit_code == 0);
}
