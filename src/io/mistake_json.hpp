#pragma once
// attn-trace run --mistake NAME --json OUT: the comparison as JSON text (docs/cli.md, "--mistake").
//
//   {"format": "attn-trace.mistake", "version": 1, "generator", "dtype", "mistake", "intended", "mistaken",
//    "steps": [{"step", "same_shape", "intended_shape", "mistaken_shape", "max_abs_difference"}],
//    "head": null | H,
//    "first_difference": null | {"step", "index", "dims", "intended", "mistaken", "max_abs_difference"},
//    "side_by_side": [{"step", "dims", "intended_shape", "mistaken_shape", "intended", "mistaken"}],
//    "costs": [{"title", "by", "measures", "rows": [{"batch", "head", "index", "token", "intended", "mistaken"}]}],
//    "findings": ["..."]}
//
// With --steps, "steps" holds those steps only and "side_by_side" their values (row-major, of the shapes
// beside them); with --head, every step's head axis holds that head only. Numbers that are not finite are the strings
// "inf", "-inf", "nan", as in a trace.

#include <string>

#include "lessons/mistakes.hpp"

namespace attn {

inline constexpr int mistake_format_version = 1;

std::string mistake_to_json(const MistakeResult& result, const std::string& generator);

}  // namespace attn
