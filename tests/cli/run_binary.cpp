#include "run_binary.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char** environ;

namespace attn::test {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

// An anonymous temp file: unlinked at once, so nothing is left behind even when a test aborts.
class TempFile {
 public:
  TempFile() {
    std::string path = (std::filesystem::temp_directory_path() / "attn-trace-cli-XXXXXX").string();
    fd_ = mkostemp(path.data(), O_CLOEXEC);
    if (fd_ < 0) fail("cannot create a temp file in " + path);
    unlink(path.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { close(fd_); }

  int fd() const { return fd_; }

  void write_all(const std::string& text) const {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("cannot write the stdin temp file");
      done += static_cast<std::size_t>(n);
    }
    rewind();
  }

  std::string read_all() const {
    rewind();
    std::string text;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("cannot read a capture temp file");
      if (n == 0) return text;
      text.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  void rewind() const {
    if (lseek(fd_, 0, SEEK_SET) < 0) fail("cannot seek a temp file");
  }
  int fd_ = -1;
};

// A pseudo-terminal for the child's stdout, so isatty() is true there. Raw mode: no "\n" -> "\r\n".
class Pty {
 public:
  Pty() {
    master_ = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master_ < 0 || grantpt(master_) != 0 || unlockpt(master_) != 0) fail("cannot open a pseudo-terminal");
    const char* name = ptsname(master_);
    if (name == nullptr) fail("ptsname");
    slave_ = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave_ < 0) fail(std::string("cannot open ") + name);
    // A size, as a terminal window has: 72 columns, so that a test can tell it from every default.
    const winsize size{24, 72, 0, 0};
    ioctl(slave_, TIOCSWINSZ, &size);
    termios mode{};
    if (tcgetattr(slave_, &mode) == 0) {
      cfmakeraw(&mode);
      tcsetattr(slave_, TCSANOW, &mode);
    }
    fcntl(master_, F_SETFL, fcntl(master_, F_GETFL) | O_NONBLOCK);
  }
  Pty(const Pty&) = delete;
  Pty& operator=(const Pty&) = delete;
  ~Pty() {
    close_slave();
    close(master_);
  }

  int slave() const { return slave_; }
  // The parent's copy must go once the child has its own, or the master never sees the end.
  void close_slave() {
    if (slave_ >= 0) close(slave_);
    slave_ = -1;
  }

  // Whatever the child has written so far; the child blocks when the pty buffer is full, so the
  // parent drains it while waiting.
  void drain(std::string& into) const {
    char buffer[1 << 14];
    for (;;) {
      const ssize_t n = ::read(master_, buffer, sizeof buffer);
      if (n > 0) {
        into.append(buffer, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return;  // EAGAIN: nothing yet; EIO or 0: the child's side is closed
    }
  }

 private:
  int master_ = -1;
  int slave_ = -1;
};

// This process's environment, minus the names to drop, with what the terminal output depends on fixed
// (a UTF-8 locale, 100 columns, no COLORTERM), plus the variables the test sets.
std::vector<std::string> child_environment(const RunOptions& o) {
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<EnvVar> set = {{"LC_ALL", "C.UTF-8"}, {"COLUMNS", "100"}};
  for (const EnvVar& v : o.env) {
    std::erase_if(set, [&](const EnvVar& d) { return d.name == v.name; });
    set.push_back(v);
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = name_of(entry);
    bool drop = name == "LANG" || name == "LC_CTYPE" || name == "COLORTERM";
    for (const EnvVar& v : set) drop = drop || v.name == name;
    for (const std::string& u : o.unset_env) drop = drop || u == name;
    if (!drop) env.push_back(entry);
  }
  for (const EnvVar& v : set)
    if (std::find(o.unset_env.begin(), o.unset_env.end(), v.name) == o.unset_env.end())
      env.push_back(v.name + "=" + v.value);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

RunResult run_binary(const std::vector<std::string>& args, const RunOptions& options) {
  RunResult result;
  result.args = args;

  const TempFile out, err;
  std::optional<TempFile> in;
  if (options.stdin_text) {
    in.emplace();
    in->write_all(*options.stdin_text);
  }

  const std::string stdin_path = options.stdin_path.value_or("/dev/null");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (in) posix_spawn_file_actions_adddup2(&actions, in->fd(), STDIN_FILENO);
  else posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, stdin_path.c_str(), O_RDONLY, 0);
  std::optional<Pty> pty;
  if (options.stdout_terminal) pty.emplace();
  int broken[2] = {-1, -1};
  if (options.stdout_broken_pipe) {
    if (pipe2(broken, O_CLOEXEC) != 0) fail("pipe");
    close(broken[0]);  // the reader is gone before the program writes a byte
  }
  if (options.stdout_closed) posix_spawn_file_actions_addclose(&actions, STDOUT_FILENO);
  else if (options.stdout_path)
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.stdout_path->c_str(), O_WRONLY, 0);
  else if (options.stdout_broken_pipe) posix_spawn_file_actions_adddup2(&actions, broken[1], STDOUT_FILENO);
  else posix_spawn_file_actions_adddup2(&actions, pty ? pty->slave() : out.fd(), STDOUT_FILENO);
  if (options.stderr_closed) posix_spawn_file_actions_addclose(&actions, STDERR_FILENO);
  else if (options.stderr_path)
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.stderr_path->c_str(), O_WRONLY, 0);
  else posix_spawn_file_actions_adddup2(&actions, err.fd(), STDERR_FILENO);
  if (options.working_directory) posix_spawn_file_actions_addchdir_np(&actions, options.working_directory->c_str());
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (options.new_session) posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);

  std::vector<std::string> argv_strings{options.program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = child_environment(options);
  const std::vector<char*> argv = c_strings(argv_strings);
  const std::vector<char*> envp = c_strings(env_strings);

  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, options.program.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawn_error != 0) {
    errno = spawn_error;
    fail("cannot start " + options.program);
  }
  if (pty) pty->close_slave();
  if (broken[1] >= 0) close(broken[1]);

  // Poll rather than block, so a hung binary is killed at the deadline.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.timeout;
  int status = 0;
  rusage usage{};
  for (;;) {
    if (pty) pty->drain(result.out);
    const pid_t done = wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) fail("waitpid");
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      result.timed_out = true;
      break;
    }
    if (options.on_poll)
      options.on_poll(pid,
                      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  result.took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  result.max_rss_kib = usage.ru_maxrss;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);

  if (pty) pty->drain(result.out);
  else result.out = out.read_all();
  result.err = err.read_all();
  return result;
}

std::string RunResult::describe() const {
  std::string command = "attn-trace";
  for (const std::string& a : args)
    command += " " + (a.find(' ') == std::string::npos && !a.empty() ? a : "'" + a + "'");
  std::string text = command + " -> " + (timed_out ? "timed out" : "exit " + std::to_string(exit_code));
  text += "\n--- stderr ---\n" + err;
  // The trace of a passing run is long; its start is enough to see what went wrong.
  text += "\n--- stdout (first 2000 bytes) ---\n" + out.substr(0, 2000);
  return text;
}

std::string source_path(const std::string& relative) { return std::string(ATTN_SOURCE_DIR) + "/" + relative; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace attn::test

namespace attn::test {

std::string tested_program() {
  const char* program = std::getenv("ATTN_TRACE_BIN");
  return program != nullptr && *program != '\0' ? std::string(program) : std::string(ATTN_TRACE_BIN);
}

bool sanitized_program() {
  const char* flag = std::getenv("ATTN_SANITIZED");
  return flag != nullptr && *flag != '\0' && std::string(flag) != "0";
}

std::vector<std::string> all_data_files() {
  std::vector<std::string> files;
  for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator(source_path("data")))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> data_files() {
  std::vector<std::string> files = all_data_files();
  if (!sanitized_program()) return files;
  const std::vector<std::string> covering = {"the_cat_sat.json", "llama_layer.json", "padded_batch.json",
                                             "kv_cache.json"};
  std::erase_if(files, [&](const std::string& f) {
    return std::find(covering.begin(), covering.end(), std::filesystem::path(f).filename().string()) == covering.end();
  });
  return files;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "attn-trace-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a temp folder in " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

}  // namespace attn::test
