// attn-trace plot (docs/cli.md, "plot"): an SVG on stdout or in the file -o names, from an input or a
// saved trace alike; every option that cannot apply is one line and exit 2, with nothing written.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");
const std::string gpt = source_path("data/gpt_causal.json");       // 2 heads, causal
const std::string gqa = source_path("data/gqa.json");              // 4 query heads on 2 key/value heads
const std::string padded = source_path("data/padded_batch.json");  // a batch of 2

bool is_svg(const std::string& text) {
  return starts_with(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ") && text.size() > 7 &&
         text.substr(text.size() - 7) == "</svg>\n";
}

}  // namespace

TEST_CASE("plot writes the weights as SVG to stdout, with -o - too, or to the file -o names", "[cli][plot]") {
  const RunResult out = run_binary({"plot", cat_sat});
  check_success(out);
  CHECK(is_svg(out.out));
  CHECK(contains(out.out, "<title>attn-trace: weights, head 0</title>"));
  CHECK(run_binary({"plot", cat_sat, "-o", "-"}).out == out.out);
  CHECK(run_binary({"plot", cat_sat, "--step", "weights"}).out == out.out);

  const TempDir dir;
  const RunResult file = run_binary({"plot", cat_sat, "-o", dir / "weights.svg"});
  INFO(file.describe());
  CHECK(file.exit_code == 0);
  CHECK(file.out.empty());
  CHECK(file.err.empty());
  CHECK(read_file(dir / "weights.svg") == out.out);
}

TEST_CASE("plot draws a saved trace exactly as it draws the input the trace was made from", "[cli][plot]") {
  const TempDir dir;
  for (const std::string dtype : {"float32", "float64"}) {
    REQUIRE(run_binary({"run", gpt, "--dtype", dtype, "--json", dir / "gpt.json"}).exit_code == 0);
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{}, {"--step", "scores", "--head", "1"}, {"--step", "masked", "--all-heads"}}) {
      std::vector<std::string> from_input{"plot", gpt, "--dtype", dtype}, from_trace{"plot", dir / "gpt.json"};
      from_input.insert(from_input.end(), extra.begin(), extra.end());
      from_trace.insert(from_trace.end(), extra.begin(), extra.end());
      const RunResult input = run_binary(from_input), trace = run_binary(from_trace);
      check_success(input);
      check_success(trace);
      CHECK(input.out == trace.out);
    }
  }
  // A trace saved with --head holds that head, which is then the default.
  REQUIRE(run_binary({"run", gqa, "--head", "3", "--json", dir / "head3.json"}).exit_code == 0);
  const RunResult head3 = run_binary({"plot", dir / "head3.json"});
  check_success(head3);
  CHECK(contains(head3.out, "data-head=\"3\""));
  CHECK(contains(run_binary({"plot", dir / "head3.json", "--step", "k_heads"}).out, "data-head=\"1\""));
}

TEST_CASE("plot --engine both draws the naive engine's matrices, flash draws the steps it forms", "[cli][plot]") {
  const RunResult both = run_binary({"plot", gpt, "--engine", "both"});
  check_success(both);
  CHECK(both.out == run_binary({"plot", gpt}).out);
  const RunResult flash = run_binary({"plot", gpt, "--engine", "flash", "--step", "head_outputs"});
  check_success(flash);
  CHECK(is_svg(flash.out));
}

TEST_CASE("plot --help explains the default head and shows Examples", "[cli][plot][help]") {
  const RunResult r = run_binary({"plot", "--help"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "head 0"));
  CHECK(contains(r.out, "--all-heads"));
  CHECK(contains(r.out, "Example"));
  CHECK(contains(r.out, "attn-trace plot data/the_cat_sat.json"));
}

TEST_CASE("plot refuses an unknown step, naming the nearest", "[cli][plot][errors]") {
  check_usage_error(run_binary({"plot", cat_sat, "--step", "weight"}),
                    {"--step: unknown step \"weight\"", "did you mean \"weights\"?", "q,k,v"});
  check_usage_error(run_binary({"plot", cat_sat, "--step", "tiles"}), {"unknown step \"tiles\""});
}

TEST_CASE("plot refuses a step the trace does not hold, saying how to get it", "[cli][plot][errors]") {
  check_usage_error(run_binary({"plot", gpt, "--engine", "flash"}),
                    {"--step weights", "flash engine never forms", "--engine naive"});
  check_usage_error(run_binary({"plot", gpt, "--engine", "flash", "--step", "scores"}), {"--step scores", "flash"});
  const TempDir dir;
  REQUIRE(run_binary({"run", gpt, "--engine", "flash", "--json", dir / "flash.json"}).exit_code == 0);
  check_usage_error(run_binary({"plot", dir / "flash.json"}),
                    {"--step weights", "made by the flash engine", "--engine naive"});
  REQUIRE(run_binary({"run", gpt, "--steps", "q", "--json", dir / "q.json"}).exit_code == 0);
  check_usage_error(run_binary({"plot", dir / "q.json", "--step", "scores"}),
                    {"--step scores", "does not hold", "saved with --steps"});
  check_success(run_binary({"plot", dir / "q.json", "--step", "q"}));
}

TEST_CASE("plot refuses a head or batch item the input does not have", "[cli][plot][errors]") {
  check_usage_error(run_binary({"plot", gpt, "--head", "2"}), {"--head 2", "2 heads, 0 to 1"});
  check_usage_error(run_binary({"plot", cat_sat, "--head", "1"}), {"--head 1", "one head"});
  check_usage_error(run_binary({"plot", gpt, "--batch", "1"}), {"--batch 1", "one sequence"});
  check_usage_error(run_binary({"plot", padded, "--batch", "2"}), {"--batch 2", "2 batch items, 0 to 1"});
  check_success(run_binary({"plot", padded, "--batch", "1"}));
  const TempDir dir;
  REQUIRE(run_binary({"run", gqa, "--head", "3", "--json", dir / "head3.json"}).exit_code == 0);
  check_usage_error(run_binary({"plot", dir / "head3.json", "--head", "1"}), {"--head 1", "holds head 3 only"});
}

TEST_CASE("plot refuses --head with --all-heads, and either with a step that has no head axis", "[cli][plot][errors]") {
  check_usage_error(run_binary({"plot", gpt, "--head", "1", "--all-heads"}), {"--head", "--all-heads"});
  check_usage_error(run_binary({"plot", gpt, "--step", "q", "--head", "1"}), {"--head", "q step has no head axis"});
  check_usage_error(run_binary({"plot", gpt, "--step", "output", "--all-heads"}),
                    {"--all-heads", "output step has no head axis", "q_heads"});
}

TEST_CASE("plot writes nothing when it refuses, and names the file it could not write", "[cli][plot][output]") {
  const TempDir dir;
  check_usage_error(run_binary({"plot", gpt, "--head", "5", "-o", dir / "no.svg"}));
  CHECK_FALSE(std::filesystem::exists(dir / "no.svg"));
  check_write_error(run_binary({"plot", cat_sat}, RunOptions().output_to("/dev/full")), "stdout",
                    {"No space left on device"});
  check_write_error(run_binary({"plot", cat_sat, "-o", dir / "missing/fig.svg"}), dir / "missing/fig.svg");
}

namespace {

std::string numbered_tokens(std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i > 0 ? " t" : "t") + std::to_string(i);
  return out;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

}  // namespace

TEST_CASE("plot of a 512-token input draws at most 128 × 128 pooled cells and says so, on the figure and on stderr",
          "[cli][plot]") {
  // Every cell would be 262,144 <rect>s, about 36 MB; pooled 4 × 4 it is 16,384.
  const TempDir dir;
  REQUIRE(
      run_binary({"new", "--tokens", numbered_tokens(512), "--mask", "causal", "-o", dir / "long.json"}).exit_code ==
      0);
  RunOptions slow;
  slow.timeout = std::chrono::seconds(60);
  const RunResult r = run_binary({"plot", dir / "long.json", "-o", dir / "long.svg"}, slow);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const std::string svg = read_file(dir / "long.svg");
  CHECK(is_svg(svg));
  CHECK(svg.size() < 4'000'000);
  CHECK(count_of(svg, "<rect class=\"cell\"") == 128 * 128);
  CHECK(contains(svg, "data-pool=\"4\""));
  CHECK(contains(svg, "512 × 512 cells drawn as 128 × 128: each the mean of a 4 × 4 block"));
  CHECK(contains(svg, ">row scale</text>"));  // a long causal input: auto's row scale, named on the colour bar
  CHECK(contains(r.err, "plot: 512 × 512 cells drawn pooled, each the mean of a 4 × 4 block"));
  CHECK(contains(r.err, "--max-cells 0 draws every cell"));
  CHECK(count_of(r.err, "\n") == 1);

  // A smaller limit pools more; --max-cells 0 draws every cell (of 160 tokens here), and says nothing.
  const RunResult coarse = run_binary({"plot", dir / "long.json", "--max-cells", "100"}, slow);
  CHECK(coarse.exit_code == 0);
  CHECK(count_of(coarse.out, "<rect class=\"cell\"") == 86 * 86);  // ⌈512 / 100⌉ = 6 a side: ⌈512 / 6⌉ = 86
  REQUIRE(run_binary({"new", "--tokens", numbered_tokens(160), "-o", dir / "160.json"}).exit_code == 0);
  const RunResult pooled = run_binary({"plot", dir / "160.json", "--step", "scores"}, slow);
  CHECK(pooled.exit_code == 0);
  CHECK(count_of(pooled.out, "<rect class=\"cell\"") == 80 * 80);  // 2 a side
  CHECK(contains(pooled.err, "each the mean of a 2 × 2 block"));
  const RunResult every = run_binary({"plot", dir / "160.json", "--step", "scores", "--max-cells", "0"}, slow);
  INFO(every.describe());
  CHECK(every.exit_code == 0);
  CHECK(every.err.empty());
  CHECK(count_of(every.out, "<rect class=\"cell\"") == 160 * 160);
}

TEST_CASE("plot of the worked example draws every cell on the absolute scale, and asks nothing of stderr",
          "[cli][plot]") {
  const RunResult r = run_binary({"plot", cat_sat});
  check_success(r);
  CHECK(r.err.empty());
  CHECK(count_of(r.out, "<rect class=\"cell\"") == 9);
  CHECK(contains(r.out, ">absolute scale</text>"));
  CHECK(contains(r.out, "absolute scale: one scale for every row"));
  const RunResult log = run_binary({"plot", cat_sat, "--color-scale", "log"});
  check_success(log);
  CHECK(contains(log.out, ">log scale</text>"));
}
