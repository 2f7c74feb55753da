#include "io/output.hpp"

#include <array>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

namespace attn {

namespace {

// --- temporary files the signal handler removes ---------------------------------------------------
// Plain arrays and sig_atomic_t flags: all a signal handler may touch. Each slot is filled and
// emptied with the signals blocked, so the handler never sees half a path.

constexpr std::size_t max_temp_files = 8;
constexpr std::size_t max_temp_path = PATH_MAX + NAME_MAX + 32;

char temp_paths[max_temp_files][max_temp_path];
volatile std::sig_atomic_t temp_active[max_temp_files];

constexpr std::array cleanup_signals = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temp_files_and_exit(int signal) {
  for (std::size_t i = 0; i < max_temp_files; ++i)
    if (temp_active[i]) ::unlink(temp_paths[i]);
  ::_exit(128 + signal);
}

// Blocks the cleanup signals for its lifetime.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t set;
    sigemptyset(&set);
    for (const int s : cleanup_signals) sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, &old_);
  }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;
  ~SignalsHeld() { sigprocmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

// --- where a path leads -------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& path, const std::string& reason) { throw OutputError(path, reason); }

[[noreturn]] void fail_errno(const std::string& path, const std::string& what, int error) {
  if (error == EPIPE) throw BrokenPipe();
  fail(path, what.empty() ? std::string(std::strerror(error)) : fmt::format("{}: {}", what, std::strerror(error)));
}

std::string parent_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Whether reserve_standard_descriptors put /dev/null on standard descriptor `fd` (0, 1 or 2).
bool& reserved_descriptor(int fd) {
  static std::array<bool, 3> reserved{};
  return reserved.at(static_cast<std::size_t>(fd));
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

struct Destination {
  enum Kind { replace, in_place, descriptor } kind = replace;
  std::string path;  // replace: the regular file to create or replace; in_place: what to open
  bool exists = false;
  struct stat st {};
  int fd = -1;  // descriptor: our stdout or stderr
};

// Follows `path` through its symbolic links (as open() would) to what will be written.
Destination destination(const std::string& path) {
  if (path.empty()) fail(path, "the file name is empty");
  Destination d;
  // The file that our own stdout or stderr already writes (`--json /dev/stdout > out.txt`, or a
  // pipe): write through that descriptor, or the replaced file would swallow the other output.
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0) {
    for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
      struct stat st {};
      if (!reserved_descriptor(fd) && ::fstat(fd, &st) == 0 && same_file(st, target)) {
        d.kind = Destination::descriptor;
        d.fd = fd;
        return d;
      }
    }
  }

  std::string at = path;
  for (int hops = 0; hops <= 40; ++hops) {
    char* folder = ::realpath(parent_of(at).c_str(), nullptr);
    if (folder == nullptr) fail_errno(path, fmt::format("cannot reach the folder {}", parent_of(at)), errno);
    const std::string dir = folder;
    std::free(folder);
    // /proc/self/fd/N (what /dev/stdout and /dev/fd/N lead to) names an open file, not a place where a
    // file can be put: write it in place.
    if (dir == "/proc" || dir.rfind("/proc/", 0) == 0) {
      d.kind = Destination::in_place;
      d.path = at;
      d.exists = ::stat(at.c_str(), &d.st) == 0;
      return d;
    }
    const std::string name = name_of(at);
    if (name.empty() || name == "." || name == "..") fail(path, "it is a directory");
    const std::string here = fmt::format("{}/{}", dir == "/" ? "" : dir, name);
    if (::lstat(here.c_str(), &d.st) != 0) {
      if (errno != ENOENT) fail_errno(path, "", errno);
      d.kind = Destination::replace;  // a new file (or the missing target of a link)
      d.path = here;
      return d;
    }
    if (S_ISLNK(d.st.st_mode)) {
      std::string link(PATH_MAX, '\0');
      const ssize_t n = ::readlink(here.c_str(), link.data(), link.size());
      if (n < 0) fail_errno(path, "cannot read the link", errno);
      link.resize(static_cast<std::size_t>(n));
      at = !link.empty() && link[0] == '/' ? link : fmt::format("{}/{}", dir, link);
      continue;
    }
    if (S_ISDIR(d.st.st_mode)) fail(path, "it is a directory");
    d.kind = S_ISREG(d.st.st_mode) ? Destination::replace : Destination::in_place;
    d.path = here;
    d.exists = true;
    return d;
  }
  fail(path, std::strerror(ELOOP));
}

int open_in_place(const std::string& path, const Destination& d) {
  if (d.exists && S_ISSOCK(d.st.st_mode)) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail_errno(path, "cannot open a socket", errno);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (d.path.size() >= sizeof address.sun_path) {
      ::close(fd);
      fail(path, "the socket's path is too long to connect to");
    }
    std::memcpy(address.sun_path, d.path.c_str(), d.path.size() + 1);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      const int error = errno;
      ::close(fd);
      fail_errno(path, "cannot connect to the socket", error);
    }
    return fd;
  }
  // A regular file reached through /proc is an open file of ours: truncate it as a redirect would.
  const int truncate = d.exists && S_ISREG(d.st.st_mode) ? O_TRUNC : 0;
  const int fd = ::open(d.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | truncate);
  if (fd < 0) fail_errno(path, "cannot open it", errno);
  return fd;
}

void write_all(int fd, std::string_view bytes, const std::string& name) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(name, "", errno);
    }
    done += static_cast<std::size_t>(n);
  }
}

mode_t current_umask() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  const Destination d = destination(path_);
  if (d.kind == Destination::descriptor) {
    fd_ = d.fd;
    own_fd_ = false;
    if (fd_ == STDOUT_FILENO && std::fflush(stdout) != 0) fail_errno("stdout", "", errno);
    return;
  }
  if (d.kind == Destination::in_place) {
    fd_ = open_in_place(path_, d);
    return;
  }

  // The temporary file lives beside the target so that rename() is atomic (same file system).
  target_ = d.path;
  std::string temp = parent_of(target_) + "/." + name_of(target_) + ".tmp-XXXXXX";
  if (temp.size() >= max_temp_path) fail(path_, "the path is too long");
  {
    const SignalsHeld held;
    for (std::size_t i = 0; i < max_temp_files && slot_ < 0; ++i)
      if (!temp_active[i]) slot_ = static_cast<int>(i);
    if (slot_ < 0) fail(path_, "too many files open for writing at once");
    fd_ = ::mkostemp(temp.data(), O_CLOEXEC);
    if (fd_ < 0) fail_errno(path_, fmt::format("cannot create a file in {}", parent_of(target_)), errno);
    temp_ = temp;
    std::memcpy(temp_paths[slot_], temp_.c_str(), temp_.size() + 1);
    temp_active[slot_] = 1;
  }
  // mkstemp makes 0600: a new file gets what the umask allows, a replaced one keeps its owner and bits.
  if (d.exists) {
    // Without root the owner cannot be kept: the file becomes ours, still with its permission bits.
    [[maybe_unused]] const int chowned = ::fchown(fd_, d.st.st_uid, d.st.st_gid);
    ::fchmod(fd_, d.st.st_mode & 07777);
  } else {
    ::fchmod(fd_, 0666 & ~current_umask());
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0 && own_fd_) ::close(fd_);
  if (!temp_.empty()) {
    const SignalsHeld held;
    ::unlink(temp_.c_str());
    if (slot_ >= 0) temp_active[slot_] = 0;
  }
}

void OutputFile::write(std::string_view bytes) {
  if (fd_ < 0) fail(path_, "already closed");
  write_all(fd_, bytes, path_);
}

void OutputFile::commit() {
  if (fd_ < 0) fail(path_, "already closed");
  const int fd = fd_;
  fd_ = -1;
  if (!own_fd_) return;
  const bool replacing = !target_.empty();
  if (replacing && ::fsync(fd) != 0 && errno != EINVAL) {
    const int error = errno;
    ::close(fd);
    fail_errno(path_, "flushing to disk", error);
  }
  if (::close(fd) != 0) fail_errno(path_, "", errno);
  if (!replacing) return;
  const SignalsHeld held;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail_errno(path_, "renaming into place", errno);
  temp_.clear();
  temp_active[slot_] = 0;
}

void write_output_file(const std::string& path, std::string_view content) {
  OutputFile out(path);
  out.write(content);
  out.commit();
}

void write_stdout(std::string_view text) {
  if (std::fflush(stdout) != 0) fail_errno("stdout", "", errno);
  write_all(STDOUT_FILENO, text, "stdout");
}

void finish_stdout() {
  std::cout.flush();
  if (!std::cout) fail("stdout", "the output stream failed");
  if (std::fflush(stdout) != 0) fail_errno("stdout", "", errno);
  if (::close(STDOUT_FILENO) != 0 && errno != EBADF && errno != EINTR) fail_errno("stdout", "", errno);
}

void write_stderr(std::string_view text) noexcept {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed, full or gone: there is nowhere left to say it
    done += static_cast<std::size_t>(n);
  }
}

void reserve_standard_descriptors() noexcept {
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == STDIN_FILENO ? O_WRONLY : O_RDONLY);
    if (opened < 0) continue;
    // open() takes the lowest free number, which is `fd` itself when the ones below it are open.
    if (opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
    reserved_descriptor(fd) = true;
  }
}

void install_signal_cleanup() {
  struct sigaction action {};
  action.sa_handler = remove_temp_files_and_exit;
  sigemptyset(&action.sa_mask);
  for (const int s : cleanup_signals) sigaddset(&action.sa_mask, s);  // one handler at a time
  for (const int s : cleanup_signals) ::sigaction(s, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

}  // namespace attn
