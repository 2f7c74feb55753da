// attn-trace new through the real binary (docs/cli.md, "new"): the same bytes to stdout and to -o FILE,
// an input that `run` takes straight from the pipe, and every combination that makes no valid input
// refused with one line, exit 2 and no file.

#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

TEST_CASE("new writes the same bytes to stdout and to -o FILE", "[cli][new]") {
  const std::vector<std::string> args = {"new", "--tokens", "I like green tea", "--heads", "2", "--integers"};
  const RunResult to_stdout = run_binary(args);
  check_success(to_stdout);

  const TempDir dir;
  std::vector<std::string> to_file_args = args;
  to_file_args.insert(to_file_args.end(), {"-o", dir / "tea.json"});
  const RunResult to_file = run_binary(to_file_args);
  INFO(to_file.describe());
  CHECK(to_file.exit_code == 0);
  CHECK(to_file.out.empty());
  CHECK(to_file.err.empty());
  CHECK(read_file(dir / "tea.json") == to_stdout.out);
  CHECK(contains(to_stdout.out, "\"tokens\": [\"I\", \"like\", \"green\", \"tea\"]"));
  CHECK(contains(to_stdout.out, "made by attn-trace new: 4 tokens, d_model 4, 2 heads of d_k 2"));
}

TEST_CASE("attn-trace new ... | attn-trace run - traces what new wrote", "[cli][new]") {
  const std::vector<std::vector<std::string>> asks = {
      {"new"},
      {"new", "--integers", "--seed", "7"},
      {"new", "--heads", "4", "--kv-heads", "1", "--d-model", "8", "--mask", "causal", "--output-projection"},
      {"new", "--tokens", "le chat dort", "--context-tokens", "the cat is sleeping", "--mask", "sliding_window:2"},
      {"new", "--heads", "3", "--d-k", "2", "--integers"}};
  for (const auto& ask : asks) {
    const RunResult made = run_binary(ask);
    check_success(made);
    const RunResult traced = run_binary({"run", "-", "--color", "never"}, RunOptions().input(made.out));
    check_success(traced);
    CHECK(step_headings(traced.out).back() == (contains(made.out, "W_o") ? "output" : "concat"));
  }
}

TEST_CASE("new gives the same file for the same seed and another for another seed", "[cli][new]") {
  const RunResult a = run_binary({"new", "--seed", "3"});
  const RunResult b = run_binary({"new", "--seed", "3"});
  const RunResult c = run_binary({"new", "--seed", "4"});
  check_success(a);
  CHECK(a.out == b.out);
  CHECK(a.out != c.out);
}

TEST_CASE("new refuses what makes no valid input: one line, exit 2, no file", "[cli][new]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--heads", "3"}, "--heads 3: does not divide --d-model 4; give --d-k"},
      {{"--heads", "4", "--kv-heads", "3"}, "--kv-heads 3: does not divide --heads 4"},
      {{"--d-model", "0"}, "--d-model: expected at least 1, found 0"},
      {{"--heads", "0"}, "--heads: expected at least 1, found 0"},
      {{"--kv-heads", "0"}, "--kv-heads: expected at least 1, found 0"},
      {{"--d-k", "0"}, "--d-k: expected at least 1, found 0"},
      {{"--tokens", "   "}, "--tokens: no tokens"},
      {{"--context-tokens", ""}, "--context-tokens: no tokens"},
      {{"--mask", "casual"}, "--mask casual: unknown mask; expected none, causal or sliding_window:W"},
      {{"--mask", "padding"}, "--mask padding: new writes none, causal or sliding_window:W"},
      {{"--mask", "sliding_window"}, "--mask sliding_window: give the window too"},
      {{"--mask", "sliding_window:0"}, "--mask sliding_window:0: the window must be a whole number, at least 1"},
      {{"--mask", "sliding_window:2x"}, "the window must be a whole number"},
      {{"--d-model", "100000", "--d-k", "100000"}, "this input would need about ...over --max-memory 4G"},
      {{"--d-model", "64", "--max-memory", "10K"}, "over --max-memory 10K"},
      {{"--d-model", "-1"}, "--d-model"},
      {{"--seed", "-3"}, "--seed: expected a whole number"},
      {{"--seed", "99999999999999999999999"}, "--seed: expected a whole number"},
      {{"--heads", "1.5"}, "--heads"},
      {{"--max-memory", "lots"}, "--max-memory: expected a size"}};
  for (const auto& [args, fragment] : bad) {
    const TempDir dir;
    std::vector<std::string> command = {"new", "-o", dir / "new.json"};
    command.insert(command.end(), args.begin(), args.end());
    const RunResult r = run_binary(command);
    check_usage_error(r, {fragment});
    CHECK_FALSE(fs::exists(dir / "new.json"));
  }
}

TEST_CASE("new --help shows its options and examples", "[cli][new]") {
  const RunResult r = run_binary({"new", "--help"});
  check_success(r);
  for (const std::string option : {"--tokens", "--d-model", "--heads", "--kv-heads", "--d-k", "--mask",
                                   "--context-tokens", "--seed", "--integers", "--output-projection", "-o,--output",
                                   "--max-memory", "attn-trace new --tokens \"I like green tea\" --heads 2 --integers"})
    CHECK(contains(r.out, option));
}
