#include "formats/dumped_steps.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "json/error.hpp"
#include "observe/steps.hpp"
#include "trace/trace.hpp"

namespace attn {

namespace {

DType dtype_of(DumpDType t) {
  switch (t) {
    case DumpDType::float16: return DType::float16;
    case DumpDType::bfloat16: return DType::bfloat16;
    case DumpDType::float32: return DType::float32;
    case DumpDType::float64: return DType::float64;
  }
  return DType::float64;
}

// How many significant bits a dtype keeps: the least precise of the dump's is what ours runs in.
int significand_bits(DType t) {
  switch (t) {
    case DType::float64: return 53;
    case DType::float32: return 24;
    case DType::float16: return 11;
    case DType::bfloat16: return 8;
  }
  return 0;
}

std::string steps_list() {
  std::vector<std::string_view> names;
  for (const Step s : all_steps()) names.push_back(step_info(s).name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// What an unknown name could have been besides a forward step: the gradients, and some of their aliases.
std::string gradients_list() {
  std::vector<std::string_view> names;
  for (const Step s : gradient_steps()) names.push_back(step_info(s).name);
  return fmt::format(
      "{}, or the PyTorch-style grad_q, q.grad, dq, x.grad, grad_output, q_proj.weight.grad, … "
      "(docs/diff.md)",
      fmt::join(names, ", "));
}

// Why `step` has no place in a dump of `p`: what the input lacks.
std::string missing_for(Step step, const std::string& file) {
  const StepInfo& info = step_info(step);
  std::string what;
  switch (info.needs) {
    case Needs::rope:
    case Needs::chain: what = fmt::format("\"{}\"", needs_name(info)); break;
    case Needs::cross: what = "a \"context\""; break;
    case Needs::w_o: what = "W_o"; break;
    case Needs::always:
    case Needs::b_q:
    case Needs::b_k:
    case Needs::b_v:
    case Needs::b_o: what = std::string(to_string(info.needs)); break;
  }
  return fmt::format("belongs to an input with {}, and {} has none", what, file);
}

// The step a dump's name stands for: --name's mapping first, else a step's name or a gradient's alias.
Step step_named(const NamedDump& d, const std::map<std::string, Step>& names, const std::string& dumps_name) {
  std::optional<Step> step = step_from_name(d.name);
  if (!step) step = gradient_alias(d.name);
  if (const auto it = names.find(d.name); it != names.end()) step = it->second;
  if (!step)
    throw InputError(dumps_name, "",
                     fmt::format("{}: no step is called {} (the steps: {}; the gradients: {}; --name STEP=NAME "
                                 "maps another name)",
                                 d.source, d.name, steps_list(), gradients_list()));
  return *step;
}

}  // namespace

Dumped dumped_steps(const Problem& p, std::vector<NamedDump> dumps, const std::map<std::string, Step>& names,
                    const std::string& dumps_name, const std::string& file_name) {
  Dumped out;
  std::optional<DType> least;
  // pass 1: each tensor as the step it is named for, once, where the input has that step
  for (NamedDump& d : dumps) {
    const Step step = step_named(d, names, dumps_name);
    if (!step_applies(step, p))
      throw InputError(dumps_name, "",
                       fmt::format("{}: step {} {}", d.source, step_info(step).name, missing_for(step, file_name)));
    for (const DumpedStep& before : out.steps)
      if (before.step == step)
        throw InputError(dumps_name, "",
                         fmt::format("{} and {} are both step {}", before.source, d.source, step_info(step).name));
    const DType dtype = dtype_of(d.tensor.dtype);
    if (!least || significand_bits(dtype) < significand_bits(*least)) least = dtype;
    out.steps.push_back({step, d.source, d.tensor.shape, std::move(d.tensor.values), dtype});
  }
  // pass 2: a shape fits the step the dump is named for, or a later one it may hold (fused_steps), once
  // every name is known: a step dumped under its own name is not read into another dump
  std::vector<Step> named;
  named.reserve(out.steps.size());
  for (const DumpedStep& d : out.steps) named.push_back(d.step);
  for (const DumpedStep& d : out.steps)
    if (!fits_some_reading(d.step, p, d.shape, named))
      throw InputError(dumps_name, "", shape_mismatch(d.step, p, d.source, d.shape));
  // pass 3: every name --name maps is in the dump
  for (const auto& [name, mapped] : names)
    if (std::none_of(out.steps.begin(), out.steps.end(),
                     [step = mapped](const DumpedStep& d) { return d.step == step; }))
      throw InputError(
          dumps_name, "",
          fmt::format("--name {}={}: the dump holds no tensor called {}", step_info(mapped).name, name, name));
  out.least = least.value_or(DType::float64);
  out.gradients =
      std::any_of(out.steps.begin(), out.steps.end(), [](const DumpedStep& d) { return is_gradient_step(d.step); });
  return out;
}

}  // namespace attn
