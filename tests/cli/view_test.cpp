// --view and the heatmaps of the terminal trace (docs/cli.md, "Views"): what a heatmap shows of masked
// cells, row sums and emptied rows, checked on the bundled examples whose weights are known by hand.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

// The lines of `text` that start with "  " + `label` + a space.
std::vector<std::string> rows_of(const std::string& text, const std::string& label) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (starts_with(line, "  " + label + " ")) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("A heatmap of causal weights draws masked cells as a hatch and a weight of 1 at the top of the ramp",
          "[cli][view]") {
  // gpt_causal.json, head 0: "The" sees only itself, so its weight on "The" is exactly 1 and the other
  // three keys are masked.
  const RunResult r = run_binary({"run", source_path("data/gpt_causal.json"), "--steps", "weights", "--head", "0",
                                  "--view", "heatmap", "--color", "never"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const auto the = rows_of(r.out, "The");
  REQUIRE(the.size() == 1);
  CHECK(contains(the[0], "@@//////"));  // two characters a cell: 1.0 is '@', the masked cells '/'
  CHECK(contains(the[0], "Σ 1.0000"));
  CHECK(contains(r.out, "removed by the mask"));
  CHECK(contains(r.out, "0.0000 [ .:-=+*#%@] 1.0000"));  // the legend: its range and its ramp
}

TEST_CASE("Masked weights are written as a dot in numbers, never as 0.0000", "[cli][view]") {
  const RunResult r = run_binary(
      {"run", source_path("data/gpt_causal.json"), "--steps", "weights", "--head", "0", "--view", "numbers"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const auto the = rows_of(r.out, "The");
  REQUIRE(the.size() == 1);
  CHECK(contains(the[0], "1.0000       ·       ·       ·"));
  CHECK(contains(r.out, "the mask removed this query-key pair"));
}

TEST_CASE("Rows that a mask emptied are marked in the heatmap and the caption does not claim they sum to 1",
          "[cli][view]") {
  // padding_empty_item.json: batch item 1 keeps no key, so its 3 rows of weights are all 0.
  const RunResult r = run_binary({"run", source_path("tests/python/inputs/padding_empty_item.json"), "--steps",
                                  "weights", "--view", "heatmap", "--color", "never"},
                                 RunOptions().set_env("COLUMNS", "200"));
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "sums to 1, except the 3 rows that the mask left with no key"));
  const auto pad = rows_of(r.out, "pad");
  REQUIRE(pad.size() == 4);  // batch 0's "pad" query, then batch 1's three
  CHECK(contains(pad[0], "Σ 1.0000"));
  for (std::size_t k = 1; k < 4; ++k) CHECK(contains(pad[k], "empty: masked"));

  const RunResult numbers = run_binary(
      {"run", source_path("tests/python/inputs/padding_empty_item.json"), "--steps", "weights", "--view", "numbers"});
  CHECK(contains(numbers.out, "the mask left pad, pad, pad with no key to attend"));
}

TEST_CASE("The auto view prints numbers when a matrix fits and a heatmap when it does not", "[cli][view]") {
  const std::string cat_sat = source_path("data/the_cat_sat.json");
  const RunResult fits = run_binary({"run", cat_sat, "--steps", "weights"});
  CHECK(contains(fits.out, "0.7679"));
  CHECK_FALSE(contains(fits.out, "low to high"));
  // Two columns at most: the 3 × 3 weights no longer fit, so they become a heatmap.
  const RunResult narrow = run_binary({"run", cat_sat, "--steps", "weights", "--max-cols", "2"});
  CHECK(contains(narrow.out, "(low to high)"));
  const auto cat = rows_of(narrow.out, "cat");
  REQUIRE(cat.size() == 1);
  CHECK_FALSE(contains(cat[0], "0.7679"));
  CHECK(contains(narrow.out, "0.0000 [ .:-=+*#%@] 0.7679"));  // the legend's range: 0 to the largest weight
  // And --view numbers keeps the numbers, eliding columns.
  const RunResult numbers = run_binary({"run", cat_sat, "--steps", "weights", "--max-cols", "2", "--view", "numbers"});
  CHECK(contains(numbers.out, "1 of 3 columns not shown"));
}

TEST_CASE("compare shows naive and flash column by column and honours --max-cols", "[cli][view]") {
  const RunResult c = run_binary({"compare", source_path("data/gqa.json"), "--max-cols", "4", "--view", "numbers"});
  INFO(c.describe());
  REQUIRE(c.exit_code == 0);
  // --max-cols 4: the first and the last pair of columns.
  CHECK(contains(c.out, "naive 0  flash 0  …  naive 3  flash 3"));
  CHECK(contains(c.out, "columns not shown"));
  CHECK(contains(c.out, "A ULP (unit in the last place)"));
  CHECK_FALSE(contains(c.out, "naive 1"));
}

TEST_CASE("An unknown view is a usage error", "[cli][view]") {
  check_error(run_binary({"run", source_path("data/the_cat_sat.json"), "--view", "pie"}),
              "attn-trace: error: ", {"--view"});
}

namespace {

// Tokens t0 … t{n-1}, as one --tokens argument.
std::string numbered_tokens(std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i > 0 ? " t" : "t") + std::to_string(i);
  return out;
}

// The cells of a heatmap line without colour: what follows the label, up to the row sum.
std::string cells_of(const std::string& line) {
  const std::size_t start = line.find_first_not_of(' ', line.find(' ', 2));
  const std::size_t sum = line.find("Σ");
  return line.substr(start, sum == std::string::npos ? std::string::npos : sum - start);
}

}  // namespace

TEST_CASE("A long causal input's heatmap scales each row to its own largest weight, and the legend says so",
          "[cli][view]") {
  // 64 tokens under a causal mask: row i spreads over i + 1 keys, so its largest weight is far below
  // row 0's 1. On one 0-to-1 scale (absolute) the late rows are all the bottom of the ramp; on the row
  // scale, auto's choice here, each row's largest is '@' like row 0's.
  const TempDir dir;
  REQUIRE(run_binary({"new", "--tokens", numbered_tokens(64), "--mask", "causal", "-o", dir / "long.json"}).exit_code ==
          0);
  const RunOptions wide = RunOptions().set_env("COLUMNS", "200");
  const auto heatmap = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"run",    dir / "long.json", "--steps", "weights",
                                     "--view", "heatmap",         "--color", "never"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = run_binary(args, wide);
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  const std::string automatic = heatmap({}), row = heatmap({"--color-scale", "row"}),
                    absolute = heatmap({"--color-scale", "absolute"}), log = heatmap({"--color-scale", "log"});
  CHECK(automatic == row);
  CHECK(contains(row, "0 [ .:-=+*#%@] row's largest"));
  CHECK(contains(row, "row scale: each row from 0 to its own largest weight"));
  CHECK(contains(absolute, "absolute scale: one scale for every row"));
  CHECK(contains(log, "log scale: log10 of the weight"));
  for (const std::string token : {"t20", "t40", "t63"}) {
    const auto in_row = rows_of(row, token), in_absolute = rows_of(absolute, token);
    REQUIRE(in_row.size() == 1);
    REQUIRE(in_absolute.size() == 1);
    const std::string r = cells_of(in_row[0]), a = cells_of(in_absolute[0]);
    INFO(token << " row: [" << r << "] absolute: [" << a << "]");
    CHECK(contains(r, "@@"));                               // the row's largest weight
    CHECK(a.find_first_of("=+*#%@") == std::string::npos);  // nothing above the ramp's middle
    if (token != "t63") CHECK(contains(r, "//"));           // the keys after it: masked, on every scale
    if (token != "t63") CHECK(contains(a, "//"));
  }
}

TEST_CASE("The worked example keeps one scale from 0 to its largest weight, and says so", "[cli][view]") {
  // "The cat sat": rows' largest weights 0.768, 0.768 and 1/3 differ by 2.3 times, under auto's 4.
  const RunResult r = run_binary(
      {"run", source_path("data/the_cat_sat.json"), "--steps", "weights", "--view", "heatmap", "--color", "never"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "0.0000 [ .:-=+*#%@] 0.7679"));
  CHECK(contains(r.out, "absolute scale: one scale for every row"));
  check_usage_error(run_binary({"run", source_path("data/the_cat_sat.json"), "--color-scale", "rows"}),
                    {"--color-scale"});
}

TEST_CASE("A heatmap of scores near ±1e308, whose span is past the largest double, shades each end as its own",
          "[cli][view]") {
  // By hand: q = k = x, so the scores are ±(1.2e154)² = ±1.44e308: on the diagonal positive ('#', the top of
  // the diverging ramp) and off it negative ('=', its bottom). Under the sanitizers a NaN shade cast to an
  // index is undefined behaviour and stops the program.
  const RunResult r = run_binary({"run", source_path("tests/data/fuzz/heatmap_span_overflow.json"), "--dtype",
                                  "float64", "--steps", "scores", "--view", "heatmap", "--color", "never"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const auto big = rows_of(r.out, "big"), small = rows_of(r.out, "small");
  REQUIRE(big.size() == 1);
  REQUIRE(small.size() == 1);
  CHECK(contains(big[0], "##=="));
  CHECK(contains(small[0], "==##"));
}
