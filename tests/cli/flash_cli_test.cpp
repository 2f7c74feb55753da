// Flash and compare from the command line (cli.md): `compare` passes on every bundled input and fails,
// with exit 1, on a build whose flash leaves out the rescale; `run --engine flash` shows the tiles and
// ends with naive's output; `--engine both` shows both; a zero tile size is a usage error; the JSON
// traces of flash runs and of compare print again through `show` exactly as the commands printed them.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;

extern char** environ;

namespace {

// A fresh folder under the temp directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "attn-trace-flash-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a temp folder in " + pattern);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// run_binary() runs only ATTN_TRACE_BIN; this runs the build without the flash rescale
// (ATTN_TRACE_BROKEN_FLASH_BIN) the same way: no shell, stdin /dev/null, stdout and stderr captured
// apart (through unlinked temp files), a 10 s timeout.
RunResult run_broken_flash(const std::vector<std::string>& args) {
  const auto temp_fd = [] {
    std::string path = (fs::temp_directory_path() / "attn-trace-broken-XXXXXX").string();
    const int fd = mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot create a temp file in " + path + ": " + std::strerror(errno));
    unlink(path.c_str());
    return fd;
  };
  const auto read_all = [](int fd) {
    std::string text;
    char buffer[1 << 14];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) != 0;) {
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw std::runtime_error(std::string("cannot read back the output: ") + std::strerror(errno));
      text.append(buffer, static_cast<std::size_t>(got));
    }
    return text;
  };

  RunResult result;
  result.args = args;
  const int out_fd = temp_fd(), err_fd = temp_fd();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<std::string> argv_strings{ATTN_TRACE_BROKEN_FLASH_BIN};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, ATTN_TRACE_BROKEN_FLASH_BIN, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    close(out_fd);
    close(err_fd);
    throw std::runtime_error(std::string("cannot start ") + ATTN_TRACE_BROKEN_FLASH_BIN + ": " + std::strerror(spawn_error));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_all(out_fd);
  result.err = read_all(err_fd);
  close(out_fd);
  close(err_fd);
  return result;
}

std::vector<std::string> data_files() {
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(source_path("data")))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

const std::string cat_sat = source_path("data/the_cat_sat.json");

// The text of `text` from the line that starts with `from` up to (not including) the next line that
// starts with `to` (or to the end when `to` is empty), without trailing blank lines. Empty when
// `from` is not there.
std::string section(const std::string& text, const std::string& from, const std::string& to = "") {
  std::vector<std::string> lines;
  bool inside = false;
  for (const std::string& line : split_lines(text)) {
    if (!inside && starts_with(line, from)) inside = true;
    else if (inside && !to.empty() && starts_with(line, to)) break;
    if (inside) lines.push_back(line);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// The heading lines and the summary above them: everything before the first step.
std::string preamble(const std::string& text) { return text.substr(0, text.find(step_rule)); }

}  // namespace

// --- compare -------------------------------------------------------------------------------------

TEST_CASE("compare exits 0 and prints verdict: PASS for every input in data/", "[cli][flash][compare]") {
  const std::vector<std::string> files = data_files();
  REQUIRE(files.size() >= 9);
  for (const std::string& file : files) {
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{}, {"--dtype", "float64"}, {"--block-q", "1", "--block-k", "1"}, {"--block-q", "3", "--block-k", "2"}}) {
      std::vector<std::string> args{"compare", file};
      args.insert(args.end(), extra.begin(), extra.end());
      const RunResult r = run_binary(args);
      INFO(r.describe());
      check_success(r);
      CHECK(contains(r.out, "verdict: PASS"));
      CHECK_FALSE(contains(r.out, "FAIL"));
      CHECK(contains(r.out, "━━ compare "));
    }
  }
}

TEST_CASE("compare on a build whose flash leaves out the rescale exits 1 and prints verdict: FAIL",
          "[cli][flash][compare]") {
  const RunResult broken = run_broken_flash({"compare", cat_sat});
  INFO(broken.describe());
  CHECK_FALSE(broken.timed_out);
  CHECK(broken.exit_code == 1);
  CHECK(contains(broken.out, "verdict: FAIL"));
  CHECK_FALSE(contains(broken.out, "verdict: PASS"));
  CHECK(broken.err.empty());  // a failed verdict is a result, not an error
  // the same build with the same input agrees with the real one everywhere but flash: its naive run
  const RunResult naive_broken = run_broken_flash({"run", cat_sat});
  const RunResult naive = run_binary({"run", cat_sat});
  CHECK(naive_broken.exit_code == 0);
  CHECK(naive_broken.out == naive.out);
}

TEST_CASE("compare --json - prints JSON with a compare object whose tolerance passes", "[cli][flash][compare][json]") {
  for (const std::string& file : data_files()) {
    const RunResult r = run_binary({"compare", file, "--json", "-"});
    INFO(r.describe());
    check_success(r);
    REQUIRE(starts_with(r.out, "{"));
    CHECK_FALSE(contains(r.out, step_rule));
    nlohmann::json trace;
    REQUIRE_NOTHROW(trace = nlohmann::json::parse(r.out));
    REQUIRE(trace.contains("compare"));
    const nlohmann::json& c = trace.at("compare");
    CHECK(c.at("dtype") == "float32");
    CHECK(c.at("tolerance").at("pass") == true);
    // the verdict is the rule applied to the numbers beside it
    const double flash_error = c.at("tolerance").at("flash_error").get<double>();
    const double naive_error = c.at("tolerance").at("naive_error").get<double>();
    const double noise = c.at("tolerance").at("noise").get<double>();
    CHECK(c.at("tolerance").at("bound").get<double>() == Approx(2 * naive_error + noise).epsilon(1e-12));
    CHECK(flash_error <= 2 * naive_error + noise);
    CHECK(flash_error == c.at("flash_vs_reference").at("max_abs").get<double>());
    CHECK(c.at("memory").at("flash_peak_bytes").get<long long>() <= c.at("memory").at("naive_peak_bytes").get<long long>());
    CHECK(trace.contains("flash"));
    CHECK(trace.at("config").at("engine") == "both");
  }
}

TEST_CASE("compare --json - on the build without the rescale writes tolerance.pass false", "[cli][flash][compare][json]") {
  const RunResult r = run_broken_flash({"compare", cat_sat, "--json", "-"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  nlohmann::json trace;
  REQUIRE_NOTHROW(trace = nlohmann::json::parse(r.out));
  CHECK(trace.at("compare").at("tolerance").at("pass") == false);
}

// --- run --engine flash | both ------------------------------------------------------------------

TEST_CASE("run --engine flash shows several key tiles and alpha, and ends with naive's output table", "[cli][flash]") {
  const RunResult flash = run_binary({"run", cat_sat, "--engine", "flash"});
  const RunResult naive = run_binary({"run", cat_sat});
  INFO(flash.describe());
  check_success(flash);
  check_success(naive);
  CHECK(contains(flash.out, "key tile 0"));
  CHECK(contains(flash.out, "key tile 1"));  // the default blocks give the worked example >= 2 key tiles
  CHECK(contains(flash.out, "alpha"));
  CHECK(contains(flash.out, "━━ flash "));
  // no naive step between the projections and the output
  for (const std::string step : {"scores", "scaled", "masked", "weights"}) {
    INFO("step " << step);
    CHECK(step_section(flash.out, step).empty());
  }
  const std::vector<std::string> headings = step_headings(flash.out);
  REQUIRE_FALSE(headings.empty());
  CHECK(headings.back() == "output");
  const std::string flash_output = section(flash.out, step_rule + "output ");
  REQUIRE_FALSE(flash_output.empty());
  CHECK(flash_output == section(naive.out, step_rule + "output "));
  // and the whole of it is the end of the text
  CHECK(flash.out.size() >= flash_output.size());
  CHECK(flash.out.substr(flash.out.size() - flash_output.size()) == flash_output);
}

TEST_CASE("run --engine both prints every naive step, then the flash section, for every input", "[cli][flash]") {
  for (const std::string& file : data_files()) {
    const RunResult both = run_binary({"run", file, "--engine", "both"});
    const RunResult naive = run_binary({"run", file});
    const RunResult flash = run_binary({"run", file, "--engine", "flash"});
    INFO(both.describe());
    check_success(both);
    const std::vector<std::string> headings = step_headings(both.out);
    for (const std::string step : {"q", "k", "v", "q_heads", "k_heads", "v_heads", "scores", "scaled", "masked", "weights",
                                   "head_outputs", "concat", "output", "flash"}) {
      INFO("step " << step);
      CHECK(std::count(headings.begin(), headings.end(), step) == 1);
    }
    const auto at = [&](const std::string& name) { return std::find(headings.begin(), headings.end(), name); };
    CHECK(at("output") < at("flash"));
    // the naive steps as naive prints them, the flash section as flash prints it
    CHECK(section(both.out, step_rule + "q ", step_rule + "flash ") == section(naive.out, step_rule + "q "));
    CHECK(section(both.out, step_rule + "flash ", step_rule + "naive vs flash") ==
          section(flash.out, step_rule + "flash ", step_rule + "head_outputs "));
  }
}

TEST_CASE("A tile size of 0 is a usage error: exit 2 and one line naming the option", "[cli][flash][errors]") {
  check_usage_error(run_binary({"run", cat_sat, "--engine", "flash", "--block-q", "0"}), {"--block-q"});
  check_usage_error(run_binary({"run", cat_sat, "--engine", "flash", "--block-k", "0"}), {"--block-k"});
  check_usage_error(run_binary({"run", cat_sat, "--engine", "both", "--block-q", "0"}), {"--block-q"});
  check_usage_error(run_binary({"compare", cat_sat, "--block-q", "0"}), {"--block-q"});
  check_usage_error(run_binary({"compare", cat_sat, "--block-k", "0"}), {"--block-k"});
}

TEST_CASE("Tile sizes that divide nothing, or exceed the lengths, run and pass", "[cli][flash][compare]") {
  for (const std::vector<std::string>& blocks :
       {std::vector<std::string>{"--block-q", "2", "--block-k", "2"}, {"--block-q", "100", "--block-k", "7"}}) {
    std::vector<std::string> run_args{"run", cat_sat, "--engine", "flash"};
    run_args.insert(run_args.end(), blocks.begin(), blocks.end());
    check_success(run_binary(run_args));
    std::vector<std::string> compare_args{"compare", cat_sat};
    compare_args.insert(compare_args.end(), blocks.begin(), blocks.end());
    const RunResult r = run_binary(compare_args);
    check_success(r);
    CHECK(contains(r.out, "verdict: PASS"));
  }
}

// --- JSON traces of flash and compare, shown again -----------------------------------------------

TEST_CASE("For every input, run --engine flash or both --json then show prints exactly what run printed",
          "[cli][flash][trace][show]") {
  const TempDir dir;
  for (const std::string& file : data_files()) {
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{"--engine", "flash"}, {"--engine", "flash", "--dtype", "float64"},
          {"--engine", "both"}, {"--engine", "flash", "--block-q", "3", "--block-k", "2"}}) {
      std::vector<std::string> args{"run", file};
      args.insert(args.end(), extra.begin(), extra.end());
      const RunResult plain = run_binary(args);
      args.insert(args.end(), {"--json", dir / "trace.json"});
      const RunResult written = run_binary(args);
      const RunResult shown = run_binary({"show", dir / "trace.json"});
      INFO(plain.describe());
      INFO(shown.describe());
      check_success(plain);
      check_success(written);
      check_success(shown);
      CHECK(written.out == plain.out);
      CHECK(shown.out == plain.out);
    }
  }
}

TEST_CASE("For every input, compare --json then show ends with compare's own text, byte for byte",
          "[cli][flash][compare][trace][show]") {
  const TempDir dir;
  for (const std::string& file : data_files()) {
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{}, {"--dtype", "float64", "--block-q", "2", "--block-k", "3"}}) {
      std::vector<std::string> args{"compare", file};
      args.insert(args.end(), extra.begin(), extra.end());
      const RunResult plain = run_binary(args);
      args.insert(args.end(), {"--json", dir / "compare.json"});
      const RunResult written = run_binary(args);
      const RunResult shown = run_binary({"show", dir / "compare.json"});
      INFO(plain.describe());
      INFO(shown.describe());
      check_success(plain);
      check_success(written);
      check_success(shown);
      CHECK(written.out == plain.out);
      // compare prints the summary and its compare section; show prints the whole trace as run would,
      // every naive step and the flash tiles, and then the very same compare section
      const std::string compare_section = section(plain.out, step_rule + "compare ");
      REQUIRE_FALSE(compare_section.empty());
      CHECK(section(shown.out, step_rule + "compare ") == compare_section);
      CHECK(shown.out.size() >= compare_section.size());
      CHECK(shown.out.substr(shown.out.size() - compare_section.size()) == compare_section);
      CHECK(preamble(shown.out) == preamble(plain.out));
      CHECK(plain.out == preamble(plain.out) + compare_section);  // nothing else in compare's text
      const std::vector<std::string> headings = step_headings(shown.out);
      CHECK(std::count(headings.begin(), headings.end(), "scores") == 1);
      CHECK(std::count(headings.begin(), headings.end(), "flash") == 1);
      CHECK(headings.back() == "compare");
    }
  }
}
