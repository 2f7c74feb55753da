#pragma once
// The exception types of src/io, each caught once in main and printed as one line:
// InputError for input that cannot be used (exit code 2), OutputError for output that could not be
// written (exit code 3), BrokenPipe for a reader that went away (no message, exit code 141).

#include <stdexcept>
#include <string>

namespace attn {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string pointer, std::string message);

  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }  // "" for the whole document
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  std::string pointer_;
  std::string message_;
};

// A write that failed: `file` ("stdout" for the standard output) and why, as
// "FILE: write failed: REASON".
class OutputError : public std::runtime_error {
 public:
  OutputError(const std::string& file, const std::string& reason)
      : std::runtime_error(file + ": write failed: " + reason) {}
};

// The reader of a pipe closed it (EPIPE). Like every Unix filter, the tool then stops quietly.
class BrokenPipe : public std::runtime_error {
 public:
  BrokenPipe() : std::runtime_error("broken pipe") {}
};

}  // namespace attn
