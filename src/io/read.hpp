#pragma once
// Reading a whole input within a memory limit. A JSON document costs far more once parsed than its
// bytes (nlohmann/json keeps 16 bytes a value, plus a heap block for every list, object and string),
// so the limit covers the parse too: JsonCost counts, as the bytes arrive, what parsing them will
// take, and reading stops as soon as that is over the limit. docs/reliability.md has the figures.

#include <cstddef>
#include <limits>
#include <optional>
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

// What a reader may still take of --max-memory: `left` bytes of `limit`, less than all of it when the
// run holds something already (the files of a dump read before this one).
struct MemoryBudget {
  std::size_t left = std::numeric_limits<std::size_t>::max();
  MemoryLimit limit;

  MemoryBudget() = default;
  explicit MemoryBudget(const MemoryLimit& whole) : left(whole.bytes), limit(whole) {}
  MemoryBudget(std::size_t left_bytes, const MemoryLimit& whole) : left(left_bytes), limit(whole) {}

  // For messages: "--max-memory 4G", or "what --max-memory 4G leaves (1.5 GiB)" when the run holds some.
  std::string describe() const;
};

// Bytes read in order from their start: a file, or bytes already in memory (for the tests and the fuzzer).
class ByteSource {
 public:
  ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  virtual ~ByteSource() = default;

  // Up to `n` bytes into `out`; fewer only at the end. A read error is an InputError.
  virtual std::size_t read(char* out, std::size_t n) = 0;
  // How many bytes there are in all, when that is known before reading (a regular file, memory).
  virtual std::optional<std::size_t> size() const = 0;
};

// The bytes of `path` ("-": standard input), opened to be read. A regular file's size is what fstat
// says of the opened descriptor, before a byte is read; a pipe, a device or standard input has none.
// A folder, or a file that cannot be opened, is an InputError naming it.
class InputFile final : public ByteSource {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile() override;

  std::size_t read(char* out, std::size_t n) override;
  std::optional<std::size_t> size() const override { return size_; }
  const std::string& name() const { return name_; }  // as messages name it

 private:
  int fd_ = -1;
  std::string path_, name_;
  std::optional<std::size_t> size_;
};

// Bytes already in memory, as a ByteSource.
class ByteView final : public ByteSource {
 public:
  explicit ByteView(std::string_view bytes) : bytes_(bytes) {}
  std::size_t read(char* out, std::size_t n) override;
  std::optional<std::size_t> size() const override { return bytes_.size(); }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// Up to `n` bytes of `in` (fewer only at its end), grown a chunk at a time, so that a length read from a
// file that runs past a short stream costs only what arrives.
std::string read_up_to(ByteSource& in, std::size_t n);

// An InputError naming `file` when `in` is a regular file larger than `budget.left`, said before a
// byte is read: "the file is 8.0 GiB, over --max-memory 4G: it was not read". Every value a file is read
// into takes at least the bytes it was stored in, so no file larger than the budget can fit.
void check_size(const ByteSource& in, const std::string& file, const MemoryBudget& budget);

// How error messages name `path`.
std::string display_name(const std::string& path);

}  // namespace attn
