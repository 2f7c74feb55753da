// attn-trace explore (docs/explorer.md): where the page goes, what it holds, and the one-line errors.
// tests/explorer/browser_test.py opens the page in a browser and edits it; tests/explorer/core_test.py
// checks the WebAssembly core's traces against the tool's.

#include <filesystem>
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

// The text of the page's <script type="application/json" id="NAME"> block.
std::string json_block(const std::string& page, const std::string& id) {
  const std::string open = "<script type=\"application/json\" id=\"" + id + "\">";
  const std::size_t from = page.find(open);
  if (from == std::string::npos) return "";
  const std::size_t start = from + open.size();
  return page.substr(start, page.find("</script>", start) - start);
}

}  // namespace

#if ATTN_EXPLORER_BUILT

TEST_CASE("explore writes one page under 2 MB that holds the core, the input as written and the tool's trace",
          "[cli][explore]") {
  const TempDir dir;
  const RunResult r = run_binary({"explore", cat_sat, "-o", dir / "p.html"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
  const std::string page = read_file(dir / "p.html");
  CHECK(starts_with(page, "<!DOCTYPE html>"));
  CHECK(page.size() < 2'000'000);
  CHECK(contains(page, "AttnCore"));  // the WebAssembly core's loader
  // The input byte for byte as the file has it (it holds no '<' to escape), and the trace of run --json.
  CHECK(json_block(page, "input-data") == read_file(cat_sat));
  CHECK(json_block(page, "trace-data") == run_binary({"run", cat_sat, "--engine", "both", "--json", "-"}).out);
  // Nothing to fetch: no address of any kind in a src or an href.
  CHECK_FALSE(contains(page, "src=\"http"));
  CHECK_FALSE(contains(page, "href=\"http"));
  CHECK_FALSE(contains(page, "src=\"//"));
}

TEST_CASE("explore's engine, dtype, tiles and backward pass are the page's settings and its first trace",
          "[cli][explore]") {
  const RunResult r = run_binary({"explore", gpt, "--engine", "flash", "--dtype", "float64", "--block-q", "2",
                                  "--block-k", "3", "--backward", "-o", "-"});
  check_success(r);
  const nlohmann::json options = nlohmann::json::parse(json_block(r.out, "explorer-options"));
  CHECK(options["engine"] == "flash");
  CHECK(options["dtype"] == "float64");
  CHECK(options["block_q"] == 2);
  CHECK(options["block_k"] == 3);
  CHECK(options["backward"] == true);
  CHECK(json_block(r.out, "trace-data") == run_binary({"run", gpt, "--engine", "flash", "--dtype", "float64",
                                                       "--block-q", "2", "--block-k", "3", "--backward", "--json", "-"})
                                               .out);
}

TEST_CASE("explore without FILE opens with the worked example, and writes explorer.html by default", "[cli][explore]") {
  const TempDir dir;
  RunOptions in_dir;
  in_dir.working_directory = dir.path().string();
  const RunResult r = run_binary({"explore"}, in_dir);
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
  const std::string page = read_file(dir / "explorer.html");
  CHECK(json_block(page, "input-data") == read_file(cat_sat));
  CHECK(run_binary({"explore", "-o", "-"}).out == page);
}

TEST_CASE("explore writes no byte of an input's control characters and keeps its tokens in the page's JSON",
          "[cli][explore][controls]") {
  const TempDir dir;
  nlohmann::json input = nlohmann::json::parse(read_file(cat_sat));
  input["tokens"] = {"</script><b>bold",
                     "csi\xc2\x9b"
                     "2J",
                     "del\x7f"};
  write_file(dir / "hostile.json", input.dump());
  const RunResult r = run_binary({"explore", dir / "hostile.json", "-o", "-"});
  check_success(r);
  CHECK_FALSE(contains(r.out, "</script><b>"));
  CHECK_FALSE(contains(r.out, "\xc2\x9b"));
  CHECK_FALSE(contains(r.out, "\x7f"));
  // The escapes read back as the same tokens.
  CHECK(nlohmann::json::parse(json_block(r.out, "input-data"))["tokens"] == input["tokens"]);
  CHECK(nlohmann::json::parse(json_block(r.out, "trace-data"))["input"]["tokens"] == input["tokens"]);
}

TEST_CASE("explore refuses a bad input or option in one line with exit 2 and writes no page", "[cli][explore]") {
  const TempDir dir;
  const std::string out = dir / "p.html";
  check_usage_error(run_binary({"explore", source_path("tests/data/bad/missing_W_q.json"), "-o", out}),
                    {"/W_q: missing"});
  check_usage_error(run_binary({"explore", cat_sat, "--engine", "naive", "--block-q", "2", "-o", out}), {"--block-q"});
  check_usage_error(run_binary({"explore", cat_sat, "--max-memory", "1K", "-o", out}), {"--max-memory 1K"});
  check_usage_error(run_binary({"explore", dir / "none.json", "-o", out}), {"none.json"});
  CHECK_FALSE(std::filesystem::exists(out));
}

#else

TEST_CASE("explore, in a tool built without the WebAssembly core, says in one line how to get it (exit 2)",
          "[cli][explore]") {
  const TempDir dir;
  const std::string out = dir / "p.html";
  check_usage_error(run_binary({"explore", cat_sat, "-o", out}),
                    {"without the explorer's WebAssembly core", "emscripten"});
  CHECK_FALSE(std::filesystem::exists(out));
}

#endif
