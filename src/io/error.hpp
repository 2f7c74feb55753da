#pragma once
// The one exception type for input that cannot be used: a file, a JSON Pointer (RFC 6901) into it
// and what is wrong there. Caught once in main, printed as one line, exit code 2.

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
