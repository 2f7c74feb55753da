#pragma once
// Hand-made dump files for the reader tests (npy_test.cpp, safetensors_test.cpp): little-endian numbers
// as bytes, .npy and .safetensors files put together from a header and data, and the refusal a reader
// gives.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include "json/error.hpp"

namespace attn::test {

// `x` as `width` little-endian bytes.
inline std::string le(std::uint64_t x, std::size_t width) {
  std::string out;
  for (std::size_t i = 0; i < width; ++i) out += static_cast<char>((x >> (8 * i)) & 0xFF);
  return out;
}
inline std::string le16(std::uint64_t x) { return le(x, 2); }
inline std::string le32(std::uint64_t x) { return le(x, 4); }
inline std::string le64(std::uint64_t x) { return le(x, 8); }

// A .npy file as numpy writes it: the magic, the version `major`.0, the header length (2 bytes in
// version 1, 4 in 2 and 3), the header `dict` padded with spaces and a newline so the data starts on a
// multiple of 64, then `data`.
inline std::string npy_file(std::string_view dict, std::string_view data, int major = 1) {
  const std::size_t preamble = major == 1 ? 10 : 12;
  std::string header(dict);
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  out += major == 1 ? le16(header.size()) : le32(header.size());
  return out + header + std::string(data);
}

// A .safetensors file: the 8-byte header length, the header, the data.
inline std::string safetensors_file(std::string_view header, std::string_view data) {
  return le64(header.size()) + std::string(header) + std::string(data);
}

// The message of the InputError that `read` raises, checked to name `file` and to be one line.
template <class Read>
std::string refusal(Read read, const std::string& file) {
  try {
    (void)read();
  } catch (const InputError& e) {
    CHECK(e.file() == file);
    CHECK(std::string_view(e.what()).find('\n') == std::string_view::npos);
    return e.message();
  }
  return "(no error)";
}

}  // namespace attn::test
