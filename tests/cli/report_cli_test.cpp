// attn-trace report (docs/cli.md, "report"): where the page goes, what FILE may be, and the one-line
// errors. tests/report/browser_test.py checks the page itself in a browser.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string gpt = source_path("data/gpt_causal.json");

bool is_page(const std::string& text) {
  return starts_with(text, "<!DOCTYPE html>") && contains(text, "id=\"trace-data\"") && contains(text, "</html>");
}

}  // namespace

TEST_CASE("report writes one HTML page to -o, and the very same page to stdout without -o or with -o -",
          "[cli][report]") {
  const TempDir dir;
  const RunResult to_file = run_binary({"report", gpt, "-o", dir / "gpt.html"});
  INFO(to_file.describe());
  CHECK(to_file.exit_code == 0);
  CHECK(to_file.out.empty());
  CHECK(to_file.err.empty());
  const std::string page = read_file(dir / "gpt.html");
  CHECK(is_page(page));
  const RunResult to_stdout = run_binary({"report", gpt});
  check_success(to_stdout);
  CHECK(to_stdout.out == page);
  CHECK(run_binary({"report", gpt, "-o", "-"}).out == page);
}

TEST_CASE("report of a trace saved by run --engine both is the report of its input", "[cli][report]") {
  const TempDir dir;
  check_success(run_binary({"run", gpt, "--engine", "both", "--json", dir / "gpt.json"}));
  const RunResult from_trace = run_binary({"report", dir / "gpt.json"});
  check_success(from_trace);
  CHECK(from_trace.out == run_binary({"report", gpt}).out);
  // --head and --steps cut a saved trace down as show does.
  const RunResult one_head = run_binary({"report", dir / "gpt.json", "--head", "1", "--steps", "weights"});
  check_success(one_head);
  CHECK(one_head.out == run_binary({"report", gpt, "--head", "1", "--steps", "weights"}).out);
}

TEST_CASE("report refuses, in one line with exit 2, what it cannot do, and leaves -o as it was", "[cli][report]") {
  const TempDir dir;
  const std::string out = dir / "page.html";
  check_success(run_binary({"run", gpt, "--engine", "both", "--json", dir / "gpt.json"}));
  check_usage_error(run_binary({"report", gpt, "--engine", "naive", "--block-q", "2", "-o", out}),
                    {"--block-q", "--engine flash"});
  check_usage_error(run_binary({"report", dir / "gpt.json", "--dtype", "float64", "-o", out}),
                    {"--dtype float64", "saved trace", "--dtype float32"});
  check_usage_error(run_binary({"report", dir / "gpt.json", "--block-k", "1", "-o", out}),
                    {"--block-k 1", "saved trace", "--block-k 2"});
  check_usage_error(run_binary({"report", gpt, "--steps", "weight", "-o", out}), {"did you mean \"weights\""});
  check_usage_error(run_binary({"report", gpt, "--head", "2", "-o", out}), {"--head 2"});
  check_usage_error(run_binary({"report", dir / "missing.json", "-o", out}), {"missing.json"});
  check_usage_error(run_binary({"report", gpt, "--json", dir / "x.json"}), {"--json"});
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK_FALSE(std::filesystem::exists(dir / "x.json"));
}

TEST_CASE("report --engine naive has no tile walk and says how to get one", "[cli][report]") {
  const RunResult r = run_binary({"report", gpt, "--engine", "naive"});
  check_success(r);
  CHECK(is_page(r.out));
  CHECK_FALSE(contains(r.out, "id=\"tile-state\""));
  CHECK(contains(r.out, "This trace has no flash pass"));
}

namespace {

std::string numbered_tokens(std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i > 0 ? " t" : "t") + std::to_string(i);
  return out;
}

}  // namespace

TEST_CASE("report draws flash − naive in units of compare's tolerance, white within it, and says the unit",
          "[cli][report]") {
  // The worked example: flash and naive differ in the last bits (max 5.96e-08 in float32), far inside
  // compare's tolerance, so every entry of the map is within −1 and 1: the white of "within the rule".
  const RunResult r = run_binary({"report", source_path("data/the_cat_sat.json")});
  check_success(r);
  CHECK(contains(r.out,
                 "id=\"diff-unit\">flash − naive in units of compare's tolerance 2 · max |naive − ref| + "
                 "noise = "));
  CHECK(contains(r.out, "white: within it (from −1 to 1)"));
  CHECK(contains(r.out, "\"neutral\":1,"));
  CHECK(contains(r.out, "\"range\":[-1,1]"));  // the map's reach: the band itself, as nothing leaves it
  CHECK(contains(r.out, "compare's verdict: <b class=\"pass\">pass</b>"));
  // Its weights keep one scale, and the legend says which.
  CHECK(contains(r.out, "data-scale=\"absolute\">absolute scale: one scale for every row</p>"));

  // A report of a saved run of both engines gets the same verdict by running compare's reference.
  const TempDir dir;
  REQUIRE(run_binary({"run", source_path("data/the_cat_sat.json"), "--engine", "both", "--json", dir / "cat.json"})
              .exit_code == 0);
  CHECK(run_binary({"report", dir / "cat.json"}).out == r.out);
}

TEST_CASE("report of a long causal input scales each row of the weights to its largest, as --color-scale says",
          "[cli][report]") {
  const TempDir dir;
  REQUIRE(run_binary({"new", "--tokens", numbered_tokens(64), "--mask", "causal", "-o", dir / "long.json"}).exit_code ==
          0);
  const RunResult automatic = run_binary({"report", dir / "long.json"});
  check_success(automatic);
  CHECK(contains(automatic.out, "\"name\":\"weights\""));
  CHECK(contains(automatic.out, "\"scale\":\"sequential\",\"weights\":\"row\",\"range\":[0,1]"));
  CHECK(contains(automatic.out, "data-scale=\"row\">row scale: each row from 0 to its own largest weight</p>"));
  const RunResult log = run_binary({"report", dir / "long.json", "--color-scale", "log"});
  check_success(log);
  CHECK(contains(log.out, "\"weights\":\"log\""));
  CHECK(contains(log.out, "data-scale=\"log\">log scale: log10 of the weight</p>"));
}
