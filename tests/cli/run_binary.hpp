#pragma once
// Runs the real attn-trace binary for the CLI tests: no shell, so arguments reach it exactly as
// written; stdout and stderr captured separately; a timeout so a hanging binary fails one test
// instead of stalling the suite.

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attn::test {

// The attn-trace these tests run: $ATTN_TRACE_BIN when it is set, else the one built with this suite.
// scripts/check.sh points the release build's suite at the sanitizer build's binary: the CLI tests
// are a black box, and it is the tool that must be instrumented, not the harness.
std::string tested_program();

// Whether that program was built with the sanitizers ($ATTN_SANITIZED set): it runs many times slower,
// so the loops over every input take a part of them (sanitized_part); the release run takes them all.
bool sanitized_program();

// `all` in the release run; under the sanitizers every `every`-th one from the first, and the last.
template <class T>
std::vector<T> sanitized_part(const std::vector<T>& all, std::size_t every) {
  if (!sanitized_program() || every <= 1) return all;
  std::vector<T> part;
  for (std::size_t k = 0; k < all.size(); k += every) part.push_back(all[k]);
  if (!all.empty() && (all.size() - 1) % every != 0) part.push_back(all.back());
  return part;
}

struct EnvVar {
  std::string name;
  std::string value;
};

// How to run the program: built by chaining, e.g. RunOptions().input(text).terminal(), so that a test
// names only what it changes.
struct RunOptions {
  std::optional<std::string> stdin_text;   // absent: stdin is /dev/null (or stdin_path)
  std::optional<std::string> stdin_path;   // stdin opened from this path (a device, a FIFO)
  std::optional<std::string> stdout_path;  // stdout opened (write-only, no truncation) on this path, e.g. /dev/full
  bool stdout_broken_pipe = false;         // stdout is a pipe whose reader has already gone
  std::optional<std::string> stderr_path;  // stderr opened (write-only) on this path, e.g. /dev/full; err stays ""
  bool stdout_closed = false;              // the program starts without a stdout (`>&-`)
  bool stderr_closed = false;              // the program starts without a stderr (`2>&-`); err stays ""
  bool new_session = false;                // the program runs in a session of its own: no controlling terminal
  // Called about every 200 µs while the program runs, with its pid and the time since it started:
  // to send it a signal at a chosen moment.
  std::function<void(int pid, std::chrono::microseconds elapsed)> on_poll;
  // Set (or replaced) on top of this process's environment. The locale is UTF-8 and the width 100 unless
  // a test sets them (LC_ALL, COLUMNS), whatever the environment the tests run in, and COLORTERM is unset.
  std::vector<EnvVar> env;
  std::vector<std::string> unset_env;  // removed from the child's environment (e.g. NO_COLOR)
  bool stdout_terminal = false;        // stdout is a pseudo-terminal (raw mode, 72 columns), for --color auto
  std::chrono::milliseconds timeout{10'000};
  std::string program = tested_program();        // the program to run (another build of it, say)
  std::optional<std::string> working_directory;  // the program starts in this folder (absent: the tests' own)

  RunOptions& input(std::string text) {
    stdin_text = std::move(text);
    return *this;
  }
  RunOptions& set_env(std::string name, std::string value) {
    env.push_back(EnvVar{std::move(name), std::move(value)});
    return *this;
  }
  RunOptions& unset(std::string name) {
    unset_env.push_back(std::move(name));
    return *this;
  }
  RunOptions& terminal(bool on = true) {
    stdout_terminal = on;
    return *this;
  }
  RunOptions& input_from(std::string path) {
    stdin_path = std::move(path);
    return *this;
  }
  RunOptions& output_to(std::string path) {
    stdout_path = std::move(path);
    return *this;
  }
  RunOptions& errors_to(std::string path) {
    stderr_path = std::move(path);
    return *this;
  }
  RunOptions& close_stdout() {
    stdout_closed = true;
    return *this;
  }
  RunOptions& close_stderr() {
    stderr_closed = true;
    return *this;
  }
  RunOptions& without_terminal() {
    new_session = true;
    return *this;
  }
  RunOptions& broken_pipe() {
    stdout_broken_pipe = true;
    return *this;
  }
  RunOptions& while_running(std::function<void(int, std::chrono::microseconds)> f) {
    on_poll = std::move(f);
    return *this;
  }
  RunOptions& wait_at_most(std::chrono::milliseconds t) {
    timeout = t;
    return *this;
  }
  RunOptions& binary(std::string path) {
    program = std::move(path);
    return *this;
  }
};

struct RunResult {
  std::vector<std::string> args;  // as passed, for failure messages
  int exit_code = -1;             // the exit status; 128 + signal when killed by a signal
  bool timed_out = false;
  long max_rss_kib = 0;  // the program's peak resident memory (getrusage's ru_maxrss)
  std::chrono::microseconds took{0};
  std::string out;
  std::string err;

  // "attn-trace run x.json -> exit 2", then stdout and stderr: for INFO() in a failing test.
  std::string describe() const;
};

// Runs options.program (ATTN_TRACE_BIN unless set) with `args` (argv[1..]). Throws std::runtime_error only when the
// test machinery itself fails (no temp file, spawn failed); the binary's own failures are results.
RunResult run_binary(const std::vector<std::string>& args, const RunOptions& options = {});

// A fresh folder under the temp directory, removed (made writable first) with everything in it.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// ATTN_SOURCE_DIR/relative: inputs are found from the source tree, whatever the working directory.
std::string source_path(const std::string& relative);

// Every data/*.json, sorted: the bundled inputs that every command must handle.
std::vector<std::string> all_data_files();

// The inputs the loops over data/ take: all_data_files(), or under the sanitizers four that between
// them reach every code path of the engines and the printer (the worked example; a layer with W_o, RoPE,
// GQA and a causal mask; a padded batch; cross-attention with a bottom-right mask).
std::vector<std::string> data_files();

// A whole file, byte for byte. Throws std::runtime_error when it cannot be read.
std::string read_file(const std::string& path);

// `text` as the whole of the file `path`, byte for byte. Throws std::runtime_error when it cannot be written.
void write_file(const std::string& path, const std::string& text);

// The lines of `text`, without their '\n'; a final line without '\n' counts as a line.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace attn::test
