// attn-trace scaling (docs/cli.md, "scaling"): the figures as text or JSON, the text fitting the
// terminal in its language, and every input it cannot use refused in one line, exit 2, nothing written.

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

TEST_CASE("scaling prints the tables, the chart and what the numbers show", "[cli][scaling]") {
  const RunResult r = run_binary({"scaling"});
  check_success(r);
  CHECK(contains(r.out, "variance of the scores"));
  CHECK(contains(r.out, "largest softmax weight"));
  CHECK(contains(r.out, "log scale"));
  CHECK(contains(r.out, "0.25 is the ceiling of s(1−s)"));
  CHECK(contains(r.out, "1/N = 0.001"));
}

TEST_CASE("scaling --json FILE writes the figures and still prints the text, --json - prints only the JSON",
          "[cli][scaling][json]") {
  const TempDir dir;
  const std::string file = dir / "scaling.json";
  const RunResult r = run_binary({"scaling", "--d-k", "4,32", "--samples", "100", "--seed", "3", "--json", file});
  check_success(r);
  CHECK(contains(r.out, "variance of the scores"));
  const std::string json = read_file(file);
  CHECK(starts_with(json,
                    "{\n  \"format\": \"attn-trace.scaling\",\n  \"version\": 1,\n  \"samples\": 100,\n"
                    "  \"seed\": 3,\n  \"rows\": ["));
  CHECK(contains(json, "\"d_k\": 32"));
  CHECK(contains(json, "\"scaled_max_weight\""));

  const RunResult to_stdout =
      run_binary({"scaling", "--d-k", "4,32", "--samples", "100", "--seed", "3", "--json", "-"});
  check_success(to_stdout);
  CHECK(to_stdout.out == json);
}

TEST_CASE("scaling's text fits 40 columns and is ASCII when the locale is not UTF-8", "[cli][scaling][terminal]") {
  const RunResult r = run_binary({"scaling"}, RunOptions().set_env("LC_ALL", "C").set_env("COLUMNS", "40"));
  check_success(r);
  for (const std::string& line : split_lines(r.out)) {
    INFO(line);
    CHECK(line.size() <= 40);
  }
  CHECK(std::all_of(r.out.begin(), r.out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
  CHECK(contains(r.out, "sqrt(d_k)"));

  const RunResult help = run_binary({"scaling", "--help"}, RunOptions().set_env("LC_ALL", "C"));
  check_success(help);
  CHECK(contains(help.out, "Examples:"));
  CHECK(std::all_of(help.out.begin(), help.out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
}

TEST_CASE("scaling refuses d_k 0, one sample, and a sample count over --max-memory, writing nothing",
          "[cli][scaling][errors]") {
  const TempDir dir;
  const std::string file = dir / "scaling.json";
  struct Case {
    std::vector<std::string> args;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{"--d-k", "0"}, "--d-k 0: expected a positive integer"},
      {{"--d-k", "1,x,4"}, "--d-k x: expected a positive integer"},
      {{"--d-k", "-3"}, "--d-k -3: expected a positive integer"},
      {{"--samples", "1"}, "--samples 1: a softmax over fewer than 2 samples"},
      {{"--samples", "0"}, "--samples 0:"},
      {{"--samples", "-5"}, "--samples -5:"},
      {{"--seed", "-1"}, "--seed"},
      {{"--samples", "100000000"}, "--samples 100000000: q and k at d_k 1024 need about ...over --max-memory 4G"},
      {{"--samples", "1000", "--max-memory", "1M"}, "over --max-memory 1M"},
      {{"--samples", "9223372036854775807"}, "over --max-memory 4G"},
      {{"--max-memory", "lots"}, "--max-memory: expected a size"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"scaling", "--json", file};
    args.insert(args.end(), c.args.begin(), c.args.end());
    check_usage_error(run_binary(args), {c.fragment});
    CHECK_FALSE(std::filesystem::exists(file));
  }
}
