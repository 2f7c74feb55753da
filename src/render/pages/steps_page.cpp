#include "render/pages/steps_page.hpp"

#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "observe/steps.hpp"
#include "render/draw/text.hpp"

namespace attn {

namespace {

// What a step reads: "q_heads, k_heads (q_rot, k_rot with rope)"; the projections read the input.
std::string from_text(const StepInfo& info) {
  if (info.step == Step::d_output) return "the input's dY, --grad-seed, or 1 everywhere";
  if (info.inputs.empty()) return info.step == Step::q ? "X" : "C (X for self-attention)";
  std::vector<std::string_view> always, optional;
  std::string_view needs;
  for (const Step s : info.inputs) {
    const StepInfo& in = step_info(s);
    if (in.needs == Needs::always) {
      always.push_back(in.name);
    } else {
      optional.push_back(in.name);
      needs = needs_name(in);
    }
  }
  std::string text = fmt::format("{}", fmt::join(always, ", "));
  if (!optional.empty()) text += fmt::format(" ({} instead, with {})", fmt::join(optional, ", "), needs);
  return text;
}

}  // namespace

std::string steps_text(std::size_t width, bool ascii) {
  std::string out;
  const auto add = [&](std::string_view line, std::size_t indent) {
    for (const std::string& l : wrap(ascii ? to_ascii(line) : std::string(line), width, std::string(indent, ' ')))
      out += l + "\n";
  };
  add("The steps of attention in pipeline order, as traces, --steps and the docs name them: each with its axes "
      "(a batched input adds \"batch\" in front), the steps it reads, and its formula.",
      0);
  out += "\n";
  // The forward's names fit 13 columns, the backward's 15.
  const auto row = [&](Step s) {
    const std::size_t name_column = is_gradient_step(s) ? 15 : 13;
    const StepInfo& info = step_info(s);
    std::string notes;
    if (info.needs != Needs::always) notes += fmt::format("; only with {}", needs_name(info));
    if (info.tiled) notes += "; flash holds it in tiles only";
    if (info.parameter) notes += "; no batch axis, in the input's layout";
    add(fmt::format("{:<{}}({})  ← {}", info.name, name_column, fmt::join(dim_names(s, false), ", "), from_text(info)),
        name_column + 2);
    add(fmt::format("{:<{}}{}{}", "", name_column, info.formula, notes), name_column);
  };
  for (const Step s : all_steps()) row(s);
  out += "\n";
  add("The backward pass (run --backward, docs/backward.md): the gradient of L = Σ Y ⊙ dY with respect to each "
      "step and parameter, each with the shape of what it is the gradient of.",
      0);
  out += "\n";
  for (const Step s : gradient_steps()) row(s);
  return out;
}

std::string step_names_text() {
  std::string out;
  for (const Step s : all_steps()) out += fmt::format("{}\n", step_info(s).name);
  for (const Step s : gradient_steps()) out += fmt::format("{}\n", step_info(s).name);
  return out;
}

}  // namespace attn
