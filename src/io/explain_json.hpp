#pragma once
// attn-trace explain --json: an explanation as JSON text (docs/cli.md, "explain"), every number of every
// stage as the terminal page shows it, to full precision.
//
//   {"format": "attn-trace.explain", "version": 1, "generator", "kind": "weight", "dtype", "engine",
//    "batch", "head", "kv_head", "query", "key", "query_token", "key_token",
//    "inputs": {"x", "c"}, "q": [SUM], "k": [SUM], "score": SUM, "scale", "scaled",
//    "mask": {"kind", "allowed", "reason", "empty_row"},
//    "softmax": {"keys": [{"key", "token", "allowed", "scaled", "shifted", "exp", "weight"}], "max", "argmax",
//                "sum", "weight"},
//    "flash": null or {"block_q", "block_k", "query_tile", "row_begin", "row_end", "key_tile",
//                      "tiles": [{"j", "col_begin", "col_end", "skipped", "m_prev", "m_new", "alpha", "l_prev",
//                                 "l_new", "s", "p", "share"}],
//                      "s", "p", "later_alphas", "alpha_product", "l", "weight", "naive_weight", "tolerance",
//                      "within"},
//    "output": {"v", "o": [SUM]}}
//   {"format": "attn-trace.explain", "version": 1, "generator", "kind": "output", "dtype", "engine", "batch",
//    "query", "column", "query_token", "output_projection", "y": SUM, "head_sums", "top", "head", "feature"}
//
// SUM is {"a", "b", "terms", "bias" (null without one), "value"}: value = Σ terms + bias up to the run's
// rounding, value being the engine's. Numbers that are not finite are the strings "inf", "-inf", "nan",
// as in a trace.

#include <string>

#include "lessons/explain.hpp"
#include "lessons/explain_gradient.hpp"

namespace attn {

inline constexpr int explain_format_version = 1;

std::string explanation_to_json(const Explanation& e, const std::string& generator);
std::string output_explanation_to_json(const OutputExplanation& e, const std::string& generator);
// explain --grad: {"format": "attn-trace.explain", "kind": "gradient", …}.
std::string gradient_explanation_to_json(const GradientExplanation& e, const std::string& generator);

}  // namespace attn
