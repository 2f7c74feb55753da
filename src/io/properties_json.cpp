#include "io/properties_json.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "json/json_number.hpp"

namespace attn {

namespace {

using ojson = nlohmann::ordered_json;  // keeps the keys in the order the docs list them

}  // namespace

std::string properties_to_json(std::span<const PropertyCheck> checks, DType dtype, std::uint64_t seed,
                               const std::string& generator) {
  ojson properties = ojson::array();
  for (const PropertyCheck& c : checks)
    properties.push_back({{"name", c.name},
                          {"holds", c.holds},
                          {"expected", c.expected},
                          {"figure", json_number(c.figure)},
                          {"tolerance", json_number(c.tolerance)},
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
