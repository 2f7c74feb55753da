// Errors that cannot be printed (docs/reliability.md, "Exit codes"): with stderr closed or full, and
// stdout closed too, every command still ends with the exit code of its failure — 2 for a usage or
// input error, 3 for output that could not be written — and never with an abort.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");

}  // namespace

TEST_CASE("An error that cannot be printed still ends the run with its exit code", "[cli][usage]") {
  SECTION("the two reported cases") {
    CHECK(run_binary({"run", "missing.json"}, RunOptions().close_stderr()).exit_code == 2);
    CHECK(run_binary({"run", cat_sat}, RunOptions().close_stdout().close_stderr()).exit_code == 3);
    CHECK(run_binary({"run", cat_sat}, RunOptions().close_stdout().errors_to("/dev/full")).exit_code == 3);
    // With stderr there, the line says what failed.
    const RunResult said = run_binary({"run", cat_sat}, RunOptions().close_stdout());
    CHECK(said.exit_code == 3);
    CHECK(contains(said.err, "attn-trace: error: stdout: write failed"));
  }
  SECTION("every command") {
    for (const std::string& command : tool_commands()) {
      INFO("attn-trace " << command);
      // A usage error (exit 2) with nowhere to say it.
      CHECK(run_binary({command, "--no-such-option"}, RunOptions().close_stderr()).exit_code == 2);
      CHECK(run_binary({command, "--no-such-option"}, RunOptions().errors_to("/dev/full")).exit_code == 2);
      // Output that cannot be written (exit 3), and no stderr to say so either.
      CHECK(run_binary({command, "--help"}, RunOptions().close_stdout().close_stderr()).exit_code == 3);
      CHECK(run_binary({command, "--help"}, RunOptions().close_stdout().errors_to("/dev/full")).exit_code == 3);
    }
  }
}
