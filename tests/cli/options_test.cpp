// Every option means something (docs/cli.md): an option that cannot apply is refused with exit 2 and
// a line saying what to use instead, and the filtering options work on every command that takes them.

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");
const std::string gpt = source_path("data/gpt_causal.json");  // 2 heads, causal, W_o

// The head labels of a step's tables: "head 0", "head 1", …
std::vector<std::string> head_captions(const std::string& trace, const std::string& step) {
  std::vector<std::string> heads;
  for (const std::string& line : step_section(trace, step)) {
    const std::vector<std::string> words = words_of(line);
    if (words.size() >= 2 && words[0] == "head") heads.push_back(words[0] + " " + words[1]);
  }
  return heads;
}

}  // namespace

TEST_CASE("run --steps tiles with the naive engine is refused, naming --engine flash", "[cli][options]") {
  check_usage_error(run_binary({"run", cat_sat, "--steps", "tiles"}), {"--steps tiles", "--engine flash"});
  check_usage_error(run_binary({"run", cat_sat, "--steps", "q,tiles"}), {"--steps tiles"});
  check_success(run_binary({"run", cat_sat, "--steps", "tiles", "--engine", "flash"}));
  check_success(run_binary({"run", cat_sat, "--steps", "tiles", "--engine", "both"}));
}

TEST_CASE("run --block-q or --block-k with the naive engine is refused, naming --engine flash", "[cli][options]") {
  check_usage_error(run_binary({"run", cat_sat, "--block-q", "2"}), {"--block-q", "--engine flash"});
  check_usage_error(run_binary({"run", cat_sat, "--block-k", "1"}), {"--block-k", "--engine flash"});
  check_success(run_binary({"run", cat_sat, "--block-q", "2", "--engine", "flash"}));
}

TEST_CASE("run --engine flash --steps weights says in one line that flash never forms the whole matrix",
          "[cli][options]") {
  const RunResult r = run_binary({"run", cat_sat, "--engine", "flash", "--steps", "scores,weights"});
  check_success(r);
  CHECK(contains(r.out, "note: flash never forms the whole scores, weights matrix"));
  CHECK(contains(r.out, "━━ flash "));  // the tiles are there
  CHECK(step_headings(r.out) == std::vector<std::string>{"flash"});
  // Asked for steps it does form, there is nothing to explain.
  CHECK_FALSE(contains(run_binary({"run", cat_sat, "--engine", "flash", "--steps", "q"}).out, "note:"));
  CHECK_FALSE(contains(run_binary({"run", cat_sat, "--engine", "both", "--steps", "weights"}).out, "note:"));
}

TEST_CASE("The README's run line with --steps, --head and --dtype works on a two-head example", "[cli][options]") {
  const RunResult r = run_binary({"run", gpt, "--steps", "scores,weights", "--head", "1", "--dtype", "float64"});
  check_success(r);
  CHECK(step_headings(r.out) == std::vector<std::string>{"scores", "weights"});
  CHECK(head_captions(r.out, "weights") == std::vector<std::string>{"head 1"});
}

TEST_CASE("compare --steps and --head print those steps before the comparison", "[cli][options][compare]") {
  const RunResult r = run_binary({"compare", gpt, "--steps", "weights", "--head", "1"});
  check_success(r);
  // A score step brings its flash counterpart, the tiles, as in run.
  CHECK(step_headings(r.out) == std::vector<std::string>{"weights", "flash", "compare"});
  CHECK(head_captions(r.out, "weights") == std::vector<std::string>{"head 1"});
  CHECK(contains(r.out, "verdict: PASS"));
  // --head alone: every step of that head, the flash tiles of that head only, then the comparison.
  const RunResult head = run_binary({"compare", gpt, "--head", "0"});
  check_success(head);
  CHECK(head_captions(head.out, "scores") == std::vector<std::string>{"head 0"});
  CHECK(contains(head.out, "── head 0 · query tile"));
  CHECK_FALSE(contains(head.out, "── head 1 · query tile"));
  CHECK(contains(head.out, "verdict: PASS"));
  // Without them, the comparison alone, as before.
  CHECK(step_headings(run_binary({"compare", gpt}).out) == std::vector<std::string>{"compare"});
}

TEST_CASE("show --steps and --head print only those steps and that head of a saved trace", "[cli][options][show]") {
  const TempDir dir;
  const std::string saved = dir / "gpt.json";
  check_success(run_binary({"run", gpt, "--engine", "both", "--json", saved}));
  // The same selection made by run and by show prints the same text.
  for (const std::vector<std::string>& pick : {std::vector<std::string>{"--steps", "weights"},
                                               {"--head", "1"},
                                               {"--steps", "q,scores,tiles", "--head", "0"},
                                               {"--steps", "output"}}) {
    std::vector<std::string> run_args{"run", gpt, "--engine", "both"}, show_args{"show", saved};
    run_args.insert(run_args.end(), pick.begin(), pick.end());
    show_args.insert(show_args.end(), pick.begin(), pick.end());
    const RunResult ran = run_binary(run_args), shown = run_binary(show_args);
    INFO(pick[0] << " " << pick[1]);
    check_success(shown);
    CHECK(shown.out == ran.out);
  }
}

TEST_CASE("show refuses --steps tiles on a trace without a flash pass, and a head the trace does not hold",
          "[cli][options][show]") {
  const TempDir dir;
  check_success(run_binary({"run", gpt, "--json", dir / "naive.json"}));
  check_usage_error(run_binary({"show", dir / "naive.json", "--steps", "tiles"}),
                    {"--steps tiles", "saved without it; save one with attn-trace run FILE --engine flash"});
  check_success(run_binary({"run", gpt, "--head", "1", "--json", dir / "head1.json"}));
  check_usage_error(run_binary({"show", dir / "head1.json", "--head", "0"}), {"--head 0", "holds head 1 only"});
  check_success(run_binary({"show", dir / "head1.json", "--head", "1"}));
  check_usage_error(run_binary({"show", dir / "naive.json", "--head", "2"}), {"--head 2", "2 heads"});
}

TEST_CASE("A flash trace saved without its tiles still holds every row's lse, and show reads it",
          "[cli][options][show]") {
  const TempDir dir;
  check_success(run_binary(
      {"run", source_path("data/gqa.json"), "--engine", "flash", "--steps", "q,output", "--json", dir / "lean.json"}));
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir / "lean.json"));
  CHECK(trace.at("flash").at("tiles").empty());
  // gqa.json: 4 heads × 4 queries
  REQUIRE(trace.at("flash").at("lse").size() == 4);
  CHECK(trace.at("flash").at("lse").at(0).size() == 4);
  check_success(run_binary({"show", dir / "lean.json"}));
  // A trace written before lse was always kept holds []: it still reads.
  nlohmann::json old = trace;
  old["flash"]["lse"] = nlohmann::json::array();
  std::ofstream(dir / "old.json") << old.dump();
  check_success(run_binary({"show", dir / "old.json"}));
}
