// Which steps of the table (observe/steps.hpp) an input has, and what each of them reads there.

#include <algorithm>
#include <vector>

#include "model/problem.hpp"
#include "observe/steps.hpp"

namespace attn {

bool step_applies(Step step, const Problem& p) {
  switch (step_info(step).needs) {
    case Needs::rope: return p.rope.has_value();
    case Needs::chain: return chain_has(*step_info(step).stage, p);
    case Needs::cross: return p.cross;
    case Needs::w_o: return p.has_output_projection();
    case Needs::b_q: return !p.b_q.empty();
    case Needs::b_k: return !p.b_k.empty();
    case Needs::b_v: return !p.b_v.empty();
    case Needs::b_o: return !p.b_o.empty();
    case Needs::always: return true;
  }
  return true;
}

std::vector<Step> steps_of(const Problem& p) {
  std::vector<Step> steps;
  for (const Step s : all_steps())
    if (step_applies(s, p)) steps.push_back(s);
  return steps;
}

std::vector<Step> gradient_steps_of(const Problem& p) {
  std::vector<Step> steps;
  for (const Step s : gradient_steps())
    if (step_applies(s, p)) steps.push_back(s);
  return steps;
}

std::vector<Step> inputs_of(Step step, const Problem& p) {
  std::vector<Step> listed;
  for (const Step s : step_info(step).inputs)
    if (step_applies(s, p)) listed.push_back(s);
  std::vector<Step> direct;
  for (const Step s : listed) {
    const bool through_another = std::any_of(listed.begin(), listed.end(), [&](Step o) { return depends_on(o, s); });
    if (!through_another) direct.push_back(s);
  }
  return direct;
}

}  // namespace attn
