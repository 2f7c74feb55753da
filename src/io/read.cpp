#include "io/read.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "io/examples.hpp"
#include "json/error.hpp"
#include "text/number.hpp"

namespace attn {

namespace {

std::size_t saturating_add(std::size_t a, std::size_t b) {
  std::size_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::size_t>::max() : sum;
}

std::size_t saturating_mul(std::size_t a, std::size_t b) {
  std::size_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<std::size_t>::max() : product;
}

bool is_json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The characters that can begin a JSON value: { [ " - 0-9 t f n.
bool begins_json_value(unsigned char c) {
  return c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n';
}

// Watches the first bytes of a text: once the first one that is not white space (nor the UTF-8 byte
// order mark that nlohmann/json skips) arrives, says whether it can begin a JSON value.
class FirstByte {
 public:
  // "" while undecided or fine; otherwise why the text is not JSON.
  std::string add(std::string_view chunk) {
    for (const char ch : chunk) {
      if (decided_) return "";
      const auto c = static_cast<unsigned char>(ch);
      if (bom_ < 3 && offset_ == bom_ && c == bom[bom_]) {
        ++bom_;
        ++offset_;
        continue;
      }
      if (is_json_space(c)) {
        ++offset_;
        ++column_;
        if (c == '\n') ++line_, column_ = 1;
        continue;
      }
      decided_ = true;
      if (!begins_json_value(c))
        return fmt::format("invalid JSON at line {}, column {}: byte 0x{:02X} cannot begin a JSON value", line_,
                           column_, c);
    }
    return "";
  }

 private:
  static constexpr unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
  bool decided_ = false;
  std::size_t bom_ = 0, offset_ = 0, line_ = 1, column_ = 1;
};

[[noreturn]] void cannot_read(const std::string& path, int error) {
  const std::string hint = error == ENOENT ? missing_example_hint(path) : "";
  throw InputError(display_name(path), "",
                   fmt::format("cannot read the file: {}{}", std::strerror(error), hint.empty() ? "" : "; " + hint));
}

// Closes the descriptor it was given, unless it is standard input.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd > STDIN_FILENO) ::close(fd);
  }
};

// Opens `path` ("-": standard input) into `in` and returns what fstat says of it; a directory, or a
// file that cannot be opened, is an InputError.
struct stat open_to_read(Descriptor& in, const std::string& path) {
  if (path == "-") {
    in.fd = STDIN_FILENO;
  } else {
    // A FIFO blocks here until a writer comes, as it does for every reader.
    in.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (in.fd < 0) cannot_read(path, errno);
  }
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) cannot_read(path, errno);
  if (S_ISDIR(st.st_mode)) throw InputError(display_name(path), "", "cannot read the file: it is a directory");
  return st;
}

// Reads `in` to its end in chunks, giving each to `take`; a read error is an InputError naming `path`.
template <class Take>
void read_chunks(const Descriptor& in, const std::string& path, Take&& take) {
  std::string chunk(std::size_t{1} << 16, '\0');
  for (;;) {
    const ssize_t n = ::read(in.fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) cannot_read(path, errno);
    if (n == 0) return;
    take(std::string_view(chunk.data(), static_cast<std::size_t>(n)));
  }
}

}  // namespace

void JsonCost::add(std::string_view chunk) {
  bytes_ += chunk.size();
  const char* p = chunk.data();
  const char* const end = p + chunk.size();
  while (p != end) {
    if (in_string_) {
      for (; p != end; ++p) {
        if (escaped_) escaped_ = false;
        else if (*p == '\\') escaped_ = true;
        else if (*p == '"') break;
        ++string_bytes_;  // every byte between the quotes, escapes included
      }
      if (p == end) return;
      in_string_ = false;
      ++p;
      continue;
    }
    // Up to the next quote, as two simple loops (memchr's and the counting one, which the compiler
    // vectorises): a byte at a time, counting took as long as reading the file.
    const auto* quote = static_cast<const char*>(std::memchr(p, '"', static_cast<std::size_t>(end - p)));
    const char* const stop = quote != nullptr ? quote : end;
    std::size_t commas = 0, containers = 0;
    for (; p != stop; ++p) {
      commas += *p == ',';
      containers += (*p == '[') + (*p == '{');
    }
    commas_ += commas;
    containers_ += containers;
    if (quote != nullptr) {
      in_string_ = true;
      ++strings_;
      ++p;
    }
  }
}

std::size_t JsonCost::total() const {
  std::size_t sum = bytes_;
  sum = saturating_add(sum, saturating_mul(values(), per_value));
  sum = saturating_add(sum, saturating_mul(containers_, per_container));
  sum = saturating_add(sum, saturating_mul(strings_, per_string));
  sum = saturating_add(sum, saturating_mul(string_bytes_, per_string_byte));
  return sum;
}

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::string read_text(const std::string& path, const MemoryLimit& limit) {
  const std::string name = display_name(path);
  Descriptor in;
  const struct stat st = open_to_read(in, path);

  std::string text;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size > limit.bytes)
      throw InputError(name, "",
                       fmt::format("the file is {}, over --max-memory {}: loading it takes its size and "
                                   "more, so it was not read",
                                   describe_bytes(size), limit.text));
    text.reserve(size);
  }

  JsonCost cost;
  FirstByte first;
  read_chunks(in, path, [&](std::string_view got) {
    if (const std::string why = first.add(got); !why.empty()) throw InputError(name, "", why);
    cost.add(got);
    // Growing the text holds the old block and the new one at once (a regular file's is reserved).
    std::size_t growing = 0;
    if (text.size() + got.size() > text.capacity())
      growing = std::max(text.capacity() * 2, text.size() + got.size()) + text.capacity() - text.size();
    if (cost.total() + growing > limit.bytes)
      throw InputError(name, "",
                       fmt::format("loading this input would take more than --max-memory {} (the text, and "
                                   "about {} bytes for each value once parsed): reading stopped at {}",
                                   limit.text, JsonCost::per_value, describe_bytes(cost.bytes())));
    if (growing > 0) text.reserve(std::max(text.capacity() * 2, text.size() + got.size()));
    text.append(got);
  });
  return text;
}

std::string MemoryBudget::describe() const {
  if (left >= limit.bytes) return fmt::format("--max-memory {}", limit.text);
  return fmt::format("what --max-memory {} leaves ({})", limit.text, describe_bytes(left));
}

InputFile::InputFile(const std::string& path) : path_(path), name_(display_name(path)) {
  Descriptor in;
  const struct stat st = open_to_read(in, path);
  if (S_ISREG(st.st_mode)) size_ = static_cast<std::size_t>(st.st_size);
  fd_ = std::exchange(in.fd, -1);
}

InputFile::~InputFile() {
  if (fd_ > STDIN_FILENO) ::close(fd_);
}

std::size_t InputFile::read(char* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd_, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) cannot_read(path_, errno);
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

std::size_t ByteView::read(char* out, std::size_t n) {
  const std::size_t got = std::min(n, bytes_.size() - at_);
  std::memcpy(out, bytes_.data() + at_, got);
  at_ += got;
  return got;
}

std::string read_up_to(ByteSource& in, std::size_t n) {
  constexpr std::size_t chunk = std::size_t{1} << 16;
  std::string out;
  while (out.size() < n) {
    const std::size_t want = std::min(chunk, n - out.size());
    const std::size_t before = out.size();
    out.resize(before + want);
    const std::size_t got = in.read(out.data() + before, want);
    out.resize(before + got);
    if (got < want) break;
  }
  return out;
}

void check_size(const ByteSource& in, const std::string& file, const MemoryBudget& budget) {
  const std::optional<std::size_t> size = in.size();
  if (size && *size > budget.left)
    throw InputError(file, "",
                     fmt::format("the file is {}, over {}: it was not read", describe_bytes(*size), budget.describe()));
}

}  // namespace attn
