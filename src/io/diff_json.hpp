#pragma once
// attn-trace diff --json: the findings as JSON text (docs/diff.md, "The JSON findings").
//
//   {"format": "attn-trace.diff", "version": 1, "generator", "input", "dumps", "dtype",
//    "steps": [{"step", "source", "shape", "layout", "dtype", "max_abs", "max_rel", "max_abs_resumed",
//               "tolerance", "out_of_tolerance", "large_negatives", "verdict", "follows"}],
//    "first_divergence": null or {"step", "index": {AXIS: i, ...}, "labels": {AXIS: label, ...},
//                                 "ours", "dumped", "tolerance", "out_of_tolerance", "elements",
//                                 "window": {"row_axis", "col_axis", "rows", "cols", "row_labels",
//                                            "col_labels", "ours", "dumped"},
//                                 "diagnosis": [CODE, ...],
//                                 "findings": [{"code", "mistake", "finding"}]},
//    "notes": [...],
//    "upstream": "input" | "grad_seed" | "dump" | "ones"}   (only when the dump holds gradients)
//
// CODE is one of scale, transpose, softmax-axis, mask, alignment, head-split, large-negative, gqa-sum,
// softmax-backward, precision.
// Numbers that are not finite are the strings "inf", "-inf", "nan", as in a trace.

#include <string>

#include "check/diff.hpp"

namespace attn {

inline constexpr int diff_format_version = 1;

std::string diff_to_json(const DiffResult& result, const std::string& generator, const std::string& input,
                         const std::string& dumps);

}  // namespace attn
