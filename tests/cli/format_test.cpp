// `--format text|markdown|latex|csv` on run and show (docs/cli.md, "Documents: markdown, LaTeX, CSV"):
// each document from the real binary, the same from a saved trace as from the input, the mask's marks,
// and the command lines it refuses.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::vector<std::string> formats = {"text", "markdown", "latex", "csv"};

}  // namespace

TEST_CASE("run and show print every format of every step and exit 0", "[cli][format]") {
  TempDir dir;
  const std::string saved = dir / "cat.json";
  check_success(run_binary({"run", source_path("data/the_cat_sat.json"), "--json", saved}));
  for (const std::string& format : formats) {
    INFO("--format " << format);
    const RunResult run = run_binary({"run", source_path("data/the_cat_sat.json"), "--format", format});
    check_success(run);
    const RunResult show = run_binary({"show", saved, "--format", format});
    check_success(show);
    CHECK(show.out == run.out);
  }
}

TEST_CASE("The text format is the terminal trace as it was without --format", "[cli][format]") {
  const std::string input = source_path("data/gpt_causal.json");
  const RunResult plain = run_binary({"run", input});
  const RunResult text = run_binary({"run", input, "--format", "text"});
  check_success(text);
  CHECK(text.out == plain.out);
}

TEST_CASE("show of a saved trace as markdown equals run as markdown, with --steps and --head too", "[cli][format]") {
  TempDir dir;
  const std::string input = source_path("data/gpt_causal.json"), saved = dir / "gpt.json";
  check_success(run_binary({"run", input, "--json", saved}));
  const RunResult run = run_binary({"run", input, "--format", "markdown"});
  const RunResult show = run_binary({"show", saved, "--format", "markdown"});
  check_success(show);
  CHECK(show.out == run.out);
  const RunResult run_head =
      run_binary({"run", input, "--format", "markdown", "--steps", "scores,weights", "--head", "1"});
  const RunResult show_head =
      run_binary({"show", saved, "--format", "markdown", "--steps", "scores,weights", "--head", "1"});
  check_success(show_head);
  CHECK(show_head.out == run_head.out);
  CHECK(step_headings(run_head.out).empty());  // not the terminal's headings
  CHECK(contains(run_head.out, "## scores\n"));
  CHECK(contains(run_head.out, "**head 1**"));  // the one head left out of two says which it is
  CHECK_FALSE(contains(run_head.out, "## q\n"));
}

TEST_CASE("A causal mask prints minus infinity for masked scores and a dot for masked weights", "[cli][format]") {
  // gpt_causal.json: "The" is the first token, so the causal mask leaves it only itself; its weight
  // on itself is exactly 1, and the three later keys are removed.
  const std::string input = source_path("data/gpt_causal.json");
  const RunResult md = run_binary({"run", input, "--steps", "masked,weights", "--head", "0", "--format", "markdown"});
  check_success(md);
  CHECK(contains(md.out, "| The | 0.0000 | −∞ | −∞ | −∞ |"));
  CHECK(contains(md.out, "| The | 1.0000 | · | · | · |"));
  const RunResult tex = run_binary({"run", input, "--steps", "weights", "--head", "0", "--format", "latex"});
  check_success(tex);
  CHECK(contains(tex.out, "  The & $1.0000$ & $\\cdot$ & $\\cdot$ & $\\cdot$ \\\\"));
  const RunResult csv = run_binary({"run", input, "--steps", "masked", "--head", "0", "--format", "csv"});
  check_success(csv);
  CHECK(contains(csv.out, "\nmasked,0,0,0,The,1,cat,-inf\n"));
}

TEST_CASE("Documents are UTF-8 without colour whatever the locale, the terminal width or --color say",
          "[cli][format]") {
  const RunResult r = run_binary({"run", source_path("data/gpt_causal.json"), "--steps", "weights", "--format",
                                  "markdown", "--color", "always", "--max-cols", "1"},
                                 RunOptions().set_env("LC_ALL", "C").set_env("COLUMNS", "20"));
  check_success(r);
  CHECK(contains(r.out, "| down | 0.3753 | 0.1551 | 0.3145 | 0.1551 |"));  // every column, past 20 columns
  CHECK(contains(r.out, "·"));
  CHECK(contains(r.out, "×"));
  CHECK_FALSE(contains(r.out, "\x1b"));
}

TEST_CASE("The flash pass's tiles are left out of a document with a note that says where to see them",
          "[cli][format]") {
  const RunResult md = run_binary(
      {"run", source_path("data/the_cat_sat.json"), "--engine", "flash", "--steps", "weights", "--format", "markdown"});
  check_success(md);
  CHECK(contains(md.out, "flash never forms the whole weights matrix: --format text shows its tiles"));
  CHECK(contains(md.out, "tiles are not tables of steps"));
  CHECK_FALSE(contains(md.out, "see its tiles below"));
  const RunResult csv = run_binary(
      {"run", source_path("data/the_cat_sat.json"), "--engine", "flash", "--steps", "weights", "--format", "csv"});
  check_success(csv);
  CHECK(csv.out == "step,batch,head,row,row_label,col,col_label,value\n");
}

TEST_CASE("A --format that is not text, markdown, latex or csv is one error line naming --format", "[cli][format]") {
  for (const std::string command : {"run", "show"}) {
    INFO(command);
    const RunResult r = run_binary({command, source_path("data/the_cat_sat.json"), "--format", "html"});
    check_usage_error(r, {"--format", "html", "text,markdown,latex,csv"});
  }
  check_usage_error(run_binary({"run", source_path("data/the_cat_sat.json"), "--format", "Markdown"}), {"--format"});
}

TEST_CASE("A document with --json - is refused, since both would go to stdout", "[cli][format]") {
  for (const std::string format : {"markdown", "latex", "csv"}) {
    INFO(format);
    check_usage_error(run_binary({"run", source_path("data/the_cat_sat.json"), "--format", format, "--json", "-"}),
                      {"--format " + format, "--json -"});
  }
  // text with --json - stays what it was: the JSON instead of the text.
  const RunResult json = run_binary({"run", source_path("data/the_cat_sat.json"), "--format", "text", "--json", "-"});
  check_success(json);
  CHECK(starts_with(json.out, "{"));
}

TEST_CASE("A document with --json FILE writes the trace to the file and the document to stdout", "[cli][format]") {
  TempDir dir;
  const RunResult r = run_binary(
      {"run", source_path("data/the_cat_sat.json"), "--steps", "weights", "--format", "csv", "--json", dir / "t.json"});
  check_success(r);
  CHECK(starts_with(r.out, "step,batch,head,row,row_label,col,col_label,value\n"));
  CHECK(starts_with(read_file(dir / "t.json"), "{"));
}

TEST_CASE("compare, plot and report have no --format", "[cli][format]") {
  for (const std::string command : {"compare", "plot", "report"}) {
    INFO(command);
    check_usage_error(run_binary({command, source_path("data/the_cat_sat.json"), "--format", "csv"}), {"--format"});
  }
}
