#pragma once
// InputError, for input that cannot be used (exit code 2): the file, the JSON Pointer of the value
// ("" for the whole document) and what is wrong, caught once in main and printed as one line. Every
// reader throws it, JSON or not. OutputError and BrokenPipe, for output, are io/output.hpp's.

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

}  // namespace attn
