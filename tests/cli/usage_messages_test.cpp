// The command line's own errors (docs/cli.md, "Errors"): what CLI11 refuses is said in the tool's
// one-line form with the nearest spelling; a missing input that is a bundled example says where to get
// it; every piece of advice ("add --engine flash") names an option the command at hand accepts.

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "import_golden.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");

// Every spelling of `command`'s options, read from its --help ("-h", "--help", "--steps", ...).
std::set<std::string> options_of(const std::string& command) {
  const RunResult help = run_binary({command, "--help"}, RunOptions().set_env("COLUMNS", "1000"));
  REQUIRE(help.exit_code == 0);
  std::set<std::string> names;
  static const std::regex spelling(R"(^  (-[-a-zA-Z0-9,]+))");
  for (const std::string& line : split_lines(help.out)) {
    std::smatch m;
    if (!std::regex_search(line, m, spelling)) continue;
    std::string list = m[1];
    for (std::size_t start = 0; start <= list.size();) {
      const std::size_t comma = std::min(list.find(',', start), list.size());
      names.insert(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return names;
}

// "add --engine", "use --dtype", "give --heads": advice that tells the user to change an option.
const std::regex advice(R"(\b(add|use|give) (--[a-z][a-z0-9-]*))");

std::vector<std::string> advice_in(const std::string& text) {
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), advice); it != std::sregex_iterator(); ++it)
    found.push_back((*it)[0]);
  return found;
}

// Every piece of advice written in a string literal of src/ and apps/ (inside quotes on its line).
std::set<std::string> advice_in_sources() {
  std::set<std::string> found;
  for (const char* root : {"src", "apps"}) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(source_path(root))) {
      if (entry.path().extension() != ".cpp" && entry.path().extension() != ".hpp") continue;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        for (auto it = std::sregex_iterator(line.begin(), line.end(), advice); it != std::sregex_iterator(); ++it) {
          const std::string before = line.substr(0, static_cast<std::size_t>(it->position()));
          if (std::count(before.begin(), before.end(), '"') % 2 == 1) found.insert((*it)[0]);
        }
      }
    }
  }
  return found;
}

// An input the float types cannot hold: X[0][0] = 1e39 is past float32's range.
std::string out_of_range_input(const TempDir& dir) {
  nlohmann::json j = nlohmann::json::parse(read_file(cat_sat));
  j["X"][0][0] = 1e39;
  const std::string path = dir / "huge.json";
  std::ofstream(path) << j.dump();
  return path;
}

}  // namespace

TEST_CASE("An unknown option gets the nearest spelling among the command's options, in one line, exit 2",
          "[cli][usage]") {
  const RunResult r = run_binary({"run", cat_sat, "--stpes", "weights"});
  check_usage_error(r, {"run: unknown option \"--stpes\" (did you mean \"--steps\"?)", "attn-trace run --help"});
  CHECK_FALSE(contains(r.err, "The following"));  // CLI11's own words, which list the arguments backwards

  check_usage_error(run_binary({"show", "t.json", "--max-col=3"}), {"unknown option \"--max-col\"", "\"--max-cols\""});
  check_usage_error(run_binary({"--verison"}), {"unknown option \"--verison\" (did you mean \"--version\"?)"});
  // Nothing near: no guess, still the one line.
  const RunResult far = run_binary({"steps", "--zzzzzzzz"});
  check_usage_error(far, {"steps: unknown option \"--zzzzzzzz\"; see 'attn-trace steps --help'"});
  CHECK_FALSE(contains(far.err, "did you mean"));
}

TEST_CASE("An unknown command gets the nearest command and the list of them, exit 2", "[cli][usage]") {
  check_usage_error(run_binary({"rnu", cat_sat}),
                    {"unknown command \"rnu\" (did you mean \"run\"?); the commands are run, compare", "--help"});
  check_usage_error(run_binary({"exmaple"}), {"(did you mean \"example\"?)"});
  check_usage_error(run_binary({"run", cat_sat, "extra.json"}), {"run: unexpected argument \"extra.json\""});
  // No command at all: every command named, the newest too.
  check_usage_error(run_binary({}), {"a command is needed: run, compare, ", ", bench, steps"});
}

TEST_CASE("An unknown example name gets the nearest example name", "[cli][usage]") {
  check_usage_error(run_binary({"example", "gtp-causal"}),
                    {"example: no example \"gtp-causal\" (did you mean \"gpt-causal\"?); the examples are"});
  check_usage_error(run_binary({"example", "gpt_causal"}), {"(did you mean \"gpt-causal\"?)"});
}

TEST_CASE("A missing input named as a bundled example says how to get it", "[cli][usage]") {
  const TempDir dir;
  for (const std::string& name :
       {std::string("data/the_cat_sat.json"), std::string("the_cat_sat.json"), dir / "gpt_causal.json"}) {
    const RunResult r = run_binary({"run", name});
    const std::string example = contains(name, "gpt") ? "gpt-causal" : "the-cat-sat";
    check_usage_error(r, {"cannot read the file: No such file or directory; " + example +
                          " is a bundled example: 'attn-trace example " + example});
  }
  // A missing file that is no example gets no hint.
  const RunResult other = run_binary({"run", dir / "mine.json"});
  check_usage_error(other, {"cannot read the file: No such file or directory"});
  CHECK_FALSE(contains(other.err, "bundled example"));
}

TEST_CASE("Every piece of advice names an option of the command that gives it", "[cli][usage]") {
  const TempDir dir;
  const std::string huge = out_of_range_input(dir);
  const std::string naive_trace = dir / "naive.json";
  REQUIRE(run_binary({"run", cat_sat, "--json", naive_trace}).exit_code == 0);
  const std::string mha = model_path("torch_mha/model.safetensors");

  // Each refusal (or note) that gives advice, on every command that can reach it.
  const std::vector<std::vector<std::string>> provocations = {
      {"run", cat_sat, "--block-q", "2"},
      {"report", cat_sat, "--engine", "naive", "--block-k", "2"},
      {"explain", cat_sat, "--query", "cat", "--key", "The", "--block-q", "2"},
      {"run", cat_sat, "--steps", "tiles"},
      {"report", cat_sat, "--engine", "naive", "--steps", "tiles"},
      {"show", naive_trace, "--steps", "tiles"},
      {"report", naive_trace, "--steps", "tiles"},
      {"run", cat_sat, "--engine", "flash", "--steps", "weights"},
      {"run", huge},
      {"run", huge, "--dtype", "float16"},
      {"compare", huge},
      {"properties", huge},
      {"explain", huge, "--query", "cat", "--key", "The"},
      {"report", huge},
      {"plot", huge},
      {"diff", huge, dir.path().string()},
      {"bench", huge, "--repeat", "1"},
      {"explain", cat_sat, "--query", "cat", "--key", "The", "--output", "0"},
      {"run", cat_sat, "--format", "markdown", "--json", "-"},
      {"show", naive_trace, "--format", "csv", "--json", "-"},
      {"plot", cat_sat, "--engine", "flash", "--step", "weights"},
      {"new", "--heads", "3", "--d-model", "8"},
      {"import", mha, "--style", "torch-mha", "--prefix", ""},
      {"run", cat_sat, "--steps", "d_weights"},
      {"compare", cat_sat, "--grad-seed", "3"},
      {"report", cat_sat, "--grad-seed", "3"},
      {"report", cat_sat, "--steps", "d_weights"},
      {"explain", cat_sat, "--query", "cat", "--key", "The", "--index", "1"},
      {"run", cat_sat, "--dropout-seed", "3"},
      {"decode", source_path("data/gpt_causal.json"), "--page-seed", "3"},
      {"decode", source_path("data/gpt_causal.json"), "--report", "-"},
      {"bench", "--split-kv", "2"},
  };
  std::set<std::string> seen;
  for (const std::vector<std::string>& args : provocations) {
    const RunResult r = run_binary(args);
    INFO(r.describe());
    CHECK_FALSE(r.timed_out);
    const std::vector<std::string> given = advice_in(r.out + r.err);
    const std::set<std::string> accepted = options_of(args.front());
    for (const std::string& a : given) {
      INFO("advice: " << a);
      CHECK(accepted.count(a.substr(a.find(' ') + 1)) == 1);
      seen.insert(a);
    }
  }
  // The source's advice, each one given by some provocation above: a new piece of advice gets a row.
  for (const std::string& a : advice_in_sources()) {
    INFO("advice in the source that no provocation gives: " << a);
    CHECK(seen.count(a) == 1);
  }
}
