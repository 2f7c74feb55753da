#include "io/properties_json.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "io/trace_json.hpp"

namespace attn {

namespace {

using ojson = nlohmann::ordered_json;  // keeps the keys in the order the docs list them

// A finite number as it is; inf and nan as the strings a trace uses, since JSON has no such numbers.
ojson number(double x) { return std::isfinite(x) ? ojson(x) : ojson(format_trace_number(x, false)); }

}  // namespace

std::string properties_to_json(std::span<const PropertyCheck> checks, DType dtype, std::uint64_t seed,
                               const std::string& generator) {
  ojson properties = ojson::array();
  for (const PropertyCheck& c : checks)
    properties.push_back({{"name", c.name},
                          {"holds", c.holds},
                          {"expected", c.expected},
                          {"figure", number(c.figure)},
                          {"tolerance", number(c.tolerance)},
                          {"reason", c.reason}});
  const ojson out = {{"format", "attn-trace.properties"},
                     {"version", properties_format_version},
                     {"generator", generator},
                     {"dtype", std::string(name_of(dtype))},
                     {"seed", seed},
                     {"properties", std::move(properties)}};
  return out.dump(2) + "\n";
}

}  // namespace attn
