// The step table as JSON (`attn-trace steps --json`): every step's name, formula, meaning, dims, inputs,
// op, value class, which inputs have it and its pass, in the table's order.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/trace_json.hpp"
#include "observe/steps.hpp"

namespace attn {

std::string steps_to_json(const std::string& generator) {
  using ojson = nlohmann::ordered_json;  // the keys in the order docs/trace-format.md lists them
  ojson steps = ojson::array();
  std::vector<Step> every(all_steps().begin(), all_steps().end());
  every.insert(every.end(), gradient_steps().begin(), gradient_steps().end());
  for (const Step s : every) {
    const StepInfo& info = step_info(s);
    ojson inputs = ojson::array();
    for (const Step in : info.inputs) inputs.push_back(std::string(step_info(in).name));
    steps.push_back({{"name", std::string(info.name)},
                     {"formula", std::string(info.formula)},
                     {"description", std::string(info.description)},
                     {"dims", dim_names(s, false)},
                     {"inputs", std::move(inputs)},
                     {"op", std::string(to_string(info.op))},
                     {"values", std::string(to_string(info.values))},
                     {"needs", std::string(needs_name(info))},
                     {"tiled", info.tiled},
                     {"pass", std::string(to_string(info.pass))},
                     {"parameter", info.parameter}});
  }
  const ojson out = {{"format", "attn-trace.steps"},
                     {"version", steps_format_version},
                     {"generator", generator},
                     {"steps", std::move(steps)}};
  return out.dump(2) + "\n";
}

}  // namespace attn
