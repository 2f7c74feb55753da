// attn-trace properties (docs/cli.md, "properties"): the table, the verdict in the exit code, --json, and
// output that fits the terminal.

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");
const std::string gpt = source_path("data/gpt_causal.json");

// The table row of `property`, split into words after the property's name.
std::vector<std::string> row_of(const std::string& out, const std::string& property) {
  for (const std::string& line : split_lines(out))
    if (starts_with(line, property + "  ")) return words_of(line.substr(property.size()));
  return {};
}

}  // namespace

TEST_CASE("properties checks every bundled example and exits 0: all that should hold holds", "[cli][properties]") {
  for (const std::string& file : data_files())
    for (const std::string dtype : {"float32", "float64"}) {
      const RunResult r = run_binary({"properties", file, "--dtype", dtype});
      check_success(r);
      CHECK(contains(r.out, "verdict: every property expected to hold holds"));
    }
}

TEST_CASE("properties shows each property with its result, figure, tolerance and whether it is expected",
          "[cli][properties]") {
  const RunResult r = run_binary({"properties", cat_sat});
  check_success(r);
  CHECK(row_of(r.out, "rows sum to 1").at(0) == "holds");
  // the worked example's columns sum to 1.1466, 1.1466 and 0.7067: 0.2933 from 1 at most
  CHECK(row_of(r.out, "columns sum to 1") ==
        std::vector<std::string>{"does", "not", "hold", "0.293", row_of(r.out, "columns sum to 1").at(4), "no"});
  CHECK(row_of(r.out, "permutation equivariance").at(0) == "holds");
  CHECK(row_of(r.out, "masked keys get weight 0") == std::vector<std::string>{"holds", "0", "0", "yes"});
  CHECK(row_of(r.out, "flash equals naive").at(0) == "holds");
  CHECK(contains(r.out, "columns sum to 1: not expected"));

  const RunResult causal = run_binary({"properties", gpt, "--seed", "7"});
  check_success(causal);
  CHECK(contains(causal.out, "permutation seed 7"));
  const std::vector<std::string> equivariance = row_of(causal.out, "permutation equivariance");
  REQUIRE_FALSE(equivariance.empty());
  CHECK(equivariance.back() == "no");
  CHECK(contains(causal.out, "depends on positions"));
}

TEST_CASE("properties --json writes the checks as attn-trace.properties, to a file or to stdout", "[cli][properties]") {
  const TempDir dir;
  const RunResult r = run_binary({"properties", gpt, "--json", dir / "props.json"});
  check_success(r);
  nlohmann::json j;
  REQUIRE_NOTHROW(j = nlohmann::json::parse(read_file(dir / "props.json")));
  CHECK(j.at("format") == "attn-trace.properties");
  CHECK(j.at("version") == 1);
  REQUIRE(j.at("properties").size() == 5);
  for (const nlohmann::json& p : j.at("properties")) {
    CHECK(p.at("name").is_string());
    CHECK(p.at("holds").is_boolean());
    CHECK(p.at("expected").is_boolean());
    CHECK(p.at("figure").is_number());
    CHECK(p.at("tolerance").is_number());
    CHECK(p.at("reason").is_string());
    if (p.at("expected") == true) CHECK(p.at("holds") == true);
  }
  CHECK(j.at("properties").at(2).at("name") == "permutation equivariance");
  CHECK(j.at("properties").at(2).at("expected") == false);

  const RunResult out = run_binary({"properties", gpt, "--json", "-"});
  check_success(out);
  CHECK(out.out == read_file(dir / "props.json"));
}

TEST_CASE("properties refuses a missing file and a bad option in one line, exit 2", "[cli][properties]") {
  check_usage_error(run_binary({"properties", source_path("data/no_such_file.json")}), {"no_such_file.json"});
  check_usage_error(run_binary({"properties", cat_sat, "--dtype", "float16"}), {"--dtype"});
  check_usage_error(run_binary({"properties", cat_sat, "--seed", "x"}), {"--seed"});
  check_usage_error(run_binary({"properties"}), {"FILE"});
}

TEST_CASE("properties fits COLUMNS=40 and is ASCII when the locale is not UTF-8", "[cli][properties]") {
  for (const std::string& file : {cat_sat, gpt, source_path("data/padded_batch.json")})
    for (const std::string columns : {"40", "100"}) {
      const RunResult r =
          run_binary({"properties", file}, RunOptions().set_env("COLUMNS", columns).set_env("LC_ALL", "C"));
      check_success(r);
      for (const std::string& line : split_lines(r.out)) {
        INFO(line);
        CHECK(line.size() <= std::stoul(columns));
        CHECK(std::all_of(line.begin(), line.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
      }
    }
  const RunResult help = run_binary({"properties", "--help"}, RunOptions().set_env("LC_ALL", "C"));
  CHECK(help.exit_code == 0);
  CHECK(contains(help.out, "attn-trace properties data/the_cat_sat.json"));
  CHECK(std::all_of(help.out.begin(), help.out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
}
