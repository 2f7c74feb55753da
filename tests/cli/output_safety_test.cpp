// What the tool writes, and what it reads, may not harm the machine it runs on (docs/reliability.md,
// "Writing", "Exit codes", "Signals", "Reading"). Every test here works on things made in its own
// temporary folder — a device node made with mknod, a FIFO, a symlink, a socket — so that a wrong
// implementation can only damage those.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");

struct stat status_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) throw std::runtime_error("cannot lstat " + path);
  return st;
}

// The temporary files of a write are ".NAME.tmp-XXXXXX" beside the target.
std::vector<std::string> temp_files_in(const fs::path& folder) {
  std::vector<std::string> found;
  for (const fs::directory_entry& e : fs::directory_iterator(folder))
    if (contains(e.path().filename().string(), ".tmp-")) found.push_back(e.path().filename().string());
  return found;
}

// A character device made in `folder` with mknod, which only root may make. As anyone else this returns
// "" after a warning that names the test as skipped (the warning shows in the test's output, pass or
// fail), and the test returns at once; as root a failing mknod fails the test (a container without
// CAP_MKNOD, say), so that a run as root never passes these tests without checking anything.
std::string make_device(const TempDir& dir, const std::string& name, unsigned major_number, unsigned minor_number) {
  if (::geteuid() != 0) {
    WARN("skipped \"" << Catch::getResultCapture().getCurrentTestName() << "\": mknod needs root, and this runs as uid "
                      << ::geteuid());
    return "";
  }
  const std::string path = dir / name;
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(major_number, minor_number)) != 0) {
    const int error = errno;
    FAIL("mknod " << path << " failed as root (" << std::strerror(error) << "): this needs CAP_MKNOD");
  }
  return path;
}

// Reads a FIFO on a thread from before the program opens it until the program has ended.
class FifoReader {
 public:
  explicit FifoReader(const std::string& path) {
    // Non-blocking, so that opening does not wait for a writer and the thread can stop at any time.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("cannot open the FIFO " + path);
    thread_ = std::thread([this] {
      char buffer[1 << 16];
      for (;;) {
        const bool last = done_.load();  // read once more after the program ended, then stop
        for (;;) {
          const ssize_t n = ::read(fd_, buffer, sizeof buffer);
          if (n > 0) {
            received_.append(buffer, static_cast<std::size_t>(n));
            continue;
          }
          break;  // 0: no writer now; -1 EAGAIN: a writer, no bytes yet
        }
        if (last) return;
        std::this_thread::sleep_for(200us);
      }
    });
  }
  FifoReader(const FifoReader&) = delete;
  FifoReader& operator=(const FifoReader&) = delete;
  ~FifoReader() {
    finish();
    ::close(fd_);
  }

  // Everything the program wrote; call once it has ended.
  const std::string& finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    return received_;
  }

 private:
  int fd_ = -1;
  std::atomic<bool> done_{false};
  std::thread thread_;
  std::string received_;
};

// A large input (n = 512, 4 heads, d_model = 64): its whole trace is about 48 MB, long enough to
// write that a signal can arrive while it is being written.
std::string large_input() {
  const std::size_t n = 512, d = 64;
  std::string x, w;
  for (std::size_t i = 0; i < n; ++i) {
    x += i == 0 ? "[" : ",[";
    for (std::size_t c = 0; c < d; ++c)
      x += fmt::format("{}{:.3f}", c == 0 ? "" : ",", static_cast<double>((i * 31 + c * 17) % 97) / 97.0 - 0.5);
    x += "]";
  }
  for (std::size_t r = 0; r < d; ++r) {
    w += r == 0 ? "[" : ",[";
    for (std::size_t c = 0; c < d; ++c) w += fmt::format("{}{}", c == 0 ? "" : ",", (r * 7 + c * 3) % 11 == 0 ? 1 : 0);
    w += "]";
  }
  return fmt::format(R"({{"n_heads": 4, "mask": "causal", "X": [{}], "W_q": [{}], "W_k": [{}], "W_v": [{}]}})", x, w, w,
                     w);
}

}  // namespace

// --- writing: only regular files are replaced ---------------------------------------------------

TEST_CASE("run --json to a character device writes into the device and leaves it a device",
          "[cli][output][device][root]") {
  const TempDir dir;
  const std::string null_device = make_device(dir, "null", 1, 3);  // what /dev/null is
  if (null_device.empty()) return;                                 // skipped: not root
  const struct stat before = status_of(null_device);
  check_success(run_binary({"run", cat_sat, "--json", null_device}));
  const struct stat after = status_of(null_device);
  CHECK(S_ISCHR(after.st_mode));
  CHECK(after.st_rdev == before.st_rdev);
  CHECK(after.st_ino == before.st_ino);
  CHECK(temp_files_in(dir.path()).empty());
}

TEST_CASE("run --json to a full device fails with one write-failed line and leaves the device as it was",
          "[cli][output][device][root]") {
  const TempDir dir;
  const std::string full_device = make_device(dir, "full", 1, 7);  // what /dev/full is: every write fails
  if (full_device.empty()) return;                                 // skipped: not root
  const struct stat before = status_of(full_device);
  check_write_error(run_binary({"run", cat_sat, "--json", full_device}), full_device, {"No space left on device"});
  const struct stat after = status_of(full_device);
  CHECK(S_ISCHR(after.st_mode));
  CHECK(after.st_rdev == before.st_rdev);
  CHECK(after.st_ino == before.st_ino);
  CHECK(temp_files_in(dir.path()).empty());
}

TEST_CASE("run --json to a FIFO streams the whole trace to its reader and leaves it a FIFO", "[cli][output][fifo]") {
  const TempDir dir;
  const std::string fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  FifoReader reader(fifo);
  const RunResult r = run_binary({"run", cat_sat, "--json", fifo});
  const std::string received = reader.finish();
  check_success(r);
  CHECK(received == cat_sat_trace());
  CHECK(S_ISFIFO(status_of(fifo).st_mode));
  CHECK(temp_files_in(dir.path()).empty());
}

TEST_CASE("run --json to a listening Unix socket sends it the trace and leaves the socket", "[cli][output][socket]") {
  const TempDir dir;
  const std::string path = dir / "sock";
  const int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(server >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof address.sun_path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(::bind(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(server, 1) == 0);
  std::string received;
  std::thread accept_one([&] {
    pollfd p{server, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return;
    const int client = ::accept(server, nullptr, nullptr);
    if (client < 0) return;
    char buffer[1 << 16];
    for (ssize_t n; (n = ::read(client, buffer, sizeof buffer)) > 0;)
      received.append(buffer, static_cast<std::size_t>(n));
    ::close(client);
  });
  const RunResult r = run_binary({"run", cat_sat, "--json", path});
  accept_one.join();
  ::close(server);
  check_success(r);
  CHECK(received == cat_sat_trace());
  CHECK(S_ISSOCK(status_of(path).st_mode));
}

TEST_CASE("run --json to a symlink replaces its target and the link stays a link", "[cli][output][symlink]") {
  const TempDir dir;
  fs::create_directory(dir.path() / "real");
  const std::string target = dir / "real/trace.json";

  SECTION("an existing target keeps its permission bits") {
    write_file(target, "old\n");
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    fs::create_symlink("real/trace.json", dir.path() / "link.json");  // relative, as ln -s makes it
    check_success(run_binary({"run", cat_sat, "--json", dir / "link.json"}));
    CHECK(fs::is_symlink(dir.path() / "link.json"));
    CHECK(fs::read_symlink(dir.path() / "link.json") == "real/trace.json");
    CHECK(read_file(target) == cat_sat_trace());
    CHECK((status_of(target).st_mode & 07777) == 0640);
  }
  SECTION("a chain of two links, the last one dangling: the target is created") {
    fs::create_symlink(target, dir.path() / "second.json");  // absolute
    fs::create_symlink("second.json", dir.path() / "first.json");
    check_success(run_binary({"run", cat_sat, "--json", dir / "first.json"}));
    CHECK(fs::is_symlink(dir.path() / "first.json"));
    CHECK(fs::is_symlink(dir.path() / "second.json"));
    CHECK(read_file(target) == cat_sat_trace());
  }
  CHECK(temp_files_in(dir.path()).empty());
  CHECK(temp_files_in(dir.path() / "real").empty());
}

TEST_CASE("run --json over an existing regular file keeps its permission bits", "[cli][output][atomic]") {
  const TempDir dir;
  const std::string out = dir / "trace.json";
  write_file(out, "old\n");
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write);
  check_success(run_binary({"run", cat_sat, "--json", out}));
  CHECK(read_file(out) == cat_sat_trace());
  CHECK((status_of(out).st_mode & 07777) == 0600);
}

TEST_CASE("run --json /dev/stdout writes the trace into what stdout is, then the text, and replaces nothing",
          "[cli][output][stdout]") {
  const TempDir dir;
  const std::string out = dir / "both.txt";
  write_file(out, "");
  const RunResult r = run_binary({"run", cat_sat, "--json", "/dev/stdout"}, RunOptions().output_to(out));
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(fs::is_symlink("/dev/stdout"));
  const std::string both = read_file(out);
  CHECK(starts_with(both, cat_sat_trace()));
  CHECK(contains(both.substr(cat_sat_trace().size()), "━━ weights"));
}

// --- write errors say where ---------------------------------------------------------------------

TEST_CASE("A full standard output gives one write-failed line naming stdout and exit code 3", "[cli][output][stdout]") {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"run", cat_sat},
                                               {"run", cat_sat, "--json", "-"},
                                               {"compare", cat_sat},
                                               {"example"},
                                               {"--help"}}) {
    const RunResult r = run_binary(args, RunOptions().output_to("/dev/full"));
    check_write_error(r, "stdout", {"No space left on device"});
  }
}

TEST_CASE("A closed pipe on stdout ends the run quietly with exit code 141, as for any filter", "[cli][output][pipe]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", cat_sat}, {"run", cat_sat, "--json", "-"}, {"example", "--list"}}) {
    const RunResult r = run_binary(args, RunOptions().broken_pipe());
    INFO(r.describe());
    CHECK(r.exit_code == 141);
    CHECK(r.err.empty());
  }
}

// --- signals ------------------------------------------------------------------------------------

TEST_CASE("SIGTERM, SIGINT or SIGHUP while a large trace is written leave no temporary file and no half trace",
          "[cli][output][signal]") {
  const TempDir dir;
  const std::string input = dir / "large.json";
  write_file(input, large_input());
  const std::string out = dir / "out/trace.json";
  fs::create_directory(dir.path() / "out");

  // How long an undisturbed run takes, and the trace it writes.
  const RunResult whole =
      run_binary({"run", input, "--json", out}, RunOptions().output_to("/dev/null").wait_at_most(60s));
  REQUIRE(whole.exit_code == 0);
  const std::string complete = read_file(out);
  REQUIRE(complete.size() > 10'000'000);
  const auto took = whole.took;

  struct Moment {
    int signal;
    double fraction;  // of an undisturbed run; negative: as soon as the temporary file exists
  };
  // Under the sanitizers each run is many times slower: the three moments keyed to the file.
  const std::vector<Moment> moments =
      sanitized_program() ? std::vector<Moment>{{SIGTERM, -1}, {SIGINT, -1}, {SIGHUP, -1}}
                          : std::vector<Moment>{{SIGTERM, -1},  {SIGINT, -1},   {SIGHUP, -1},   {SIGTERM, 0.2},
                                                {SIGTERM, 0.5}, {SIGTERM, 0.8}, {SIGTERM, 0.95}};
  int caught_writing = 0;
  for (const Moment& m : moments) {
    fs::remove(out);
    bool sent = false, writing = false;
    const auto send = [&](int pid, std::chrono::microseconds elapsed) {
      if (sent) return;
      const bool temp_exists = !temp_files_in(dir.path() / "out").empty();
      if (m.fraction < 0 ? temp_exists
                         : static_cast<double>(elapsed.count()) >= m.fraction * static_cast<double>(took.count())) {
        writing = temp_exists;
        ::kill(pid, m.signal);
        sent = true;
      }
    };
    const RunResult r = run_binary({"run", input, "--json", out},
                                   RunOptions().output_to("/dev/null").while_running(send).wait_at_most(60s));
    INFO("signal " << m.signal << " at " << m.fraction << " of " << took.count() << " µs; sent " << sent
                   << ", temporary file there when sent: " << writing << "\n"
                   << r.describe());
    caught_writing += writing ? 1 : 0;
    if (m.fraction < 0 || !sent) {
      // Sent while the temporary file was being written: the signal ends the run.
      CHECK((r.exit_code == 128 + m.signal || (r.exit_code == 0 && !sent)));
    } else {
      // Sent at a moment of the undisturbed run's duration: this run may have finished already (runs vary),
      // and then it ends 0 with the whole trace in place; otherwise the signal ended it.
      CHECK((r.exit_code == 128 + m.signal || (r.exit_code == 0 && fs::exists(out) && read_file(out) == complete)));
    }
    CHECK(temp_files_in(dir.path() / "out").empty());
    // Under its name there is the whole trace or nothing.
    if (fs::exists(out)) CHECK(read_file(out) == complete);
  }
  // The moments keyed to the temporary file must really have caught a write in progress.
  CHECK(caught_writing >= 3);
}
