// The JSON trace from the command line (docs/trace-format.md, docs/cli.md): `run --json` then `show` prints
// exactly what `run` printed; `--json -` prints the JSON instead of the text; the file is written
// whole or not at all (docs/cli.md: "No output file is created or changed when the run fails"); and
// `show` refuses what is not a trace of this version with one error line.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// The names in a folder, sorted: to see that a failed run left nothing behind.
std::vector<std::string> names_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The temporary files of an atomic write start with "." (".trace.json.tmp-XXXXXX").
std::vector<std::string> hidden_names_in(const fs::path& folder) {
  std::vector<std::string> hidden;
  for (const std::string& name : names_in(folder))
    if (starts_with(name, ".")) hidden.push_back(name);
  return hidden;
}

int heads_of(const std::string& input_file) {
  const nlohmann::json input = nlohmann::json::parse(read_file(input_file));
  return input.value("n_heads", 1);
}

const std::string cat_sat = source_path("data/the_cat_sat.json");
const std::string malformed = source_path("tests/data/bad/X_string.json");

}  // namespace

// --- run --json, then show ----------------------------------------------------------------------

TEST_CASE("For every input in data/, show of the saved trace prints exactly what run printed", "[cli][trace][show]") {
  const TempDir dir;
  const std::vector<std::string> files = data_files();
  REQUIRE_FALSE(files.empty());
  for (const std::string& file : files) {
    INFO("input " << file);
    check_round_trip({"run", file}, dir / "trace.json");
    check_round_trip({"run", file, "--dtype", "float64"}, dir / "trace64.json");
    const int heads = heads_of(file);
    check_round_trip(
        {"run", file, "--steps", "k_heads,scores,masked,weights,head_outputs", "--head", std::to_string(heads - 1)},
        dir / "some.json");
  }
  CHECK(hidden_names_in(dir.path()).empty());
}

TEST_CASE("show keeps --precision and --color, like run", "[cli][trace][show]") {
  const TempDir dir;
  const std::string out = dir / "cat.json";
  check_success(run_binary({"run", cat_sat, "--json", out}));
  const RunResult run = run_binary({"run", cat_sat, "--precision", "2", "--color", "always"});
  const RunResult show = run_binary({"show", out, "--precision", "2", "--color", "always"});
  INFO(run.describe());
  INFO(show.describe());
  check_success(show);
  CHECK(show.out == run.out);
  CHECK(contains(show.out, "\x1b["));
}

TEST_CASE("run --json - prints the JSON trace on stdout and no text", "[cli][trace][json]") {
  const TempDir dir;
  for (const std::string& file : data_files()) {
    const RunResult r = run_binary({"run", file, "--json", "-"});
    INFO(r.describe());
    check_success(r);
    REQUIRE(starts_with(r.out, "{"));
    CHECK_FALSE(contains(r.out, step_rule));  // no step heading of the terminal trace
    nlohmann::json trace;
    REQUIRE_NOTHROW(trace = nlohmann::json::parse(r.out));
    CHECK(trace.at("format") == "attn-trace.trace");
    CHECK(trace.at("version") == 1);
    // the thirteen steps, and q_rot and k_rot for an input with rotary positions (bias with ALiBi, capped
    // with softcap, sink_weights with sinks, dropped with a dropout of p > 0)
    const nlohmann::json input = nlohmann::json::parse(read_file(file));
    const bool dropout = input.contains("dropout") && input.at("dropout").at("p").get<double>() > 0;
    const std::size_t steps = 13 + (input.contains("rope") ? 2 : 0) + (input.contains("alibi") ? 1 : 0) +
                              (input.contains("softcap") ? 1 : 0) + (input.contains("sinks") ? 1 : 0) +
                              (dropout ? 1 : 0);
    CHECK(trace.at("steps").size() == steps);
    // the same text as --json FILE writes
    check_success(run_binary({"run", file, "--json", dir / "same.json"}));
    CHECK(read_file(dir / "same.json") == r.out);
  }
  CHECK(names_in(dir.path()) == std::vector<std::string>{"same.json"});
}

TEST_CASE("run --json replaces an existing trace with the new one", "[cli][trace][atomic]") {
  const TempDir dir;
  const std::string out = dir / "trace.json";
  write_text(out, "old bytes\n");
  check_success(run_binary({"run", cat_sat, "--json", out}));
  const RunResult fresh = run_binary({"run", cat_sat, "--json", "-"});
  CHECK(read_file(out) == fresh.out);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"trace.json"});
}

// --- a failed run creates or changes nothing ----------------------------------------------------

TEST_CASE("A run that fails leaves an existing --json file byte for byte unchanged and no temporary file",
          "[cli][trace][atomic]") {
  const TempDir dir;
  const std::string out = dir / "trace.json";
  const std::string known = "{\"these\": \"bytes must survive\"}\n\x01\x02\xff";
  write_text(out, known);

  SECTION("a malformed input") { check_usage_error(run_binary({"run", malformed, "--json", out}), {malformed}); }
  SECTION("a malformed input on stdin") {
    check_usage_error(run_binary({"run", "-", "--json", out}, RunOptions().input(read_file(malformed))));
  }
  SECTION("a --head the input does not have") {
    check_usage_error(run_binary({"run", cat_sat, "--head", "5", "--json", out}), {"--head"});
  }
  CHECK(read_file(out) == known);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"trace.json"});
}

TEST_CASE("run --json into a folder that does not exist exits 3 (write failed) and creates nothing",
          "[cli][trace][atomic]") {
  const TempDir dir;
  const std::string missing = dir / "no-such-folder";
  const std::string out = missing + "/trace.json";
  check_write_error(run_binary({"run", cat_sat, "--json", out}), out, {"No such file or directory"});
  CHECK_FALSE(fs::exists(missing));
  CHECK(names_in(dir.path()).empty());
}

TEST_CASE(
    "run --json onto an existing folder exits 3 (write failed) and leaves the folder as it was and no temporary file",
    "[cli][trace][atomic]") {
  const TempDir dir;
  fs::create_directory(dir.path() / "trace.json");
  check_write_error(run_binary({"run", cat_sat, "--json", dir / "trace.json"}), dir / "trace.json", {"directory"});
  CHECK(fs::is_directory(dir.path() / "trace.json"));
  CHECK(fs::is_empty(dir.path() / "trace.json"));
  CHECK(names_in(dir.path()) == std::vector<std::string>{"trace.json"});
}

TEST_CASE("run --json into a folder that cannot be written exits 3 (write failed) and leaves nothing behind",
          "[cli][trace][atomic]") {
  const TempDir dir;
  const fs::path locked = dir.path() / "locked";
  fs::create_directory(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  // Root (as in a container) writes into a 0555 folder anyway: check, and if so use a folder that is
  // no folder at all, a regular file, where no one can create anything.
  const std::string probe = (locked / "probe").string();
  const bool mode_stops_writes = !std::ofstream(probe).is_open();
  fs::path folder = locked;
  if (!mode_stops_writes) {
    fs::remove(probe);
    folder = dir.path() / "a-file";
    write_text(folder.string(), "not a folder\n");
  }
  INFO((mode_stops_writes ? "a 0555 folder: " : "running as root, so a regular file as the folder: ") << folder);
  const std::vector<std::string> before = names_in(dir.path());
  const std::string out = (folder / "trace.json").string();
  const RunResult r = run_binary({"run", cat_sat, "--json", out});
  check_write_error(r, out);
  CHECK(names_in(dir.path()) == before);
  CHECK(names_in(locked).empty());
  CHECK_FALSE(fs::exists(out));
}

// --- show refuses what it cannot read -----------------------------------------------------------

TEST_CASE("show on a JSON file that is not a trace exits 2 with one error line naming /format", "[cli][trace][show]") {
  check_usage_error(run_binary({"show", cat_sat}), {cat_sat, "/format"});
  const TempDir dir;
  write_text(dir / "list.json", "[1, 2, 3]\n");
  check_usage_error(run_binary({"show", dir / "list.json"}), {"/format"});
}

TEST_CASE("show on a trace of version 2 exits 2 with one error line naming /version", "[cli][trace][show]") {
  const TempDir dir;
  const RunResult r = run_binary({"run", cat_sat, "--json", "-"});
  REQUIRE(r.exit_code == 0);
  nlohmann::ordered_json trace = nlohmann::ordered_json::parse(r.out);
  trace["version"] = 2;
  write_text(dir / "v2.json", trace.dump(2));
  check_usage_error(run_binary({"show", dir / "v2.json"}), {"/version", "2"});
}

TEST_CASE("show on a file that is not JSON or does not exist exits 2 with one error line", "[cli][trace][show]") {
  const TempDir dir;
  write_text(dir / "half.json", "{\"format\": \"attn-trace.trace\", \"version\": 1, \"steps\": [");
  check_usage_error(run_binary({"show", dir / "half.json"}), {"half.json"});
  check_usage_error(run_binary({"show", dir / "missing.json"}), {"missing.json"});
}
