#pragma once
// What the binary dump readers (npy.cpp, safetensors.cpp) share: little-endian numbers read from
// bytes whose bounds the caller has checked, the byte count of a shape without wrapping around, and
// file text made safe to quote in a one-line message.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "formats/dump.hpp"
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

// The values of `data`, which holds exactly element_count · item_size(dtype) bytes, widened to double.
inline std::vector<double> decode(std::string_view data, DumpDType dtype) {
  const std::size_t item = item_size(dtype);
  std::vector<double> values(data.size() / item);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint64_t bits = load_le(data, i * item, item);
    switch (dtype) {
      case DumpDType::float16: values[i] = float16_to_float(static_cast<std::uint16_t>(bits)); break;
      case DumpDType::bfloat16: values[i] = bfloat16_to_float(static_cast<std::uint16_t>(bits)); break;
      case DumpDType::float32: values[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits)); break;
      case DumpDType::float64: values[i] = std::bit_cast<double>(bits); break;
    }
  }
  return values;
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
