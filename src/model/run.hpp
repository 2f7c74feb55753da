#pragma once
// How a run is carried out: which engine, in which arithmetic, with which flash tiles. Parsed once
// from the command line (or read from a trace file) and passed on as values; their names are the
// ones of the command line and of docs/trace-format.md.

#include <cstddef>
#include <optional>
#include <string_view>

namespace attn {

enum class Engine { naive, flash, both };
enum class DType { float32, float64 };

// The flash pass's tile: Br query rows by Bc keys (block_q × block_k on the command line and in the
// trace). ref: FlashAttention-2 (arXiv:2307.08691), Algorithm 1.
struct TileSize {
  std::size_t Br = 2;
  std::size_t Bc = 2;
  friend bool operator==(const TileSize&, const TileSize&) = default;
};

constexpr std::string_view name_of(Engine e) {
  switch (e) {
    case Engine::naive: return "naive";
    case Engine::flash: return "flash";
    case Engine::both: return "both";
  }
  return "?";
}

constexpr std::string_view name_of(DType t) { return t == DType::float32 ? "float32" : "float64"; }

constexpr std::optional<Engine> engine_from_name(std::string_view name) {
  for (const Engine e : {Engine::naive, Engine::flash, Engine::both})
    if (name_of(e) == name) return e;
  return std::nullopt;
}

constexpr std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DType t : {DType::float32, DType::float64})
    if (name_of(t) == name) return t;
  return std::nullopt;
}

constexpr std::size_t scalar_bytes(DType t) { return t == DType::float32 ? 4 : 8; }

}  // namespace attn
