// RoPE and ALiBi from the command line: their steps by name in --steps, the angle table under q_rot and
// k_rot, show of a saved trace as run printed it, the steps refused for an input that lacks them, and
// the commands that cannot show positions saying so.

#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string llama = source_path("tests/data/positions/llama_rope.json");
const std::string alibi = source_path("tests/data/positions/alibi.json");
const std::string cache = source_path("tests/data/positions/rope_alibi_cache.json");
const std::string cat_sat = source_path("data/the_cat_sat.json");

}  // namespace

TEST_CASE("run --steps q_rot,k_rot prints the turned heads and the angle table of their positions", "[cli][rope]") {
  const RunResult r = run_binary({"run", llama, "--steps", "q_rot,k_rot", "--head", "0"});
  check_success(r);
  CHECK(contains_in_order(r.out, "━━ q_rot"));
  CHECK(contains(r.out, "q_rot = RoPE(q, pos): pairs (i, i + 2) turn by pos·θ_i, θ_i = 10000^(-2i/4), pos = 0…4"));
  CHECK(contains(r.out, "cos(pos·θ_i)"));
  CHECK(contains(r.out, "sin(pos·θ_i)"));
  CHECK(contains(r.out, "mats @4"));
  CHECK(contains(r.out, "━━ k_rot"));
  CHECK_FALSE(contains(r.out, "━━ scores"));
}

TEST_CASE("run --steps bias prints ALiBi's biased scores with the slopes in the formula", "[cli][alibi]") {
  const RunResult r = run_binary({"run", alibi, "--steps", "bias", "--head", "0"});
  check_success(r);
  CHECK(contains(r.out, "━━ bias"));
  CHECK(contains(r.out, "m = 0.25, 0.0625, 0.01562, 0.003906 (ALiBi's standard"));
  CHECK(contains(r.out, "alibi     slopes 0.25, 0.0625, 0.01562, 0.003906 (the standard ones)"));
}

TEST_CASE("show of a saved RoPE or ALiBi trace prints exactly what run printed", "[cli][rope][alibi][show]") {
  const TempDir dir;
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {llama, "k_rot,weights"}, {alibi, "bias,weights"}, {cache, "q_rot,bias,weights"}};
  for (const auto& [file, steps] : inputs) {
    INFO(file);
    check_round_trip({"run", file}, dir / "t.json");
    check_round_trip({"run", file, "--engine", "both", "--dtype", "float64"}, dir / "b.json");
    check_round_trip({"run", file, "--steps", steps, "--head", "1"}, dir / "s.json");
  }
}

TEST_CASE("The JSON trace holds the rotation table under q_rot and k_rot and the input's rope and alibi",
          "[cli][rope][json]") {
  const RunResult r = run_binary({"run", cache, "--json", "-"});
  check_success(r);
  const nlohmann::json t = nlohmann::json::parse(r.out);
  CHECK(t.at("input").at("rope").at("positions") == nlohmann::json::array({3, 4}));
  CHECK(t.at("input").at("rope").at("style") == "interleaved");
  CHECK(t.at("input").at("alibi") == nlohmann::json::array({0.5, 0.25}));
  CHECK(t.at("config").at("alibi").at("key_positions") == nlohmann::json::array({0, 1, 2, 3, 4}));
  bool seen = false;
  for (const auto& step : t.at("steps"))
    if (step.at("name") == "k_rot") {
      seen = true;
      CHECK(step.at("rotation").at("positions") == nlohmann::json::array({0, 1, 2, 3, 4}));
      CHECK(step.at("rotation").at("cos").size() == 5);
      CHECK(step.at("rotation").at("cos").at(0).size() == 1);  // dims 2: one pair
    }
  CHECK(seen);
}

TEST_CASE("A --steps position step the input does not have is a usage error that lists its steps",
          "[cli][rope][alibi]") {
  check_usage_error(run_binary({"run", cat_sat, "--steps", "q_rot"}),
                    {"--steps q_rot: this input has no \"rope\"", "q,k,v,q_heads"});
  check_usage_error(run_binary({"run", llama, "--steps", "bias"}), {"--steps bias: this input has no \"alibi\""});
}

TEST_CASE("run --mistake refuses an input with positions, and properties does not expect permutation equivariance",
          "[cli][rope][alibi]") {
  check_usage_error(run_binary({"run", llama, "--mistake", "no-scale"}), {"\"rope\""});
  const RunResult p = run_binary({"properties", alibi});
  INFO(p.describe());
  CHECK(contains(p.out, "ALiBi gives each place its own position"));
}

TEST_CASE("compare passes on RoPE and ALiBi inputs in every dtype, and diff of our own dump agrees",
          "[cli][rope][alibi][compare]") {
  for (const std::string& file : {llama, alibi, cache})
    for (const std::string dtype : {"float32", "float64", "float16", "bfloat16"}) {
      const RunResult r = run_binary({"compare", file, "--dtype", dtype});
      INFO(r.describe());
      check_success(r);
      CHECK(contains(r.out, "verdict: PASS"));
    }
}

TEST_CASE("explain shows the turned q and k and the bias in the score", "[cli][rope][alibi][explain]") {
  const RunResult r = run_binary({"explain", cache, "--query", "mats", "--key", "cat", "--head", "1"});
  check_success(r);
  CHECK(contains(r.out, "the positions: RoPE turns q and k"));
  CHECK(contains(r.out, "q_rot = ["));
  CHECK(contains(r.out, "ALiBi: s + b, b = -0.2500·(4 - 1)"));
}
