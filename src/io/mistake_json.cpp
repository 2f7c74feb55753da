#include "io/mistake_json.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "json/json_number.hpp"

namespace attn {

namespace {

using ojson = nlohmann::ordered_json;  // keeps the keys in the order the docs list them

ojson numbers(std::span<const double> xs) {
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
    if (r.shown.empty() || std::find(r.shown.begin(), r.shown.end(), d.step) != r.shown.end())
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
  // The steps --steps asked for, both values whole (of --head's head only, when given).
  ojson side_by_side = ojson::array();
  for (const Step step : r.shown) {
    const StepRecord* a = find_step(r.intended, step);
    const StepRecord* b = find_step(r.mistaken, step);
    if (a == nullptr || b == nullptr) continue;
    side_by_side.push_back({{"step", std::string(step_info(step).name)},
                            {"dims", dim_names(step, p.batched)},
                            {"intended_shape", a->value.shape()},
                            {"mistaken_shape", b->value.shape()},
                            {"intended", numbers(a->value.values())},
                            {"mistaken", numbers(b->value.values())}});
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
                     {"head", r.head ? ojson(*r.head) : ojson(nullptr)},
                     {"first_difference", std::move(first)},
                     {"side_by_side", std::move(side_by_side)},
                     {"costs", std::move(costs)},
                     {"findings", r.findings}};
  return out.dump(2) + "\n";
}

}  // namespace attn
