#pragma once
// Everything the tool writes goes through here: files (--json, and every later -o) through
// OutputFile, the standard output through write_stdout. The tool runs as root, so a path is only
// ever replaced when it is a regular file (docs/reliability.md, "Writing"):
//
//   what the path is                     how it is written
//   nothing yet, or a regular file       a temporary file beside it, renamed over it when complete
//                                        (an existing file keeps its permission bits and owner)
//   a symbolic link                      followed: its final target is written as above, the link stays
//   a device, FIFO, socket, /dev/stdout  opened and written in place, streaming; never renamed over,
//                                        never truncated
//   the file our stdout or stderr is     written through that descriptor, after what is already there
//
// Failures are OutputError ("FILE: write failed: REASON"), a closed pipe is BrokenPipe.

#include <stdexcept>
#include <string>
#include <string_view>

namespace attn {

// A write that failed: `file` ("stdout" for the standard output) and why, as
// "FILE: write failed: REASON"; caught once in main (exit code 3).
class OutputError : public std::runtime_error {
 public:
  OutputError(const std::string& file, const std::string& reason)
      : std::runtime_error(file + ": write failed: " + reason) {}
};

// The reader of a pipe closed it (EPIPE). Like every Unix filter, the tool then stops quietly (no
// message, exit code 141).
class BrokenPipe : public std::runtime_error {
 public:
  BrokenPipe() : std::runtime_error("broken pipe") {}
};

class OutputFile {
 public:
  // Decides how `path` is written and opens it; nothing is visible under `path` before commit().
  explicit OutputFile(std::string path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // without commit(): the temporary file is removed, `path` is as it was

  void write(std::string_view bytes);
  // Flushes and closes; a temporary file is synced and renamed into place.
  void commit();

 private:
  std::string path_;  // as the user wrote it, for messages
  int fd_ = -1;
  bool own_fd_ = true;  // false for our own stdout or stderr
  std::string target_;  // the regular file a temporary file is renamed to; "" when written in place
  std::string temp_;    // replace: the temporary file, "" once renamed
  int slot_ = -1;       // replace: where the signal handler finds temp_
};

// `content` written to `path` through an OutputFile.
void write_output_file(const std::string& path, std::string_view content);

// `text` written to the standard output (after anything stdio holds), every byte or an OutputError
// naming "stdout".
void write_stdout(std::string_view text);

// The end of the program's output: flushes stdio and closes the standard output, checking both (a
// full disk may only show at close).
void finish_stdout();

// `text` written to the standard error as far as it goes: never throws, whatever the standard error is
// (closed, a full device, a pipe nobody reads), so that the exit code of a failure is never lost to the
// message about it.
void write_stderr(std::string_view text) noexcept;

// Standard input, output and error that the program was started without (`2>&-`) are opened on
// /dev/null the wrong way round (input write-only, outputs read-only): every use of them still fails
// as it would have, but no file the program opens later can take their number and receive what was
// meant for them. Call once, first thing in main.
void reserve_standard_descriptors() noexcept;

// From now on SIGINT, SIGTERM and SIGHUP remove the temporary files being written, then end the
// program with exit code 128 + the signal's number; SIGPIPE is ignored, so that a closed pipe is an
// error value (BrokenPipe) and not a sudden death. Call once, first thing in main.
void install_signal_cleanup();

}  // namespace attn
