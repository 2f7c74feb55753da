// run --engine flash on an input of more than 24 tiles (docs/cli.md, "Flash tiles in the terminal"):
// the terminal shows a summary, a line says how to see every tile, --steps tiles still prints them all,
// and the JSON trace keeps them all. The tile counts are worked out from the tile size the trace names.

#include <cstddef>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
using namespace std::chrono_literals;

namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++count;
  return count;
}

// ceil(a / b)
std::size_t tiles_along(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

}  // namespace

TEST_CASE("run --engine flash on 512 tokens prints a summary of its tiles, and --steps tiles and --json keep them all",
          "[cli][flash][summary]") {
  const TempDir dir;
  std::string tokens;
  for (int k = 0; k < 512; ++k) tokens += fmt::format("{}t{}", k == 0 ? "" : " ", k);
  const std::string input = dir / "long.json";
  REQUIRE(run_binary({"new", "--tokens", tokens, "--d-model", "4", "--mask", "causal", "-o", input}).exit_code == 0);

  const RunResult json = run_binary({"run", input, "--engine", "flash", "--json", "-"}, RunOptions().wait_at_most(60s));
  check_success(json);
  const nlohmann::json trace = nlohmann::json::parse(json.out);
  const std::size_t Br = trace["flash"]["block_q"], Bc = trace["flash"]["block_k"];
  // One head of 512 queries by 512 keys: every query tile meets every key tile (the mask's skipped
  // ones are still listed).
  const std::size_t tiles = tiles_along(512, Br) * tiles_along(512, Bc);
  REQUIRE(trace["flash"]["tiles"].size() == tiles);
  REQUIRE(tiles > 24);

  const RunResult r = run_binary({"run", input, "--engine", "flash"}, RunOptions().wait_at_most(60s));
  check_success(r);
  // Six tiles, their tables fitted to 16 rows, and the steps: about 34 KB and 1000 lines (a tile's
  // heading lists its tokens, over several lines), where every tile took 8.8 MB.
  CHECK(r.out.size() < 100'000);
  CHECK(split_lines(r.out).size() < 2000);
  CHECK(contains(r.out, fmt::format("{} tiles, too many to print: {} query tiles × {} key tiles for head 0", tiles,
                                    tiles_along(512, Br), tiles_along(512, Bc))));
  CHECK(contains(r.out, fmt::format("── ... {} tiles not shown ...", tiles - 6)));
  CHECK(contains(r.out,
                 fmt::format("6 of {} tiles shown: --steps tiles shows every one; --json OUT keeps them all", tiles)));
  CHECK(count_of(r.out, " × key tile ") == 6);
  // The state at the end: the last query tile's result.
  CHECK(contains(r.out, fmt::format("query tile {} (", tiles_along(512, Br) - 1)));
  CHECK(contains(r.out, "done: O / l, lse = m + log l"));

  const RunResult all =
      run_binary({"run", input, "--engine", "flash", "--steps", "tiles"}, RunOptions().wait_at_most(120s));
  check_success(all);
  CHECK(count_of(all.out, " × key tile ") == tiles);
  CHECK(count_of(all.out, "done: O / l, lse = m + log l") == tiles_along(512, Br));
  CHECK_FALSE(contains(all.out, "tiles not shown"));
}

TEST_CASE("A flash run of 24 tiles or fewer prints every one of them", "[cli][flash][summary]") {
  // The worked example: 3 tokens in tiles of 1 × 1 is 3 · 3 = 9 tiles; of 1 × 1 over the GPT-style
  // input, 4 · 4 · 2 heads = 32, past 24, so it is summarised; with --head 1, 16, so it is not.
  const RunResult small = run_binary(
      {"run", source_path("data/the_cat_sat.json"), "--engine", "flash", "--block-q", "1", "--block-k", "1"});
  check_success(small);
  CHECK(count_of(small.out, " × key tile ") == 9);
  CHECK_FALSE(contains(small.out, "tiles shown"));
  const std::string gpt = source_path("data/gpt_causal.json");
  const RunResult both = run_binary({"run", gpt, "--engine", "flash", "--block-q", "1", "--block-k", "1"});
  check_success(both);
  CHECK(count_of(both.out, " × key tile ") == 6);
  CHECK(contains(both.out, "32 tiles, too many to print: 4 query tiles × 4 key tiles for each of 2 heads"));
  CHECK(contains(both.out, "6 of 32 tiles shown: --steps tiles shows every one (with --head H, one head's)"));
  const RunResult one =
      run_binary({"run", gpt, "--engine", "flash", "--block-q", "1", "--block-k", "1", "--head", "1"});
  check_success(one);
  CHECK(count_of(one.out, " × key tile ") == 16);
}
