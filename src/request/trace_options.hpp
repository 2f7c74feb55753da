#pragma once
// What a tracing command was asked, as plain values. The command files fill them from the command line
// (CLI11 is known in apps/ only); this layer turns them and the problem into what to run.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/run.hpp"
#include "render/draw/options.hpp"

namespace attn {

// A mistake in the command line itself (not in the input file): one line, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --color: auto means only on a terminal and never with NO_COLOR set.
enum class ColorMode { automatic, always, never };

// --max-cols left out: as many columns of numbers as the width holds (columns_that_fit, request/terminal_caps.hpp).
inline constexpr std::size_t max_cols_from_width = static_cast<std::size_t>(-1);

struct TraceOptions {
  std::string file;
  Engine engine = Engine::naive;
  DType dtype = DType::float32;
  std::optional<std::size_t> block_q;  // flash tile sizes; default: default_tiles (model/run.hpp)
  std::optional<std::size_t> block_k;
  std::vector<std::string> steps;  // trace names, and "tiles"; empty: all
  std::optional<std::size_t> head;
  int precision = 4;
  ColorMode color = ColorMode::automatic;
  std::size_t max_rows = 16;
  std::size_t max_cols = max_cols_from_width;
  View view = View::automatic;
  WeightScale weight_scale = WeightScale::automatic;  // --color-scale
  std::optional<DocFormat> format;                    // --format: a document of the steps; empty for the terminal text
  std::string json_out;                               // --json: "" none, "-" stdout instead of the text
  std::string max_memory = "4G";                      // refuse input or runs estimated to need more
  bool backward = false;                              // --backward: the gradients too
  std::optional<std::uint64_t> grad_seed;             // --grad-seed: dY from a seeded standard normal
  std::optional<double> dropout;                      // --dropout P: in place of the input's "dropout" p
  std::optional<std::uint64_t> dropout_seed;          // --dropout-seed S: in place of its seed
};

}  // namespace attn
