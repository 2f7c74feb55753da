// attn-trace steps (docs/cli.md, "steps"): the step table printed through the real binary. The names and
// their order are the ones docs/trace-format.md lists, written out here by hand; the trace of the worked
// example must hold exactly the names `steps --names` prints, in its order.

#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE(
    "steps --names prints the nineteen forward step names in pipeline order, then the backward's "
    "twenty-eight",
    "[cli][steps]") {
  const RunResult r = run_binary({"steps", "--names"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(lines_of(r.out) == std::vector<std::string>{"q",
                                                    "k",
                                                    "v",
                                                    "q_heads",
                                                    "k_heads",
                                                    "v_heads",
                                                    "q_rot",
                                                    "k_rot",
                                                    "scores",
                                                    "scaled",
                                                    "capped",
                                                    "bias",
                                                    "masked",
                                                    "weights",
                                                    "sink_weights",
                                                    "dropped",
                                                    "head_outputs",
                                                    "concat",
                                                    "output",
                                                    "d_output",
                                                    "d_concat",
                                                    "d_head_outputs",
                                                    "d_dropped",
                                                    "d_weights",
                                                    "d_v_heads",
                                                    "d_masked",
                                                    "d_capped",
                                                    "d_scaled",
                                                    "d_scores",
                                                    "d_q_rot",
                                                    "d_k_rot",
                                                    "d_q_heads",
                                                    "d_k_heads",
                                                    "d_q",
                                                    "d_k",
                                                    "d_v",
                                                    "d_X",
                                                    "d_context",
                                                    "d_W_q",
                                                    "d_W_k",
                                                    "d_W_v",
                                                    "d_W_o",
                                                    "d_b_q",
                                                    "d_b_k",
                                                    "d_b_v",
                                                    "d_b_o",
                                                    "d_sinks"});
}

TEST_CASE("steps shows each step's axes, the steps it reads and its formula, and --json the same table",
          "[cli][steps]") {
  const RunResult text = run_binary({"steps"});
  INFO(text.describe());
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "head_outputs (head, query, d_v)  ← weights, v_heads"));
  CHECK(contains(text.out, "scores       (head, query, key)  ← q_heads, k_heads (q_rot, k_rot instead, with rope)"));
  CHECK(contains(text.out, "S = Q·Kᵀ; flash holds it in tiles only"));

  const RunResult json = run_binary({"steps", "--json"});
  INFO(json.describe());
  REQUIRE(json.exit_code == 0);
  CHECK(contains(json.out, R"("format": "attn-trace.steps")"));
  CHECK(contains(json.out, R"("name": "masked")"));
  CHECK(contains(json.out, R"("values": "probability")"));
}

TEST_CASE("steps refuses --names with --json, and an unknown option, with exit 2", "[cli][steps]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"steps", "--names", "--json"}, std::vector<std::string>{"steps", "--nmaes"}}) {
    const RunResult r = run_binary(args);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "error"));
  }
}
