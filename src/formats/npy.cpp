#include "formats/npy.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "formats/dump_bytes.hpp"
#include "json/error.hpp"
#include "text/number.hpp"

namespace attn {

using dump_detail::quote_bytes;
using dump_detail::shape_text;

namespace {

constexpr std::string_view magic = "\x93NUMPY";
constexpr std::size_t max_rank = 64;  // numpy 2's limit on dimensions

struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<Shape> shape;
};

// The header is a Python dict literal, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
// parsed by hand: strict about what it holds, tolerant of spacing, quotes and trailing commas.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  Header parse() {
    Header h;
    skip_space();
    expect('{', "a '{' to open the header's dict");
    for (;;) {
      skip_space();
      if (eat('}')) break;
      const std::string key = string_literal("a quoted key");
      skip_space();
      expect(':', fmt::format("':' after the key {}", quote_bytes(key)));
      skip_space();
      if (key == "descr") {
        if (h.descr) fail("has the key 'descr' twice");
        if (peek() != '\'' && peek() != '"')
          fail("has a 'descr' that is not a string: structured arrays are not read, only plain float arrays");
        h.descr = string_literal("a string for 'descr'");
      } else if (key == "fortran_order") {
        if (h.fortran_order) fail("has the key 'fortran_order' twice");
        h.fortran_order = boolean();
      } else if (key == "shape") {
        if (h.shape) fail("has the key 'shape' twice");
        h.shape = tuple();
      } else {
        fail(fmt::format("has the key {}: a .npy header holds only 'descr', 'fortran_order' and 'shape'",
                         quote_bytes(key)));
      }
      skip_space();
      if (eat(',')) continue;
      skip_space();
      expect('}', "',' or '}' after a value");
      break;
    }
    skip_space();
    if (pos_ != text_.size())
      fail(fmt::format("has {} after the dict's closing '}}'", quote_bytes(text_.substr(pos_), 16)));
    if (!h.descr) fail("has no 'descr' (the dtype)");
    if (!h.fortran_order) fail("has no 'fortran_order'");
    if (!h.shape) fail("has no 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(file_, "", "the .npy header " + what); }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }

  // Spaces and the newline that ends the padding.
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool eat(char c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  void expect(char c, const std::string& what) {
    if (eat(c)) return;
    found(what);
  }

  [[noreturn]] void found(const std::string& what) const {
    if (at_end()) fail(fmt::format("ends where it needs {}", what));
    fail(fmt::format("has {} at byte {} where it needs {}", quote_bytes(text_.substr(pos_), 12), pos_, what));
  }

  // 'text' or "text", without escapes (no key or dtype of a .npy file has one).
  std::string string_literal(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') found(what);
    const std::size_t begin = ++pos_;
    while (!at_end() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') fail("has a string with an escape or a line break");
      ++pos_;
    }
    if (at_end()) fail("ends inside a string");
    std::string out(text_.substr(begin, pos_ - begin));
    ++pos_;
    return out;
  }

  bool boolean() {
    const std::string_view rest = text_.substr(pos_);
    if (rest.starts_with("True")) return pos_ += 4, true;
    if (rest.starts_with("False")) return pos_ += 5, false;
    found("True or False for 'fortran_order'");
  }

  // "(2, 3)", "(5,)", "()"; "(5)" is not a tuple in Python, so not here either.
  Shape tuple() {
    expect('(', "a tuple such as (2, 3) for 'shape'");
    Shape shape;
    skip_space();
    if (eat(')')) return shape;
    for (;;) {
      shape.push_back(extent());
      if (shape.size() > max_rank) fail(fmt::format("has a shape of more than {} dimensions", max_rank));
      skip_space();
      if (eat(',')) {
        skip_space();
        if (eat(')')) return shape;
        continue;
      }
      if (eat(')')) {
        if (shape.size() == 1)
          fail(fmt::format("has the shape ({}), which is not a tuple: write ({},)", shape[0], shape[0]));
        return shape;
      }
      found("',' or ')' in the shape");
    }
  }

  std::size_t extent() {
    if (peek() == '-') fail("has a negative extent in its shape");
    if (peek() < '0' || peek() > '9') found("a whole number in the shape");
    std::size_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(value, std::size_t{10}, &value) ||
          __builtin_add_overflow(value, static_cast<std::size_t>(peek() - '0'), &value))
        fail("has an extent in its shape too large for this machine");
      ++pos_;
    }
    eat('L');  // Python 2's long integers, in files numpy wrote then
    if (peek() == '.' || peek() == 'e' || peek() == 'E' || peek() == 'j')
      fail("has an extent in its shape that is not a whole number");
    return value;
  }

  std::string_view text_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

DumpDType dtype_of(const std::string& descr, bool bfloat16_from_u2, const std::string& file) {
  if (descr == "<f2") return DumpDType::float16;
  if (descr == "<f4") return DumpDType::float32;
  if (descr == "<f8") return DumpDType::float64;
  if (descr == "<u2" || descr == "|V2") {
    if (bfloat16_from_u2) return DumpDType::bfloat16;
    throw InputError(file, "",
                     fmt::format("the dtype {} is 16-bit integers, not floats: if they are bfloat16 bits (numpy "
                                 "has no bfloat16), read the file as bfloat16",
                                 quote_bytes(descr)));
  }
  if (descr.size() >= 2 && descr[0] == '>' && descr[1] == 'f')
    throw InputError(file, "",
                     fmt::format("the dtype {} is big-endian: only little-endian <f2, <f4, <f8 are read (save "
                                 "with arr.astype('<f4'))",
                                 quote_bytes(descr)));
  throw InputError(file, "",
                   fmt::format("the dtype {} is not read: only little-endian floats <f2, <f4, <f8, and bfloat16 "
                               "stored as <u2 or |V2",
                               quote_bytes(descr)));
}

// The preamble, magic, version and header length; returns the header's length and where it begins.
std::pair<std::size_t, std::size_t> read_preamble(ByteSource& in, const std::string& file) {
  const std::string first = read_up_to(in, 8);
  if (first.empty()) throw InputError(file, "", "the file is empty (0 bytes): expected a .npy file");
  if (!first.starts_with(magic)) {
    if (magic.starts_with(first))
      throw InputError(file, "", fmt::format("the file ends after {} bytes, inside the .npy magic", first.size()));
    throw InputError(file, "", "not a .npy file: it does not start with \\x93NUMPY");
  }
  if (first.size() < 8) throw InputError(file, "", "the file ends before the .npy version");
  const auto major = static_cast<unsigned char>(first[6]);
  const auto minor = static_cast<unsigned char>(first[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw InputError(file, "", fmt::format("the .npy version {}.{} is not read: only 1.0, 2.0 and 3.0", major, minor));
  const std::size_t length_bytes = major == 1 ? 2 : 4;  // version 1.0: 2-byte length; 2.0 and 3.0: 4
  const std::string length = read_up_to(in, length_bytes);
  if (length.size() < length_bytes) throw InputError(file, "", "the file ends inside the .npy header length");
  return {dump_detail::load_le(length, 0, length_bytes), 8 + length_bytes};
}

[[noreturn]] void header_past_end(const std::string& file, std::size_t header_length, std::size_t after) {
  throw InputError(
      file, "",
      fmt::format("the .npy header length {} runs past the end of the file ({} bytes after it)", header_length, after));
}

[[noreturn]] void data_too_short(const std::string& file, const Shape& shape, DumpDType dtype,
                                 std::optional<std::size_t> need, std::size_t has) {
  throw InputError(
      file, "",
      fmt::format("the shape {} of {} needs {} bytes of data, but the file has {} after the header", shape_text(shape),
                  dump_dtype_name(dtype), need ? fmt::format("{}", *need) : std::string("more than 2^64"), has));
}

[[noreturn]] void data_too_long(const std::string& file, const Shape& shape, DumpDType dtype, std::size_t need,
                                std::size_t has) {
  throw InputError(file, "",
                   fmt::format("the file has {} bytes of data after the header, but the shape {} of {} needs {}: "
                               "{} trailing bytes",
                               has, shape_text(shape), dump_dtype_name(dtype), need, has - need));
}

// The values of a shape as float64, against what the budget leaves, before any is read.
void check_values(const std::string& file, const Shape& shape, DumpDType dtype, std::size_t need,
                  const MemoryBudget& budget) {
  const std::size_t count = need / dump_detail::item_size(dtype);
  std::size_t as_double = 0;
  if (__builtin_mul_overflow(count, sizeof(double), &as_double) || as_double > budget.left)
    throw InputError(
        file, "",
        fmt::format("its shape {} is {} {} values, {} as float64, over {}: its data was not read", shape_text(shape),
                    count, dump_dtype_name(dtype), describe_bytes(as_double), budget.describe()));
}

}  // namespace

DumpTensor read_npy(ByteSource& in, const std::string& file, bool bfloat16_from_u2, const MemoryBudget& budget) {
  // pass 1: the file's size against the budget, before a byte is read; then the preamble
  check_size(in, file, budget);
  const std::optional<std::size_t> size = in.size();
  const auto [header_length, header_begin] = read_preamble(in, file);
  const std::size_t after_preamble = size ? *size - std::min(*size, header_begin) : 0;  // a file may grow
  if (size && header_length > after_preamble) header_past_end(file, header_length, after_preamble);

  // pass 2: the header's dict (no longer than the file, or, from a stream, than what arrives)
  const std::string header_text = read_up_to(in, std::min(header_length, budget.left));
  if (header_text.size() < header_length) {
    if (header_text.size() == budget.left)
      throw InputError(file, "", fmt::format("the .npy header length {} is over {}", header_length, budget.describe()));
    header_past_end(file, header_length, header_text.size());
  }
  const Header header = HeaderParser(header_text, file).parse();
  const DumpDType dtype = dtype_of(*header.descr, bfloat16_from_u2, file);
  if (*header.fortran_order)
    throw InputError(file, "", "the array is in Fortran order: C order only; save with np.ascontiguousarray");

  // pass 3: the data, exactly as long as the shape needs, checked against the file's size and the
  // budget before anything is allocated
  const Shape& shape = *header.shape;
  const std::optional<std::size_t> need = dump_detail::shape_bytes(shape, dump_detail::item_size(dtype));
  const std::size_t header_end = header_begin + header_length;
  if (size && (!need || *need > *size - header_end)) data_too_short(file, shape, dtype, need, *size - header_end);
  if (size && *need < *size - header_end) data_too_long(file, shape, dtype, *need, *size - header_end);
  if (!need) data_too_short(file, shape, dtype, need, dump_detail::count_rest(in, std::size_t{1} << 20));
  check_values(file, shape, dtype, *need, budget);

  // pass 4: the values, read straight into their vector
  std::vector<double> values;
  values.reserve(*need / dump_detail::item_size(dtype));
  const std::size_t got = dump_detail::read_values(in, *need, dtype, values);
  if (got < *need) data_too_short(file, shape, dtype, need, got);
  constexpr std::size_t counted = std::size_t{1} << 20;  // a stream may not end: count this far
  if (const std::size_t rest = dump_detail::count_rest(in, counted); rest > 0) {
    if (rest > counted)
      throw InputError(file, "",
                       fmt::format("the file has more than {} bytes after the data that the shape {} of {} needs",
                                   counted, shape_text(shape), dump_dtype_name(dtype)));
    data_too_long(file, shape, dtype, *need, *need + rest);
  }
  return DumpTensor{shape, std::move(values), dtype};
}

DumpTensor read_npy(std::string_view bytes, const std::string& file, bool bfloat16_from_u2) {
  ByteView in(bytes);
  return read_npy(in, file, bfloat16_from_u2, MemoryBudget{});
}

DumpTensor read_npy_file(const std::string& path, bool bfloat16_from_u2, const MemoryBudget& budget) {
  InputFile in(path);
  return read_npy(in, in.name(), bfloat16_from_u2, budget);
}

}  // namespace attn
