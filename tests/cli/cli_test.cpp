// The attn-trace command line, run as a user runs it: the real binary, its exit code, stdout and
// stderr. Expected behaviour comes from docs/cli.md; expected numbers from the worked
// example of docs/input-format.md, worked out by hand (shown next to each check).

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");

// The worked example with two heads of d_k = 2 (identity projections): for --head.
const std::string two_heads = R"({
  "tokens": ["The", "cat", "sat"],
  "n_heads": 2,
  "X":   [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
  "W_q": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
  "W_k": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
  "W_v": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
})";

using Row = std::vector<std::string>;

// The one row labelled row[0] in `step` must read exactly `row` (one head, so one table).
void check_row(const std::string& trace, const std::string& step, const Row& row) {
  INFO("step " << step << ", row " << row[0]);
  CHECK(rows_labelled(trace, step, row[0]) == std::vector<Row>{row});
}

}  // namespace

// --- every bundled input runs -------------------------------------------------------------------

TEST_CASE("Every bundled input in data/ runs in float32 and float64 with a trace and no complaint", "[cli][data]") {
  const std::vector<std::string> files = data_files();
  REQUIRE_FALSE(files.empty());
  for (const std::string& file : files) {
    check_success(run_binary({"run", file}));
    check_success(run_binary({"run", file, "--dtype", "float64"}));
  }
}

// --- help and version ---------------------------------------------------------------------------

TEST_CASE("The --help option exits 0 and names the commands run and example", "[cli][help]") {
  const RunResult r = run_binary({"--help"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(std::regex_search(r.out, std::regex(R"(\brun\b)")));
  CHECK(std::regex_search(r.out, std::regex(R"(\bexample\b)")));
}

TEST_CASE("run --help and example --help exit 0 and show an Example of the command", "[cli][help]") {
  for (const std::string command : {"run", "example"}) {
    const RunResult r = run_binary({command, "--help"});
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(contains(r.out, "Example"));
    CHECK(contains(r.out, "attn-trace " + command));
  }
}

TEST_CASE("The --version option prints attn-trace and a version number and exits 0", "[cli][help]") {
  const RunResult r = run_binary({"--version"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(std::regex_match(r.out, std::regex(R"(attn-trace [0-9]+\.[0-9]+\.[0-9]+\S*\n)")));
}

// --- example ------------------------------------------------------------------------------------

TEST_CASE("example prints data/the_cat_sat.json byte for byte", "[cli][example]") {
  const RunResult r = run_binary({"example"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == read_file(cat_sat));
}

TEST_CASE("example --list lists the-cat-sat", "[cli][example]") {
  const RunResult r = run_binary({"example", "--list"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  bool listed = false;
  for (const std::string& line : split_lines(r.out)) listed = listed || words_of(line).front() == "the-cat-sat";
  CHECK(listed);
}

TEST_CASE("example with an unknown name is a usage error that names it", "[cli][example][errors]") {
  check_usage_error(run_binary({"example", "nope"}), {"nope"});
}

TEST_CASE("run - reads the input from stdin so the output of example can be piped into it", "[cli][stdin]") {
  const RunResult example = run_binary({"example"});
  REQUIRE(example.exit_code == 0);
  const RunResult r = run_binary({"run", "-"}, RunOptions().input(example.out));
  check_success(r);
  INFO(r.describe());
  // softmax of the scaled row of "cat", by hand: see the worked example test below.
  check_row(r.out, "weights", {"cat", "0.7679", "0.0454", "0.1867"});
}

// --- the worked example, by hand ----------------------------------------------------------------

TEST_CASE("run on the worked example prints the numbers worked out by hand in docs/input-format.md", "[cli][worked]") {
  for (const std::string dtype : {"float32", "float64"}) {
    const RunResult r = run_binary({"run", cat_sat, "--dtype", dtype});
    check_success(r);
    INFO(r.describe());
    // Q = X·W_q = [[2,0],[0,2],[1,1]]
    check_row(r.out, "q", {"The", "2.0000", "0.0000"});
    check_row(r.out, "q", {"cat", "0.0000", "2.0000"});
    check_row(r.out, "q", {"sat", "1.0000", "1.0000"});
    // K = X·W_k = [[0,2],[2,0],[1,1]]
    check_row(r.out, "k", {"The", "0.0000", "2.0000"});
    check_row(r.out, "k", {"cat", "2.0000", "0.0000"});
    // V = X·W_v: all ones
    check_row(r.out, "v", {"sat", "1.0000", "1.0000"});
    // S = Q·Kᵀ = [[0,4,2],[4,0,2],[2,2,2]]
    check_row(r.out, "scores", {"The", "0.0000", "4.0000", "2.0000"});
    check_row(r.out, "scores", {"cat", "4.0000", "0.0000", "2.0000"});
    check_row(r.out, "scores", {"sat", "2.0000", "2.0000", "2.0000"});
    // S / √2: 4/√2 = 2.828427…, 2/√2 = 1.414213…
    check_row(r.out, "scaled", {"cat", "2.8284", "0.0000", "1.4142"});
    // softmax([2√2, 0, √2]) = [16.9188, 1, 4.1133] / 22.0321 = [0.76791, 0.04539, 0.18670]
    check_row(r.out, "weights", {"The", "0.0454", "0.7679", "0.1867"});
    check_row(r.out, "weights", {"cat", "0.7679", "0.0454", "0.1867"});
    // softmax([√2, √2, √2]) = 1/3 each
    check_row(r.out, "weights", {"sat", "0.3333", "0.3333", "0.3333"});
    // every row of A sums to 1 and V is all ones, so the output is all ones
    check_row(r.out, "output", {"cat", "1.0000", "1.0000"});
  }
}

TEST_CASE("run prints every step of docs/trace-format.md in order under its trace name", "[cli][steps]") {
  const RunResult r = run_binary({"run", cat_sat});
  check_success(r);
  INFO(r.describe());
  CHECK(step_headings(r.out) == std::vector<std::string>{"q", "k", "v", "q_heads", "k_heads", "v_heads", "scores",
                                                         "scaled", "masked", "weights", "head_outputs", "concat",
                                                         "output"});
}

TEST_CASE("With --precision 2 the weights of cat have two digits after the point", "[cli][precision]") {
  const RunResult r = run_binary({"run", cat_sat, "--precision", "2", "--steps", "weights"});
  check_success(r);
  INFO(r.describe());
  // [0.76791, 0.04539, 0.18670] to two digits
  check_row(r.out, "weights", {"cat", "0.77", "0.05", "0.19"});
}

// --- options that choose what is shown ----------------------------------------------------------

TEST_CASE("With --steps scores and weights only those two steps are shown", "[cli][steps]") {
  const RunResult r = run_binary({"run", cat_sat, "--steps", "scores,weights"});
  check_success(r);
  INFO(r.describe());
  CHECK(step_headings(r.out) == std::vector<std::string>{"scores", "weights"});
}

TEST_CASE("With --head 1 a two-head input shows the tables of head 1 and none of head 0", "[cli][head]") {
  const RunResult all = run_binary({"run", "-"}, RunOptions().input(two_heads));
  check_success(all);
  {
    INFO(all.describe());
    CHECK(contains(all.out, "head 0"));  // the input really has two heads
    CHECK(contains(all.out, "head 1"));
  }
  const RunResult one = run_binary({"run", "-", "--head", "1"}, RunOptions().input(two_heads));
  check_success(one);
  INFO(one.describe());
  CHECK(contains(one.out, "head 1"));
  CHECK_FALSE(contains(one.out, "head 0"));
}

// --- colour -------------------------------------------------------------------------------------

TEST_CASE("With --color always ANSI escapes are emitted even when stdout is a file", "[cli][color]") {
  const RunResult r = run_binary({"run", cat_sat, "--color", "always"}, RunOptions().unset("NO_COLOR"));
  check_success(r);
  INFO(r.describe());
  CHECK(contains(r.out, "\x1b["));
}

TEST_CASE("With --color never no ANSI escapes are emitted even on a terminal", "[cli][color]") {
  const RunResult r = run_binary({"run", cat_sat, "--color", "never"}, RunOptions().unset("NO_COLOR").terminal());
  check_success(r);
  INFO(r.describe());
  CHECK_FALSE(contains(r.out, "\x1b["));
}

TEST_CASE("With --color auto no ANSI escapes are emitted when stdout is not a terminal", "[cli][color]") {
  const RunResult r = run_binary({"run", cat_sat, "--color", "auto"}, RunOptions().unset("NO_COLOR"));
  check_success(r);
  INFO(r.describe());
  CHECK_FALSE(contains(r.out, "\x1b["));
}

TEST_CASE("With --color auto ANSI escapes are emitted when stdout is a terminal", "[cli][color]") {
  const RunResult r = run_binary({"run", cat_sat, "--color", "auto"}, RunOptions().unset("NO_COLOR").terminal());
  check_success(r);
  INFO(r.describe());
  CHECK(contains(r.out, "\x1b["));
}

TEST_CASE("NO_COLOR=1 with --color auto emits no ANSI escapes on a file or on a terminal", "[cli][color]") {
  for (const bool terminal : {false, true}) {
    const RunResult r =
        run_binary({"run", cat_sat, "--color", "auto"}, RunOptions().set_env("NO_COLOR", "1").terminal(terminal));
    check_success(r);
    INFO("stdout is a terminal: " << terminal << "\n" << r.describe());
    CHECK_FALSE(contains(r.out, "\x1b["));
  }
}

TEST_CASE("NO_COLOR does not override an explicit --color always", "[cli][color]") {
  // docs/cli.md: NO_COLOR only turns off the colour of `auto`.
  const RunResult r = run_binary({"run", cat_sat, "--color", "always"}, RunOptions().set_env("NO_COLOR", "1"));
  check_success(r);
  INFO(r.describe());
  CHECK(contains(r.out, "\x1b["));
}

// --- usage errors: exit 2, one line ------------------------------------------------------------

TEST_CASE("An unknown option is a usage error that names it", "[cli][errors]") {
  check_usage_error(run_binary({"run", cat_sat, "--bogus"}), {"--bogus"});
  check_usage_error(run_binary({"--bogus"}), {"--bogus"});
}

TEST_CASE("An unknown command is a usage error that names it", "[cli][errors]") {
  check_usage_error(run_binary({"bogus"}), {"bogus"});
}

TEST_CASE("No command at all is a usage error that names the commands", "[cli][errors]") {
  check_usage_error(run_binary({}), {"run"});
}

TEST_CASE("An unknown --steps name is a usage error that suggests the nearest step", "[cli][errors][steps]") {
  check_usage_error(run_binary({"run", cat_sat, "--steps", "scorez"}), {"scorez", "did you mean \"scores\""});
  check_usage_error(run_binary({"run", cat_sat, "--steps", "scores,wieghts"}), {"wieghts", "did you mean \"weights\""});
}

TEST_CASE("A --head out of range is a usage error", "[cli][errors][head]") {
  // the worked example has one head: head 0 only
  check_usage_error(run_binary({"run", cat_sat, "--head", "1"}), {"--head"});
  check_usage_error(run_binary({"run", "-", "--head", "2"}, RunOptions().input(two_heads)), {"--head"});
}

TEST_CASE("A negative --head is a usage error that names -1 and not a wrapped-around number", "[cli][errors][head]") {
  const RunResult r = run_binary({"run", cat_sat, "--head", "-1"});
  check_usage_error(r, {"-1"});
  INFO(r.describe());
  CHECK_FALSE(contains(r.err, "18446744073709551615"));
}

TEST_CASE("A --precision that is not a number is a usage error", "[cli][errors][precision]") {
  check_usage_error(run_binary({"run", cat_sat, "--precision", "abc"}), {"--precision"});
}

TEST_CASE("A value outside the choices of --dtype or --color is a usage error", "[cli][errors]") {
  check_usage_error(run_binary({"run", cat_sat, "--dtype", "float8"}), {"--dtype", "float8"});
  check_usage_error(run_binary({"run", cat_sat, "--color", "sometimes"}), {"--color", "sometimes"});
}

TEST_CASE("run without FILE is a usage error that says FILE is needed", "[cli][errors]") {
  check_usage_error(run_binary({"run"}), {"FILE"});
}

TEST_CASE("run on a file that does not exist is an error that names the file", "[cli][errors]") {
  const std::string missing = source_path("tests/data/no_such_file.json");
  check_error(run_binary({"run", missing}), "attn-trace: error: " + missing + ": ");
}

TEST_CASE("run on a directory is an error that says it is a directory", "[cli][errors]") {
  // docs/cli.md: an unreadable file is exit 2; the message should say why it cannot be read
  // (strerror's "Is a directory"), not describe the contents of a file that is not there.
  const std::string dir = source_path("tests/data");
  const RunResult r = run_binary({"run", dir});
  check_error(r, "attn-trace: error: " + dir + ": ");
  INFO(r.describe());
  CHECK(contains(r.err, "directory"));
  CHECK_FALSE(contains(r.err, "empty"));
}
