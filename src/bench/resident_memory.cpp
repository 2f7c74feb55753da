#include "bench/resident_memory.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace attn {

std::string_view name_of(PeakMethod method) {
  switch (method) {
    case PeakMethod::clear_refs: return "clear_refs";
    case PeakMethod::fork: return "fork";
    case PeakMethod::none: return "none";
  }
  return "?";
}

std::size_t status_bytes(std::string_view key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(key)) continue;
    std::size_t at = key.size();
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    std::size_t kib = 0;
    std::from_chars(line.data() + at, line.data() + line.size(), kib);
    return kib * 1024;
  }
  return 0;
}

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

bool reset_peak() {
  release_free_memory();
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok && status_bytes("VmHWM:") > 0;
}

std::size_t peak_of_child(const std::function<void()>& work) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int code = 0;
    try {
      work();
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0)
    if (errno != EINTR) return 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

PeakMethod find_peak_method() {
  if (reset_peak()) return PeakMethod::clear_refs;
  return status_bytes("VmRSS:") > 0 || ::access("/proc", F_OK) == 0 ? PeakMethod::fork : PeakMethod::none;
}

}  // namespace attn
