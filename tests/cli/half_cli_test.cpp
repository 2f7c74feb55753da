// --dtype float16 and bfloat16 on the command line: which commands take them, what they print and save,
// and the one-line refusals of docs/cli.md for the rest.

#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

TEST_CASE("compare --dtype bfloat16 passes on the worked example and names bfloat16 and its float64 reference",
          "[cli][half][compare]") {
  const RunResult r = run_binary({"compare", source_path("data/the_cat_sat.json"), "--dtype", "bfloat16"});
  check_success(r);
  CHECK(contains(r.out, "· bfloat16"));
  CHECK(contains(r.out, "naive and flash in bfloat16 (each step stored in bfloat16, summed in float32)"));
  CHECK(contains(r.out, "naive attention in float64 on the same inputs, rounded to bfloat16"));
  CHECK(contains(r.out, "neighbouring bfloat16 numbers"));
  CHECK(contains(r.out, "verdict: PASS"));
}

TEST_CASE("compare --dtype float16 passes on every bundled input", "[cli][half][compare]") {
  for (const std::string& file : data_files()) {
    const RunResult r = run_binary({"compare", file, "--dtype", "float16"});
    check_success(r);
    CHECK(contains(r.out, "naive and flash in float16"));
    CHECK(contains(r.out, "verdict: PASS"));
  }
}

TEST_CASE("run --dtype float16 saves a trace whose config and every step say float16", "[cli][half][trace]") {
  const RunResult r =
      run_binary({"run", source_path("data/gpt_causal.json"), "--dtype", "float16", "--engine", "both", "--json", "-"});
  check_success(r);
  const nlohmann::json trace = nlohmann::json::parse(r.out);
  CHECK(trace.at("config").at("dtype") == "float16");
  REQUIRE(trace.at("steps").size() == 13);
  for (const nlohmann::json& step : trace.at("steps")) CHECK(step.at("dtype") == "float16");
}

TEST_CASE("show of a saved float16 or bfloat16 trace prints exactly what run and compare printed",
          "[cli][half][trace][show]") {
  const TempDir dir;
  for (const std::string dtype : {"float16", "bfloat16"}) {
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{"run", "--engine", "both"}, {"run", "--engine", "flash", "--block-q", "2"}}) {
      std::vector<std::string> args{extra.front(), source_path("data/gqa.json"), "--dtype", dtype};
      args.insert(args.end(), extra.begin() + 1, extra.end());
      const RunResult plain = run_binary(args);
      args.insert(args.end(), {"--json", dir / "trace.json"});
      check_success(run_binary(args));
      const RunResult shown = run_binary({"show", dir / "trace.json"});
      INFO(plain.describe());
      INFO(shown.describe());
      check_success(plain);
      check_success(shown);
      CHECK(shown.out == plain.out);
    }
    // compare: show prints the whole trace, ending with the very same compare section.
    const RunResult compared = run_binary({"compare", source_path("data/gqa.json"), "--dtype", dtype});
    check_success(
        run_binary({"compare", source_path("data/gqa.json"), "--dtype", dtype, "--json", dir / "compare.json"}));
    const RunResult shown = run_binary({"show", dir / "compare.json"});
    check_success(shown);
    const std::size_t at = compared.out.find("━━ compare");
    REQUIRE(at != std::string::npos);
    const std::string section = compared.out.substr(at);
    CHECK(shown.out.size() >= section.size());
    CHECK(shown.out.compare(shown.out.size() - section.size(), section.size(), section) == 0);
  }
}

TEST_CASE("An unknown --dtype is a one-line error, exit 2", "[cli][half][errors]") {
  check_usage_error(run_binary({"run", source_path("data/the_cat_sat.json"), "--dtype", "float8"}),
                    {"--dtype", "float8"});
  check_usage_error(run_binary({"compare", source_path("data/the_cat_sat.json"), "--dtype", "half"}), {"--dtype"});
}

TEST_CASE("Only run and compare take a half --dtype, and the others and --mistake refuse it in one line",
          "[cli][half][errors]") {
  const std::string cat = source_path("data/the_cat_sat.json");
  check_usage_error(run_binary({"run", cat, "--mistake", "no-scale", "--dtype", "float16"}),
                    {"--mistake", "float32 or float64", "float16"});
  check_usage_error(run_binary({"report", cat, "--dtype", "bfloat16"}), {"--dtype", "bfloat16"});
  check_usage_error(run_binary({"plot", cat, "--dtype", "float16"}), {"--dtype", "float16"});
  check_usage_error(run_binary({"properties", cat, "--dtype", "float16"}), {"--dtype", "float16"});
  check_usage_error(run_binary({"explain", cat, "--query", "cat", "--key", "The", "--dtype", "bfloat16"}),
                    {"--dtype", "bfloat16"});
  // A saved half trace can be drawn, but not given a mistake.
  const TempDir dir;
  check_success(run_binary({"run", cat, "--dtype", "float16", "--json", dir / "half.json"}));
  check_usage_error(run_binary({"report", dir / "half.json", "--mistake", "no-scale"}), {"--mistake", "float16"});
  const RunResult page = run_binary({"report", dir / "half.json", "-o", dir / "half.html"});
  INFO(page.describe());
  CHECK(page.exit_code == 0);
}

TEST_CASE("The --help of each command says which dtypes it takes and points to the rounding model",
          "[cli][half][help]") {
  for (const std::string command : {"run", "compare"}) {
    const RunResult r = run_binary({command, "--help"});
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "float32, float64, float16 or bfloat16"));
    CHECK(contains(r.out, "docs/precision.md"));
  }
  for (const std::string command : {"plot", "properties", "explain", "report"}) {
    const RunResult r = run_binary({command, "--help"});
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "float32 or float64"));
    CHECK_FALSE(contains(r.out, "bfloat16"));
  }
}

TEST_CASE("A float16 run refuses an input past 65504 that float32 takes, and suggests bfloat16",
          "[cli][half][errors]") {
  const std::string input = R"({"X": [[70000, 0], [0, 1]], "W_q": [[1, 0], [0, 1]], "W_k": [[1, 0], [0, 1]],
                                "W_v": [[1, 0], [0, 1]]})";
  check_usage_error(run_binary({"run", "-", "--dtype", "float16"}, RunOptions().input(input)),
                    {"/X/0/0", "70000", "float16's range", "bfloat16"});
  check_success(run_binary({"run", "-", "--dtype", "bfloat16"}, RunOptions().input(input)));
}

TEST_CASE("docs/precision.md shows what compare prints for docs/examples/large_scores.json in both half types",
          "[cli][half][docs]") {
  const std::string doc = read_file(source_path("docs/precision.md"));
  for (const std::string dtype : {"float16", "bfloat16"}) {
    // The docs show what the tool prints at 80 columns (docs/architecture.md, "Doc blocks are tested").
    const RunResult r =
        run_binary({"compare", source_path("docs/examples/large_scores.json"), "--dtype", dtype, "--color", "never"},
                   RunOptions().set_env("COLUMNS", "80"));
    check_success(r);
    const std::size_t at = r.out.find("━━ compare");
    REQUIRE(at != std::string::npos);
    INFO(dtype << ": compare printed\n" << r.out.substr(at));
    CHECK(contains(doc, r.out.substr(at)));
  }
}
