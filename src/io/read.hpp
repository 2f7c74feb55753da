#pragma once
// Reading a whole input within a memory limit. A JSON document costs far more once parsed than its
// bytes (nlohmann/json keeps 16 bytes a value, plus a heap block for every list, object and string),
// so the limit covers the parse too: JsonCost counts, as the bytes arrive, what parsing them will
// take, and reading stops as soon as that is over the limit. docs/reliability.md has the figures.

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace attn {

// How much memory a run may take: `bytes`, and `text` as the user wrote it, for messages ("4G").
struct MemoryLimit {
  std::size_t bytes = std::numeric_limits<std::size_t>::max();
  std::string text = "none";
};

// An upper bound on the memory that parsing a JSON text and turning it into a Problem or a Trace
// takes, counted from its bytes. The constants are measured (docs/reliability.md, "Reading"): each
// sits above the largest cost seen per item over inputs of every shape.
class JsonCost {
 public:
  static constexpr std::size_t per_value = 48;       // a value in its parent's list (with spare capacity)
  static constexpr std::size_t per_container = 160;  // a list or object: its heap blocks
  static constexpr std::size_t per_string = 128;     // a string or key: its heap block, and its copy
  static constexpr std::size_t per_string_byte = 4;  // a string's bytes: lexer, DOM and our copy

  // Counts `chunk`, the next bytes of the text.
  void add(std::string_view chunk);

  // The bytes read so far, and what holding and parsing them takes.
  std::size_t bytes() const { return bytes_; }
  std::size_t values() const { return commas_ + containers_ + (bytes_ > 0 ? 1 : 0); }
  std::size_t total() const;

 private:
  std::size_t bytes_ = 0;
  std::size_t commas_ = 0;      // outside strings: a value follows each
  std::size_t containers_ = 0;  // '[' and '{'
  std::size_t strings_ = 0;
  std::size_t string_bytes_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

// The whole content of `path` ("-": standard input). Refused with an InputError naming the file:
// a folder; a regular file larger than the limit, before a byte is read; input whose first
// character cannot begin a JSON value, at its first bytes; and any input (a pipe, a device, a file
// that grows) as soon as JsonCost says that parsing what was read so far would pass the limit.
std::string read_text(const std::string& path, const MemoryLimit& limit = {});

// The bytes of `path` (a binary dump), refused with an InputError naming the file once they pass
// `limit` bytes (`limit_text` names the limit in the message), or when it is a directory.
std::string read_bytes(const std::string& path, std::size_t limit, const std::string& limit_text);

// How error messages name `path`.
std::string display_name(const std::string& path);

}  // namespace attn
