#include "io/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "io/error.hpp"

namespace attn {

namespace {

// Removes the temporary file unless it was renamed into place.
struct TempFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep && !path.empty()) ::unlink(path.c_str());
  }
};

[[noreturn]] void fail(const std::string& path, std::string_view what, int error) {
  throw InputError(path, "", fmt::format("cannot write the file: {}: {}", what, std::strerror(error)));
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view content) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  // The temporary file lives in the target's folder so that rename() is atomic (same file system).
  TempFile tmp;
  tmp.path = (folder / fmt::format(".{}.tmp-XXXXXX", target.filename().string())).string();
  tmp.fd = ::mkstemp(tmp.path.data());
  if (tmp.fd < 0) {
    const int error = errno;
    tmp.path.clear();
    fail(path, fmt::format("cannot create a file in {}", folder.string()), error);
  }
  ::fchmod(tmp.fd, 0644);  // mkstemp makes 0600; a trace is an ordinary file

  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(tmp.fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "writing", errno);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(tmp.fd) != 0 && errno != EINVAL) fail(path, "flushing to disk", errno);
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) fail(path, "closing", errno);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) fail(path, "renaming into place", errno);
  tmp.keep = true;
}

}  // namespace attn
