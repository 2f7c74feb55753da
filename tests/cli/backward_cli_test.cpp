// The backward pass through the real binary (docs/backward.md): run --backward on the worked example,
// its JSON trace read back by show, compare --backward's verdict, and explain --grad, against numbers
// worked out by hand.

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");
const std::string gqa = source_path("data/gqa.json");

const nlohmann::json* step_named(const nlohmann::json& trace, const std::string& name) {
  for (const nlohmann::json& s : trace.at("steps"))
    if (s.at("name") == name) return &s;
  return nullptr;
}

void flat(const nlohmann::json& j, std::vector<double>& out) {
  if (j.is_number()) out.push_back(j.get<double>());
  else
    for (const nlohmann::json& x : j) flat(x, out);
}

}  // namespace

TEST_CASE("run --backward on \"The cat sat\": every d_weights entry is 2, d_scores is 0, and the trace says why",
          "[cli][backward]") {
  // By hand: no dY and no W_o, so dO = 1; every row of V is [1, 1], so dA = 1 + 1 = 2 everywhere, and
  // A ⊙ (dA − D) = A ⊙ (2 − 2) = 0 since the weights of a row sum to 1.
  const RunResult json = run_binary({"run", cat_sat, "--backward", "--json", "-"});
  check_success(json);
  const nlohmann::json trace = nlohmann::json::parse(json.out);
  CHECK(trace.at("config").at("backward").at("dY") == "ones");
  std::vector<double> dA, dS;
  flat(step_named(trace, "d_weights")->at("data"), dA);
  flat(step_named(trace, "d_scores")->at("data"), dS);
  REQUIRE(dA.size() == 9);
  for (const double x : dA) CHECK(x == 2.0);
  for (const double x : dS) CHECK(std::abs(x) < 1e-6);
  const RunResult text = run_binary({"run", cat_sat, "--backward"});
  check_success(text);
  CHECK(contains(text.out, "Every row of d_weights holds one number c"));
  CHECK(contains_in_order(text.out, "━━ output ...━━ d_output ...━━ d_weights ...━━ d_masked ...━━ d_W_v "));
}

TEST_CASE("run --backward --engine both saves the flash backward's tiles, and show prints the saved trace as run did",
          "[cli][backward][flash]") {
  const TempDir dir;
  const std::string out = dir / "backward.json";
  const RunResult run = run_binary({"run", gqa, "--backward", "--engine", "both", "--grad-seed", "5", "--json", out});
  check_success(run);
  const nlohmann::json trace = nlohmann::json::parse(read_file(out));
  REQUIRE(trace.contains("flash_backward"));
  CHECK_FALSE(trace.at("flash_backward").at("tiles").empty());
  CHECK(trace.at("config").at("backward").at("grad_seed") == 5);
  CHECK(contains(run.out, "━━ flash backward "));
  const RunResult show = run_binary({"show", out});
  check_success(show);
  CHECK(show.out == run.out);
}

TEST_CASE("compare --backward judges every gradient and exits 0 on the bundled examples", "[cli][backward]") {
  const RunResult r = run_binary({"compare", gqa, "--backward", "--json", "-"});
  check_success(r);
  const nlohmann::json c = nlohmann::json::parse(r.out).at("compare");
  CHECK(c.at("backward").at("pass") == true);
  CHECK(c.at("backward").at("gradients").size() >= 10);
}

TEST_CASE("explain --grad d_weights follows one entry back to dO and V, and agrees with the trace",
          "[cli][backward][explain]") {
  const RunResult r = run_binary({"explain", cat_sat, "--grad", "d_weights", "--index", "0,1,0", "--json", "-"});
  check_success(r);
  const nlohmann::json e = nlohmann::json::parse(r.out);
  CHECK(e.at("kind") == "gradient");
  CHECK(e.at("terms").size() == 2);  // d_v = 2: dO[cat][0]·V[The][0] + dO[cat][1]·V[The][1]
  CHECK(e.at("value").get<double>() == 2.0);
  CHECK(e.at("recomputed").get<double>() == 2.0);
  // Every gradient of gqa.json with a seeded dY: the terms recomputed in double give the engine's value.
  for (const std::string step : {"d_concat", "d_weights", "d_v_heads", "d_masked", "d_scores", "d_q_heads", "d_k_heads",
                                 "d_X", "d_W_q", "d_W_k", "d_W_v", "d_W_o"}) {
    const std::string index = step == "d_W_q" || step == "d_W_k" || step == "d_W_v" || step == "d_W_o" ? "1,1"
                              : step == "d_concat" || step == "d_X"                                    ? "2,1"
                                                                                                       : "1,2,1";
    const RunResult g = run_binary(
        {"explain", gqa, "--grad", step, "--index", index, "--grad-seed", "3", "--dtype", "float64", "--json", "-"});
    INFO(step << ": " << g.describe());
    REQUIRE(g.exit_code == 0);
    const nlohmann::json x = nlohmann::json::parse(g.out);
    CHECK(std::abs(x.at("recomputed").get<double>() - x.at("value").get<double>()) < 1e-12);
  }
}

TEST_CASE("explain --grad works the gradients of softcap, sinks and dropout term by term to the engine's value",
          "[cli][backward][explain][softcap][sinks][dropout]") {
  // Every gradient the three add or change, at an allowed entry, with a seeded dY, in float64: the terms
  // recomputed in double give what the backward pass computed (a kept and a dropped weight both).
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> cases = {
      {"data/softcap.json", {{"d_capped", "0,2,1"}, {"d_scaled", "0,2,1"}, {"d_scores", "1,3,0"}}},
      {"data/sinks.json", {{"d_sinks", "0"}, {"d_sinks", "1"}, {"d_masked", "0,1,0"}, {"d_scores", "1,2,1"}}},
      {"data/explainer_dropout.json",
       {{"d_dropped", "1,2,1"},
        {"d_weights", "1,2,1"},
        {"d_weights", "1,0,0"},
        {"d_v_heads", "1,2,1"},
        {"d_masked", "1,2,1"}}},
  };
  for (const auto& [file, entries] : cases)
    for (const auto& [step, index] : entries) {
      const RunResult g = run_binary({"explain", source_path(file), "--grad", step, "--index", index, "--grad-seed",
                                      "3", "--dtype", "float64", "--json", "-"});
      INFO(file << " " << step << " " << index << ": " << g.describe());
      REQUIRE(g.exit_code == 0);
      const nlohmann::json x = nlohmann::json::parse(g.out);
      CHECK_FALSE(x.at("terms").empty());
      CHECK(std::abs(x.at("recomputed").get<double>() - x.at("value").get<double>()) < 1e-12);
    }
}

TEST_CASE("explain --grad explains every gradient of every bundled example, its terms summing to the engine's value",
          "[cli][backward][explain]") {
  // Every gradient step the backward pass traces, at its last entry (every axis at its end), in float64.
  for (const std::string& file : data_files()) {
    const RunResult t = run_binary({"run", file, "--backward", "--dtype", "float64", "--json", "-"});
    REQUIRE(t.exit_code == 0);
    const nlohmann::json trace = nlohmann::json::parse(t.out);
    for (const nlohmann::json& step : trace.at("steps")) {
      const std::string name = step.at("name");
      if (name.rfind("d_", 0) != 0) continue;
      std::string index;
      for (const nlohmann::json* d = &step.at("data"); d->is_array() && !d->empty(); d = &d->back())
        index += (index.empty() ? "" : ",") + std::to_string(d->size() - 1);
      const RunResult g =
          run_binary({"explain", file, "--grad", name, "--index", index, "--dtype", "float64", "--json", "-"});
      INFO(file << " " << name << " " << index << ": " << g.describe());
      REQUIRE(g.exit_code == 0);
      const nlohmann::json x = nlohmann::json::parse(g.out);
      const double value = x.at("value").get<double>(), recomputed = x.at("recomputed").get<double>();
      CHECK(std::abs(recomputed - value) <= 1e-12 * (1 + std::abs(value)));
    }
  }
}

TEST_CASE("explain --grad refuses a forward step, a wrong index and --query, in one line, exit 2",
          "[cli][backward][explain]") {
  check_usage_error(run_binary({"explain", cat_sat, "--grad", "weights", "--index", "0,0,0"}),
                    {"--grad weights: a forward step"});
  check_usage_error(run_binary({"explain", cat_sat, "--grad", "d_weights", "--index", "0,5,0"}),
                    {"--index 0,5,0: d_weights has 3 axes (head 0 to 0, query 0 to 2, key 0 to 2)"});
  check_usage_error(run_binary({"explain", cat_sat, "--grad", "d_W_o", "--index", "0,0"}),
                    {"--grad d_W_o: this input has no \"W_o\""});
  check_usage_error(run_binary({"explain", cat_sat, "--grad", "d_X", "--index", "0,0", "--query", "cat"}),
                    {"--query: --grad names its entry by --index alone"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--index", "1"}),
                    {"--index: it places a --grad entry; add --grad STEP"});
}

TEST_CASE("plot draws a gradient from a run of the backward pass, and --grad-seed belongs to a gradient's --step",
          "[cli][backward][plot]") {
  const RunResult r = run_binary({"plot", gqa, "--step", "d_scores", "--grad-seed", "1", "--all-heads"});
  check_success(r);
  CHECK(contains(r.out, "<svg"));
  CHECK(contains(r.out, "d_scores"));
  check_usage_error(run_binary({"plot", gqa, "--step", "weights", "--grad-seed", "1"}),
                    {"--grad-seed: it draws dY for a gradient's --step"});
}
