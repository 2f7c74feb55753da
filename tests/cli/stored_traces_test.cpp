// The trace of every bundled input, from every engine and from compare, in both dtypes, must be byte
// for byte the stored one (tests/data/traces/README.md): a refactoring changes no number, key or
// formatting of a trace unless it says so by regenerating them.

#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

namespace {

// The first byte where `a` and `b` differ, with some context, or "" when they are equal.
std::string first_difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  std::size_t at = 0;
  while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
  const std::size_t from = at > 60 ? at - 60 : 0;
  return "byte " + std::to_string(at) + "\n--- stored:\n" + a.substr(from, 120) + "\n--- now:\n" + b.substr(from, 120);
}

}  // namespace

TEST_CASE("Every stored trace of data/ is what run and compare write today, byte for byte", "[cli][trace][stored]") {
  std::vector<fs::path> stored;
  for (const fs::directory_entry& e : fs::directory_iterator(source_path("tests/data/traces")))
    if (e.path().extension() == ".json") stored.push_back(e.path());
  // every input × (naive, flash, both, compare) × (float32, float64)
  REQUIRE(stored.size() == all_data_files().size() * 8);
  const std::vector<std::string> inputs = data_files();
  for (const fs::path& path : stored) {
    // NAME.ENGINE.DTYPE.json
    const std::string stem = path.stem().string();
    const std::size_t dot2 = stem.rfind('.'), dot1 = stem.rfind('.', dot2 - 1);
    const std::string name = stem.substr(0, dot1), engine = stem.substr(dot1 + 1, dot2 - dot1 - 1),
                      dtype = stem.substr(dot2 + 1);
    const std::string input = source_path("data/" + name + ".json");
    if (std::find(inputs.begin(), inputs.end(), input) == inputs.end()) continue;  // not in the sanitizers' part
    const std::vector<std::string> args =
        engine == "compare"
            ? std::vector<std::string>{"compare", input, "--dtype", dtype, "--json", "-"}
            : std::vector<std::string>{"run", input, "--engine", engine, "--dtype", dtype, "--json", "-"};
    const RunResult r = run_binary(args);
    INFO(path.filename().string() << "\n" << r.describe().substr(0, 400));
    REQUIRE(r.exit_code == 0);
    const std::string difference = first_difference(read_file(path.string()), r.out);
    INFO(difference);
    CHECK(difference.empty());
  }
}
