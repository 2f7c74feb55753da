#pragma once
// One number for the JSON that attn-trace writes besides traces (properties, mistakes): a finite number
// as it is; inf, -inf and nan as the strings "inf", "-inf" and "nan" that a trace uses, since JSON has
// no such numbers. It includes nlohmann/json, as only src/json, src/io and src/formats do.

#include <cmath>

#include <nlohmann/json.hpp>

namespace attn {

inline nlohmann::ordered_json json_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  return x;
}

}  // namespace attn
