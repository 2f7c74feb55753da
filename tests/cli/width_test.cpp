// One width for everything the tool prints for people (docs/cli.md, "Width"): COLUMNS, else the
// terminal on stdout, else the controlling terminal, else 80; --help, example --list and steps fit it,
// and --max-cols follows it.

#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cli_checks.hpp"
#include "render/draw/text.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");

// The lines of `text` wider than `width` display columns (UTF-8: "√" is one column, "猫" two).
std::vector<std::string> too_wide(const std::string& text, std::size_t width) {
  std::vector<std::string> wide;
  for (const std::string& line : split_lines(text))
    if (attn::display_width(line) > width) wide.push_back(line);
  return wide;
}

// The header row of the first table: the line that opens "  head 0", which holds its column labels.
std::string column_labels(const std::string& text) {
  for (const std::string& line : split_lines(text))
    if (starts_with(line, "  head 0 ")) return line;
  return "";
}

std::string widest_line(const std::string& text) {
  std::string widest;
  for (const std::string& line : split_lines(text))
    if (attn::display_width(line) > attn::display_width(widest)) widest = line;
  return widest;
}

}  // namespace

TEST_CASE("Every --help, example --list and steps fit 80 and 60 columns", "[cli][width]") {
  std::vector<std::vector<std::string>> pages = {{"--help"}, {"example", "--list"}, {"steps"}};
  for (const std::string& command : tool_commands()) pages.push_back({command, "--help"});
  for (const std::string width : {"80", "60"}) {
    for (const char* locale : {"C.UTF-8", "C"}) {
      for (const std::vector<std::string>& args : pages) {
        const RunResult r = run_binary(args, RunOptions().set_env("COLUMNS", width).set_env("LC_ALL", locale));
        INFO(r.describe());
        INFO("COLUMNS=" << width << " LC_ALL=" << locale);
        REQUIRE(r.exit_code == 0);
        CHECK(too_wide(r.out, std::stoul(width)).empty());
      }
    }
  }
}

TEST_CASE("Wrapped help keeps each description under its column and each example a runnable command", "[cli][width]") {
  const RunResult r = run_binary({"run", "--help"}, RunOptions().set_env("COLUMNS", "80"));
  REQUIRE(r.exit_code == 0);
  INFO(r.out);
  // --dtype's description, wrapped: its continuation starts at the description column (30).
  CHECK(contains(r.out,
                 "\n                              the arithmetic: float32, float64, float16 or\n"
                 "                              bfloat16; a 16-bit type rounds the inputs and\n"));
  // A footer example too long for the width is continued with " \".
  CHECK(contains(r.out,
                 "  attn-trace run data/gpt_causal.json --steps scores,weights --head 1 --dtype \\\n"
                 "      float64\n"));
  // Wide enough, nothing is wrapped: the description stays on its option's line.
  const RunResult wide = run_binary({"run", "--help"}, RunOptions().set_env("COLUMNS", "400"));
  CHECK(contains(wide.out,
                 "  --max-rows UINT=16          show at most this many rows of a table (first and last); 0: all\n"));
}

TEST_CASE("example --list and steps wrap under their second column", "[cli][width]") {
  const RunResult list = run_binary({"example", "--list"}, RunOptions().set_env("COLUMNS", "80"));
  REQUIRE(list.exit_code == 0);
  for (const std::string& line : split_lines(list.out)) {
    INFO(line);
    // A name in the first 21 columns, or a continued description under the column after it.
    CHECK((!starts_with(line, " ") || starts_with(line, std::string(21, ' '))));
  }
  const RunResult steps = run_binary({"steps"}, RunOptions().set_env("COLUMNS", "80"));
  REQUIRE(steps.exit_code == 0);
  CHECK(contains(steps.out,
                 "scores       (head, query, key)  ← q_heads, k_heads (q_rot, k_rot instead, with\n"
                 "               rope)\n"));
}

TEST_CASE("Without COLUMNS or a terminal the width is 80", "[cli][width]") {
  // A session of its own: no controlling terminal either, so neither stdout nor /dev/tty has a width.
  const RunOptions piped = RunOptions().unset("COLUMNS").without_terminal();
  const RunResult help = run_binary({"run", "--help"}, piped);
  REQUIRE(help.exit_code == 0);
  INFO(help.out);
  CHECK(too_wide(help.out, 80).empty());
  CHECK(attn::display_width(widest_line(help.out)) > 70);  // 80, not some narrower width
  // The default width was 100: at 80 the 85-column scores line of `steps` wraps.
  const RunResult steps = run_binary({"steps"}, piped);
  CHECK(contains(steps.out, "k_rot instead, with\n               rope)\n"));
  CHECK(too_wide(steps.out, 80).empty());
  // COLUMNS that is not a positive number is ignored.
  const RunResult zero = run_binary({"steps"}, RunOptions().set_env("COLUMNS", "0").without_terminal());
  CHECK(zero.out == steps.out);
}

TEST_CASE("The width of a terminal on stdout counts when COLUMNS is unset", "[cli][width]") {
  // The harness's pseudo-terminal is 72 columns wide (tests/cli/run_binary.cpp).
  const RunResult r = run_binary({"example", "--list"}, RunOptions().unset("COLUMNS").terminal().without_terminal());
  REQUIRE(r.exit_code == 0);
  INFO(r.out);
  CHECK(too_wide(r.out, 72).empty());
  CHECK(attn::display_width(widest_line(r.out)) > 62);
}

TEST_CASE("The default of --max-cols follows the width: a 16-token matrix is numbers at 200 columns, a heatmap at 80",
          "[cli][width]") {
  // 16 tokens, one head of d_k 2: the weights are a 16 × 16 matrix.
  std::string tokens, x, w;
  for (int t = 0; t < 16; ++t) {
    tokens += (t ? ", " : "") + fmt::format("\"t{}\"", t);
    x += (t ? ", " : "") + fmt::format("[{}, {}]", t % 3, (t * 7) % 5);
  }
  const std::string input = fmt::format(
      R"({{"tokens": [{}], "X": [{}], "W_q": [[1, 0], [0, 1]], "W_k": [[0, 1], [1, 0]], "W_v": [[1, 0], [0, 1]]}})",
      tokens, x);
  const RunResult wide = run_binary({"run", "-", "--steps", "weights", "--view", "auto"},
                                    RunOptions().input(input).set_env("COLUMNS", "200"));
  INFO(wide.describe());
  REQUIRE(wide.exit_code == 0);
  // Every column label shown, and no "…" column: the whole matrix as numbers (it was a heatmap while
  // --max-cols was 10 whatever the width).
  CHECK(contains(column_labels(wide.out), "  t7      t8"));
  CHECK(contains(column_labels(wide.out), "t15"));
  CHECK_FALSE(contains(column_labels(wide.out), "…"));
  CHECK(contains(wide.out, "0.0625  0.0625"));
  CHECK(too_wide(wide.out, 200).empty());
  const RunResult narrow = run_binary({"run", "-", "--steps", "weights", "--view", "auto"},
                                      RunOptions().input(input).set_env("COLUMNS", "80"));
  REQUIRE(narrow.exit_code == 0);
  CHECK(too_wide(narrow.out, 80).empty());
  CHECK(column_labels(narrow.out).empty());  // a heatmap: no row of column labels over numbers
  // An explicit --max-cols still rules.
  const RunResult capped = run_binary({"run", "-", "--steps", "weights", "--view", "numbers", "--max-cols", "4"},
                                      RunOptions().input(input).set_env("COLUMNS", "200"));
  REQUIRE(capped.exit_code == 0);
  INFO(capped.out);
  CHECK(contains(column_labels(capped.out), "t0      t1  …     t14     t15"));
}
