#pragma once
// `attn-trace scaling --json`: the experiment's figures as
// {"format": "attn-trace.scaling", "version": 1, "samples": N, "seed": S, "rows": [{"d_k", "raw_var",
//  "scaled_var", "raw_mean_grad", "scaled_mean_grad", "raw_max_weight", "scaled_max_weight"}, …]}
// with every number written so that it reads back to the same double.

#include <string>

#include "lessons/scaling.hpp"

namespace attn {

std::string scaling_to_json(const ScalingResult& result);

}  // namespace attn
