#pragma once
// One number for every JSON document that attn-trace writes besides traces (bench, diff, explain,
// mistakes, properties, scaling): a finite number as it is; inf, -inf and nan as the strings "inf",
// "-inf" and "nan" that a trace uses (docs/trace-format.md), since JSON has no such numbers. It includes
// nlohmann/json, as only src/json, src/io and src/formats do.

#include <cmath>

#include <nlohmann/json.hpp>

#include "text/number.hpp"

namespace attn {

inline nlohmann::ordered_json json_number(double x) {
  return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(exact_value(x, false));
}

}  // namespace attn
