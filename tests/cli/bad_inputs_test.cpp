// Every malformed input in tests/data/bad/ (one mistake each) must be refused as docs/cli.md says:
// exit 2, nothing on stdout, one stderr line "attn-trace: error: FILE: /pointer: what is wrong".
// tests/data/bad/expected.tsv lists each file with a part of its message, written from
// docs/input-format.md (which value is wrong, and the JSON Pointer to it), not copied from the binary.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

namespace {

const std::string bad_dir = source_path("tests/data/bad");

struct Expected {
  std::string file;
  std::string fragment;
};

// FILE<TAB>FRAGMENT per line; blank lines and lines starting '#' are skipped. A FRAGMENT may hold
// "..." for "any text", so it can pin the pointer and both sides of a mismatch but not the words
// in between: "/W_k: expected 2 columns...found 3".
std::vector<Expected> read_manifest() {
  std::vector<Expected> out;
  for (const std::string& line : split_lines(read_file(bad_dir + "/expected.tsv"))) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t tab = line.find('\t');
    INFO("manifest line: " << line);
    REQUIRE(tab != std::string::npos);
    REQUIRE(tab + 1 < line.size());
    out.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return out;
}

}  // namespace

TEST_CASE("The bad-input manifest lists at least 24 files and each file of the folder exactly once",
          "[cli][bad-input]") {
  const std::vector<Expected> manifest = read_manifest();
  CHECK(manifest.size() >= 24);

  std::set<std::string> listed;
  for (const Expected& e : manifest) {
    INFO("listed twice: " << e.file);
    CHECK(listed.insert(e.file).second);
    INFO("listed but missing: " << e.file);
    CHECK(fs::is_regular_file(bad_dir + "/" + e.file));
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(bad_dir)) {
    if (entry.path().extension() != ".json") continue;
    INFO("not in expected.tsv: " << entry.path().filename().string());
    CHECK(listed.count(entry.path().filename().string()) == 1);
  }
}

TEST_CASE("Every malformed input is refused with exit 2 and one error line with its file and JSON Pointer",
          "[cli][bad-input]") {
  const std::vector<Expected> manifest = read_manifest();
  REQUIRE_FALSE(manifest.empty());
  for (const Expected& e : manifest) {
    const std::string path = bad_dir + "/" + e.file;
    INFO("input: " << e.file);
    check_error(run_binary({"run", path}), "attn-trace: error: " + path + ": ", {e.fragment});
  }
}

TEST_CASE("A malformed input creates no --json file and leaves an existing one as it was", "[cli][bad-input]") {
  const std::vector<Expected> manifest = sanitized_part(read_manifest(), 4);
  const TempDir dir;
  const std::string kept = dir / "kept.json", fresh = dir / "fresh.json";
  const std::string before = "{\"an earlier trace\": true}\n";
  std::ofstream(kept) << before;
  for (const Expected& e : manifest) {
    const std::string path = bad_dir + "/" + e.file;
    INFO("input: " << e.file);
    for (const char* command : {"run", "compare", "properties"}) {
      INFO("command: " << command);
      // The fragments are run's messages (the memory refusal of compare and properties has no hint about flash).
      const std::vector<std::string> fragments =
          std::string(command) == "run" ? std::vector{e.fragment} : std::vector<std::string>{};
      check_error(run_binary({command, path, "--json", kept}), "attn-trace: error: " + path + ": ", fragments);
      CHECK(read_file(kept) == before);
      check_error(run_binary({command, path, "--json", fresh}), "attn-trace: error: " + path + ": ", fragments);
      CHECK_FALSE(fs::exists(fresh));
    }
  }
  std::size_t entries = 0;
  for ([[maybe_unused]] const fs::directory_entry& entry : fs::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 1);  // kept.json alone: no temporary file left behind
}

TEST_CASE("A malformed input on stdin is refused the same way", "[cli][bad-input][stdin]") {
  // One file is enough: the loader is the same. docs/cli.md does not say how stdin is named, so only
  // the pointer and the mistake are checked.
  const std::string text = read_file(bad_dir + "/W_k_wrong_rows.json");
  check_usage_error(run_binary({"run", "-"}, RunOptions().input(text)),
                    {"/W_k: expected 4 rows (d_model of X), found 3"});
}
