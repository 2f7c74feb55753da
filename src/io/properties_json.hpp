#pragma once
// attn-trace properties --json: the checks as JSON text (docs/cli.md, "properties").
//
//   {"format": "attn-trace.properties", "version": 1, "generator", "dtype", "seed",
//    "properties": [{"name", "holds", "expected", "figure", "tolerance", "reason"}]}
//
// figure and tolerance are numbers, or the strings "inf", "-inf", "nan" as in a trace.

#include <cstdint>
#include <span>
#include <string>

#include "model/run.hpp"
#include "lessons/properties.hpp"

namespace attn {

inline constexpr int properties_format_version = 1;

std::string properties_to_json(std::span<const PropertyCheck> checks, DType dtype, std::uint64_t seed,
                               const std::string& generator);

}  // namespace attn
