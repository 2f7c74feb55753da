#include "formats/npy.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "formats/dump_bytes.hpp"
#include "json/error.hpp"

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

}  // namespace

DumpTensor read_npy(std::string_view bytes, const std::string& file, bool bfloat16_from_u2) {
  // pass 1: the preamble: magic, version, header length
  if (!bytes.starts_with(magic)) {
    if (magic.starts_with(bytes))
      throw InputError(file, "", fmt::format("the file ends after {} bytes, inside the .npy magic", bytes.size()));
    throw InputError(file, "", "not a .npy file: it does not start with \\x93NUMPY");
  }
  if (bytes.size() < 8) throw InputError(file, "", "the file ends before the .npy version");
  const auto major = static_cast<unsigned char>(bytes[6]);
  const auto minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw InputError(file, "", fmt::format("the .npy version {}.{} is not read: only 1.0, 2.0 and 3.0", major, minor));
  const std::size_t length_bytes = major == 1 ? 2 : 4;  // version 1.0: 2-byte length; 2.0 and 3.0: 4
  if (bytes.size() < 8 + length_bytes) throw InputError(file, "", "the file ends inside the .npy header length");
  const std::size_t header_length = dump_detail::load_le(bytes, 8, length_bytes);
  const std::size_t header_begin = 8 + length_bytes;
  if (header_length > bytes.size() - header_begin)
    throw InputError(file, "",
                     fmt::format("the .npy header length {} runs past the end of the file ({} bytes after it)",
                                 header_length, bytes.size() - header_begin));

  // pass 2: the header's dict
  const Header header = HeaderParser(bytes.substr(header_begin, header_length), file).parse();
  const DumpDType dtype = dtype_of(*header.descr, bfloat16_from_u2, file);
  if (*header.fortran_order)
    throw InputError(file, "", "the array is in Fortran order: C order only; save with np.ascontiguousarray");

  // pass 3: the data, exactly as long as the shape needs, checked before anything is allocated
  const std::string_view data = bytes.substr(header_begin + header_length);
  const Shape& shape = *header.shape;
  const std::optional<std::size_t> need = dump_detail::shape_bytes(shape, dump_detail::item_size(dtype));
  if (!need || *need > data.size())
    throw InputError(file, "",
                     fmt::format("the shape {} of {} needs {} bytes of data, but the file has {} after the header",
                                 shape_text(shape), dump_dtype_name(dtype),
                                 need ? fmt::format("{}", *need) : std::string("more than 2^64"), data.size()));
  if (*need < data.size())
    throw InputError(file, "",
                     fmt::format("the file has {} bytes of data after the header, but the shape {} of {} needs {}: "
                                 "{} trailing bytes",
                                 data.size(), shape_text(shape), dump_dtype_name(dtype), *need, data.size() - *need));
  return DumpTensor{shape, dump_detail::decode(data, dtype), dtype};
}

}  // namespace attn
