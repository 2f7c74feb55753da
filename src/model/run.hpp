#pragma once
// How a run is carried out: which engine, in which arithmetic, with which flash tiles. Parsed once
// from the command line (or read from a trace file) and passed on as values; their names are the
// ones of the command line and of docs/trace-format.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>

#include "tensor/half.hpp"

namespace attn {

enum class Engine { naive, flash, both };
// float16 and bfloat16 are storage types: every input and every stored intermediate is rounded to
// them (to nearest, ties to even) while products and sums are carried out in float32, as GPU kernels do.
enum class DType { float32, float64, float16, bfloat16 };

// The flash pass's tile: Br query rows by Bc keys (block_q × block_k on the command line and in the
// trace). ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 1.
struct TileSize {
  std::size_t Br = 2;
  std::size_t Bc = 2;
  friend bool operator==(const TileSize&, const TileSize&) = default;
};

// The traced flash pass's default tiles: about √n query rows by √m keys, so a sequence gets about as
// many tiles as each tile has rows, and the worked example (n = m = 3) gets 2 × 1 tiles: three key
// tiles per query tile, and a real rescale when the second key beats the first. Here, beside TileSize,
// so that what asks for a run learns the default without compiling the engine. (bench's fast path
// picks its own: fast_tiles, engine/fast.hpp.)
inline TileSize default_tiles(std::size_t n, std::size_t m) {
  const auto clamp = [](double x) { return std::clamp<std::size_t>(static_cast<std::size_t>(x), 1, 128); };
  return {clamp(std::round(std::sqrt(static_cast<double>(n)))), clamp(std::floor(std::sqrt(static_cast<double>(m))))};
}

// The tiles a run asks for: block_q × block_k (--block-q, --block-k), each side not given as
// default_tiles has it for n queries and m keys.
inline TileSize asked_tiles(std::size_t n, std::size_t m, std::optional<std::size_t> block_q,
                            std::optional<std::size_t> block_k) {
  const TileSize defaults = default_tiles(n, m);
  return {block_q.value_or(defaults.Br), block_k.value_or(defaults.Bc)};
}

constexpr std::string_view name_of(Engine e) {
  switch (e) {
    case Engine::naive: return "naive";
    case Engine::flash: return "flash";
    case Engine::both: return "both";
  }
  return "?";
}

constexpr std::string_view name_of(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
  }
  return "?";
}

// float16 and bfloat16: stored at 16 bits, computed in float32.
constexpr bool is_half(DType t) { return t == DType::float16 || t == DType::bfloat16; }

constexpr std::optional<Engine> engine_from_name(std::string_view name) {
  for (const Engine e : {Engine::naive, Engine::flash, Engine::both})
    if (name_of(e) == name) return e;
  return std::nullopt;
}

constexpr std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16})
    if (name_of(t) == name) return t;
  return std::nullopt;
}

// Bytes per value as an engine holds it: a half type is computed in float32.
constexpr std::size_t scalar_bytes(DType t) { return t == DType::float64 ? 8 : 4; }

// The unit roundoff of `t`: the largest relative error of rounding to it (to nearest), 2^-p for p
// significant bits.
constexpr double unit_roundoff(DType t) {
  switch (t) {
    case DType::float32: return 0x1p-24;
    case DType::float64: return 0x1p-53;
    case DType::float16: return 0x1p-11;
    case DType::bfloat16: return 0x1p-8;
  }
  return 0;
}

// The smallest subnormal of `t`: the most that underflow can lose in one rounding.
constexpr double smallest_subnormal(DType t) {
  switch (t) {
    case DType::float32: return 0x1p-149;
    case DType::float64: return 0x1p-1074;
    case DType::float16: return 0x1p-24;
    case DType::bfloat16: return 0x1p-133;
  }
  return 0;
}

// Whether every value a run in `t` computes is a float32 number: float32, and the half types, whose
// stored values float32 holds exactly and whose sums are float32's.
constexpr bool computes_in_float32(DType t) { return t != DType::float64; }

// x as a run in `storage` keeps it: rounded to the half type (to nearest, ties to even) when `storage`
// is one, else as it was computed. Only a float32 computation stores in a half type.
template <class T>
T stored(DType storage, T x) {
  if constexpr (std::is_same_v<T, float>) {
    if (storage == DType::float16) return float16_to_float(float_to_float16(x));
    if (storage == DType::bfloat16) return bfloat16_to_float(float_to_bfloat16(x));
  }
  return x;
}

// An input value of the problem (a double) as a run in `storage` and scalar type T holds it: rounded
// once to the half type, or to T.
template <class T>
T stored_input(DType storage, double x) {
  if constexpr (std::is_same_v<T, float>) {
    if (storage == DType::float16) return float16_to_float(double_to_float16(x));
    if (storage == DType::bfloat16) return bfloat16_to_float(double_to_bfloat16(x));
  }
  return static_cast<T>(x);
}

}  // namespace attn
