#include "io/scaling_json.hpp"

#include <nlohmann/json.hpp>

#include "json/json_number.hpp"

namespace attn {

std::string scaling_to_json(const ScalingResult& result) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ScalingRow& r : result.rows)
    rows.push_back({{"d_k", r.d_k},
                    {"raw_var", json_number(r.raw_var)},
                    {"scaled_var", json_number(r.scaled_var)},
                    {"raw_mean_grad", json_number(r.raw_mean_grad)},
                    {"scaled_mean_grad", json_number(r.scaled_mean_grad)},
                    {"raw_max_weight", json_number(r.raw_max_weight)},
                    {"scaled_max_weight", json_number(r.scaled_max_weight)},
                    {"raw_grad_norm", json_number(r.raw_grad_norm)},
                    {"scaled_grad_norm", json_number(r.scaled_grad_norm)}});
  const nlohmann::ordered_json j = {{"format", "attn-trace.scaling"},
                                    {"version", 1},
                                    {"samples", result.samples},
                                    {"seed", result.seed},
                                    {"rows", std::move(rows)}};
  return j.dump(2) + "\n";
}

}  // namespace attn
