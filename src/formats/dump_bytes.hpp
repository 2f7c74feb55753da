#pragma once
// What the binary dump readers (npy.cpp, safetensors.cpp) share: little-endian numbers read from
// bytes whose bounds the caller has checked, values read from a file straight into their vector, the
// byte count of a shape without wrapping around, and file text made safe to quote in a one-line message.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "tensor/bits.hpp"
#include "formats/dump.hpp"
#include "io/read.hpp"
#include "tensor/half.hpp"
#include "tensor/tensor.hpp"

namespace attn::dump_detail {

// The unsigned little-endian number in bytes [at, at + width) of `bytes`, width <= 8.
inline std::uint64_t load_le(std::string_view bytes, std::size_t at, std::size_t width) {
  if (width > 8 || at > bytes.size() || width > bytes.size() - at)
    throw std::logic_error("load_le: a read past the end that the caller should have refused");
  std::uint64_t x = 0;
  for (std::size_t i = width; i-- > 0;) x = (x << 8) | static_cast<unsigned char>(bytes[at + i]);
  return x;
}

inline std::size_t item_size(DumpDType dtype) {
  switch (dtype) {
    case DumpDType::float16:
    case DumpDType::bfloat16: return 2;
    case DumpDType::float32: return 4;
    case DumpDType::float64: return 8;
  }
  return 8;
}

// element_count(shape) · item_size, or nothing when that does not fit a size_t.
inline std::optional<std::size_t> shape_bytes(const Shape& shape, std::size_t item) {
  std::size_t total = item;
  for (const std::size_t d : shape) {
    if (d == 0) return 0;
  }
  for (const std::size_t d : shape)
    if (__builtin_mul_overflow(total, d, &total)) return std::nullopt;
  return total;
}

// The values of `data`, which holds a whole number of items of `dtype`, widened to double and added to `out`.
inline void decode_append(std::string_view data, DumpDType dtype, std::vector<double>& out) {
  const std::size_t item = item_size(dtype);
  for (std::size_t at = 0; at + item <= data.size(); at += item) {
    const std::uint64_t bits = load_le(data, at, item);
    switch (dtype) {
      case DumpDType::float16: out.push_back(float16_to_float(static_cast<std::uint16_t>(bits))); break;
      case DumpDType::bfloat16: out.push_back(bfloat16_to_float(static_cast<std::uint16_t>(bits))); break;
      case DumpDType::float32: out.push_back(attn::bit_cast<float>(static_cast<std::uint32_t>(bits))); break;
      case DumpDType::float64: out.push_back(attn::bit_cast<double>(bits)); break;
    }
  }
}

// The values of `data`, which holds exactly element_count · item_size(dtype) bytes, widened to double.
inline std::vector<double> decode(std::string_view data, DumpDType dtype) {
  std::vector<double> values;
  values.reserve(data.size() / item_size(dtype));
  decode_append(data, dtype, values);
  return values;
}

// The next `bytes` bytes of `in` (a whole number of items), widened to double straight into `out`
// through one small buffer, so that reading takes the values' memory and no copy of the file. Returns
// how many bytes there were: fewer than `bytes` when `in` ended first.
inline std::size_t read_values(ByteSource& in, std::size_t bytes, DumpDType dtype, std::vector<double>& out) {
  constexpr std::size_t chunk = std::size_t{1} << 16;  // a multiple of every item size
  std::string buffer(std::min(chunk, bytes), '\0');
  std::size_t done = 0;
  while (done < bytes) {
    const std::size_t want = std::min(chunk, bytes - done);
    const std::size_t got = in.read(buffer.data(), want);
    decode_append(std::string_view(buffer.data(), got), dtype, out);
    done += got;
    if (got < want) break;
  }
  return done;
}

// How many bytes `in` has left, counted up to `cap` (a stream may never end): the count, or `cap` + 1
// when there are more.
inline std::size_t count_rest(ByteSource& in, std::size_t cap) {
  char buffer[4096];
  std::size_t rest = 0;
  while (rest <= cap) {
    const std::size_t got = in.read(buffer, sizeof buffer);
    rest += got;
    if (got < sizeof buffer) return std::min(rest, cap + 1);
  }
  return cap + 1;
}

// `text` between quotes, with bytes outside printable ASCII as \xNN and anything past `max` bytes cut
// to "...", so that a message quoting a file stays one short line.
inline std::string quote_bytes(std::string_view text, std::size_t max = 40) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7F || c == '\\') out += fmt::format("\\x{:02X}", c);
    else out += static_cast<char>(c);
  }
  if (text.size() > max) out += "...";
  return out + "'";
}

// "(2, 3)", as numpy writes a shape.
inline std::string shape_text(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({:n})", shape);
}

}  // namespace attn::dump_detail
