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
