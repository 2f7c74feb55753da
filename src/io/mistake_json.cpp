#include "io/mistake_json.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "json/number.hpp"

namespace attn {

namespace {

using ojson = nlohmann::ordered_json;  // keeps the keys in the order the docs list them

ojson numbers(const std::vector<double>& xs) {
  ojson out = ojson::array();
  for (const double x : xs) out.push_back(json_number(x));
  return out;
}

}  // namespace

std::string mistake_to_json(const MistakeResult& r, const std::string& generator) {
  const MistakeInfo& info = mistake_info(r.mistake);
  const Problem& p = *r.intended.problem;
  ojson steps = ojson::array();
  ojson first = nullptr;
  for (const StepDifference& d : r.steps) {
    steps.push_back({{"step", std::string(step_info(d.step).name)},
                     {"same_shape", d.same_shape},
                     {"intended_shape", d.intended_shape},
                     {"mistaken_shape", d.mistaken_shape},
                     {"max_abs_difference", d.same_shape ? json_number(d.max_abs) : ojson(nullptr)}});
    if (r.first_difference && *r.first_difference == d.step) {
      first = {{"step", std::string(step_info(d.step).name)}};
      if (d.same_shape) {
        first["index"] = d.at;
        first["dims"] = dim_names(d.step, p.batched);
        first["intended"] = json_number(d.intended);
        first["mistaken"] = json_number(d.mistaken);
        first["max_abs_difference"] = json_number(d.max_abs);
      } else {
        first["index"] = nullptr;
      }
    }
  }
  ojson costs = ojson::array();
  for (const CostTable& t : r.costs) {
    ojson rows = ojson::array();
    for (const CostRow& row : t.rows) {
      const auto& tokens = t.by_key && p.cross ? p.context_tokens : p.tokens;
      rows.push_back({{"batch", row.batch},
                      {"head", row.head},
                      {"index", row.index},
                      {"token", tokens[row.batch][row.index]},
                      {"intended", numbers(row.intended)},
                      {"mistaken", numbers(row.mistaken)}});
    }
    costs.push_back(
        {{"title", t.title}, {"by", t.by_key ? "key" : "query"}, {"measures", t.measures}, {"rows", std::move(rows)}});
  }
  const ojson out = {{"format", "attn-trace.mistake"},
                     {"version", mistake_format_version},
                     {"generator", generator},
                     {"dtype", std::string(name_of(r.intended.dtype))},
                     {"mistake", std::string(info.name)},
                     {"intended", std::string(info.intended)},
                     {"mistaken", std::string(info.mistaken)},
                     {"steps", std::move(steps)},
                     {"first_difference", std::move(first)},
                     {"costs", std::move(costs)},
                     {"findings", r.findings}};
  return out.dump(2) + "\n";
}

}  // namespace attn
