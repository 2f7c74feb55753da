// Flash and compare from the command line (docs/cli.md): `compare` passes on every bundled input (that
// it fails a wrong flash is tests/unit/broken_flash_test.cpp); `run --engine flash` shows the tiles and
// ends with naive's output; `--engine both` shows both; a zero tile size is a usage error; the JSON
// traces of flash runs and of compare print again through `show` exactly as the commands printed them.

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");
// A cross-attention input with outputs up to about 105 (tests/data/compare/README.md).
const std::string compare_case = source_path("tests/data/compare/float64_tiles_3x2.json");

// The text of `text` from the line that starts with `from` up to (not including) the next line that
// starts with `to` (or to the end when `to` is empty), without trailing blank lines. Empty when
// `from` is not there.
std::string section(const std::string& text, const std::string& from, const std::string& to = "") {
  std::vector<std::string> lines;
  bool inside = false;
  for (const std::string& line : split_lines(text)) {
    if (!inside && starts_with(line, from)) inside = true;
    else if (inside && !to.empty() && starts_with(line, to)) break;
    if (inside) lines.push_back(line);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// The heading lines and the summary above them: everything before the first step.
std::string preamble(const std::string& text) { return text.substr(0, text.find(step_rule)); }

}  // namespace

// --- compare -------------------------------------------------------------------------------------

TEST_CASE("compare exits 0 and prints verdict PASS for every input in data/", "[cli][flash][compare]") {
  const std::vector<std::string> files = data_files();
  REQUIRE(all_data_files().size() >= 9);
  for (const std::string& file : files) {
    for (const std::vector<std::string>& extra : {std::vector<std::string>{},
                                                  {"--dtype", "float64"},
                                                  {"--block-q", "1", "--block-k", "1"},
                                                  {"--block-q", "3", "--block-k", "2"}}) {
      std::vector<std::string> args{"compare", file};
      args.insert(args.end(), extra.begin(), extra.end());
      const RunResult r = run_binary(args);
      INFO(r.describe());
      check_success(r);
      CHECK(contains(r.out, "verdict: PASS"));
      CHECK_FALSE(contains(r.out, "FAIL"));
      CHECK(contains(r.out, "━━ compare "));
    }
  }
}

TEST_CASE("compare passes, exit 0, on the input the earlier noise term failed, at six tilings in both dtypes",
          "[cli][flash][compare]") {
  // the failing run was --dtype float64 --block-q 3 --block-k 2 (exit 1, max|flash - ref| 5.27e-14)
  for (const std::string dtype : {"float64", "float32"})
    for (const std::vector<std::string>& blocks : {std::vector<std::string>{"--block-q", "3", "--block-k", "2"},
                                                   {},
                                                   {"--block-q", "1", "--block-k", "1"},
                                                   {"--block-q", "2", "--block-k", "3"},
                                                   {"--block-q", "5", "--block-k", "7"},
                                                   {"--block-q", "4", "--block-k", "5"}}) {
      std::vector<std::string> args{"compare", compare_case, "--dtype", dtype};
      args.insert(args.end(), blocks.begin(), blocks.end());
      const RunResult r = run_binary(args);
      INFO(r.describe());
      check_success(r);
      CHECK(contains(r.out, "verdict: PASS"));
    }
}

TEST_CASE("compare --json - prints JSON with a compare object whose tolerance passes", "[cli][flash][compare][json]") {
  for (const std::string& file : data_files()) {
    const RunResult r = run_binary({"compare", file, "--json", "-"});
    INFO(r.describe());
    check_success(r);
    REQUIRE(starts_with(r.out, "{"));
    CHECK_FALSE(contains(r.out, step_rule));
    nlohmann::json trace;
    REQUIRE_NOTHROW(trace = nlohmann::json::parse(r.out));
    REQUIRE(trace.contains("compare"));
    const nlohmann::json& c = trace.at("compare");
    CHECK(c.at("dtype") == "float32");
    CHECK(c.at("tolerance").at("pass") == true);
    // the verdict is the rule applied to the numbers beside it
    const double flash_error = c.at("tolerance").at("flash_error").get<double>();
    const double naive_error = c.at("tolerance").at("naive_error").get<double>();
    const double noise = c.at("tolerance").at("noise").get<double>();
    CHECK(c.at("tolerance").at("bound").get<double>() == Approx(2 * naive_error + noise).epsilon(1e-12));
    CHECK(flash_error <= 2 * naive_error + noise);
    CHECK(flash_error == c.at("flash_vs_reference").at("max_abs").get<double>());
    CHECK(c.at("memory").at("flash_peak_bytes").get<long long>() <=
          c.at("memory").at("naive_peak_bytes").get<long long>());
    CHECK(trace.contains("flash"));
    CHECK(trace.at("config").at("engine") == "both");
  }
}

// --- run --engine flash | both ------------------------------------------------------------------

TEST_CASE("run --engine flash shows several key tiles and alpha, and ends with naive's output table", "[cli][flash]") {
  const RunResult flash = run_binary({"run", cat_sat, "--engine", "flash"});
  const RunResult naive = run_binary({"run", cat_sat});
  INFO(flash.describe());
  check_success(flash);
  check_success(naive);
  CHECK(contains(flash.out, "key tile 0"));
  CHECK(contains(flash.out, "key tile 1"));  // the default blocks give the worked example >= 2 key tiles
  CHECK(contains(flash.out, "alpha"));
  CHECK(contains(flash.out, "━━ flash "));
  // no naive step between the projections and the output
  for (const std::string step : {"scores", "scaled", "masked", "weights"}) {
    INFO("step " << step);
    CHECK(step_section(flash.out, step).empty());
  }
  const std::vector<std::string> headings = step_headings(flash.out);
  REQUIRE_FALSE(headings.empty());
  CHECK(headings.back() == "output");
  const std::string flash_output = section(flash.out, step_rule + "output ");
  REQUIRE_FALSE(flash_output.empty());
  CHECK(flash_output == section(naive.out, step_rule + "output "));
  // and the whole of it is the end of the text
  CHECK(flash.out.size() >= flash_output.size());
  CHECK(flash.out.substr(flash.out.size() - flash_output.size()) == flash_output);
}

TEST_CASE("run --engine both prints every naive step, then the flash section, for every input", "[cli][flash]") {
  for (const std::string& file : data_files()) {
    const RunResult both = run_binary({"run", file, "--engine", "both"});
    const RunResult naive = run_binary({"run", file});
    const RunResult flash = run_binary({"run", file, "--engine", "flash"});
    INFO(both.describe());
    check_success(both);
    const std::vector<std::string> headings = step_headings(both.out);
    for (const std::string step : {"q", "k", "v", "q_heads", "k_heads", "v_heads", "scores", "scaled", "masked",
                                   "weights", "head_outputs", "concat", "output", "flash"}) {
      INFO("step " << step);
      CHECK(std::count(headings.begin(), headings.end(), step) == 1);
    }
    const auto at = [&](const std::string& name) { return std::find(headings.begin(), headings.end(), name); };
    CHECK(at("output") < at("flash"));
    // the naive steps as naive prints them, the flash section as flash prints it (up to flash's next
    // step: head_outputs, or sink_weights with sinks)
    CHECK(section(both.out, step_rule + "q ", step_rule + "flash ") == section(naive.out, step_rule + "q "));
    CHECK(section(both.out, step_rule + "flash ", step_rule + "naive vs flash") ==
          section(flash.out, step_rule + "flash ", step_rule));
  }
}

TEST_CASE("A tile size of 0 is a usage error, exit 2 with one line naming the option", "[cli][flash][errors]") {
  check_usage_error(run_binary({"run", cat_sat, "--engine", "flash", "--block-q", "0"}), {"--block-q"});
  check_usage_error(run_binary({"run", cat_sat, "--engine", "flash", "--block-k", "0"}), {"--block-k"});
  check_usage_error(run_binary({"run", cat_sat, "--engine", "both", "--block-q", "0"}), {"--block-q"});
  check_usage_error(run_binary({"compare", cat_sat, "--block-q", "0"}), {"--block-q"});
  check_usage_error(run_binary({"compare", cat_sat, "--block-k", "0"}), {"--block-k"});
}

TEST_CASE("Tile sizes that divide nothing, or exceed the lengths, run and pass", "[cli][flash][compare]") {
  for (const std::vector<std::string>& blocks :
       {std::vector<std::string>{"--block-q", "2", "--block-k", "2"}, {"--block-q", "100", "--block-k", "7"}}) {
    std::vector<std::string> run_args{"run", cat_sat, "--engine", "flash"};
    run_args.insert(run_args.end(), blocks.begin(), blocks.end());
    check_success(run_binary(run_args));
    std::vector<std::string> compare_args{"compare", cat_sat};
    compare_args.insert(compare_args.end(), blocks.begin(), blocks.end());
    const RunResult r = run_binary(compare_args);
    check_success(r);
    CHECK(contains(r.out, "verdict: PASS"));
  }
}

// --- JSON traces of flash and compare, shown again -----------------------------------------------

TEST_CASE("For every input, run --engine flash or both --json then show prints exactly what run printed",
          "[cli][flash][trace][show]") {
  const TempDir dir;
  for (const std::string& file : data_files()) {
    for (const std::vector<std::string>& extra : {std::vector<std::string>{"--engine", "flash"},
                                                  {"--engine", "flash", "--dtype", "float64"},
                                                  {"--engine", "both"},
                                                  {"--engine", "flash", "--block-q", "3", "--block-k", "2"}}) {
      std::vector<std::string> args{"run", file};
      args.insert(args.end(), extra.begin(), extra.end());
      const RunResult plain = run_binary(args);
      args.insert(args.end(), {"--json", dir / "trace.json"});
      const RunResult written = run_binary(args);
      const RunResult shown = run_binary({"show", dir / "trace.json"});
      INFO(plain.describe());
      INFO(shown.describe());
      check_success(plain);
      check_success(written);
      check_success(shown);
      CHECK(written.out == plain.out);
      CHECK(shown.out == plain.out);
    }
  }
}

TEST_CASE("For every input, compare --json then show ends with compare's own text, byte for byte",
          "[cli][flash][compare][trace][show]") {
  const TempDir dir;
  for (const std::string& file : data_files()) {
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{}, {"--dtype", "float64", "--block-q", "2", "--block-k", "3"}}) {
      std::vector<std::string> args{"compare", file};
      args.insert(args.end(), extra.begin(), extra.end());
      const RunResult plain = run_binary(args);
      args.insert(args.end(), {"--json", dir / "compare.json"});
      const RunResult written = run_binary(args);
      const RunResult shown = run_binary({"show", dir / "compare.json"});
      INFO(plain.describe());
      INFO(shown.describe());
      check_success(plain);
      check_success(written);
      check_success(shown);
      CHECK(written.out == plain.out);
      // compare prints the summary and its compare section; show prints the whole trace as run would,
      // every naive step and the flash tiles, and then the very same compare section
      const std::string compare_section = section(plain.out, step_rule + "compare ");
      REQUIRE_FALSE(compare_section.empty());
      CHECK(section(shown.out, step_rule + "compare ") == compare_section);
      CHECK(shown.out.size() >= compare_section.size());
      CHECK(shown.out.substr(shown.out.size() - compare_section.size()) == compare_section);
      CHECK(preamble(shown.out) == preamble(plain.out));
      CHECK(plain.out == preamble(plain.out) + compare_section);  // nothing else in compare's text
      const std::vector<std::string> headings = step_headings(shown.out);
      CHECK(std::count(headings.begin(), headings.end(), "scores") == 1);
      CHECK(std::count(headings.begin(), headings.end(), "flash") == 1);
      CHECK(headings.back() == "compare");
    }
  }
}
