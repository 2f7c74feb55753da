#include "render/pages/steps.hpp"

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
  if (info.inputs.empty()) return info.step == Step::q ? "X" : "C (X for self-attention)";
  std::vector<std::string_view> always, optional;
  Needs needs = Needs::always;
  for (const Step s : info.inputs) {
    const StepInfo& in = step_info(s);
    if (in.needs == Needs::always) {
      always.push_back(in.name);
    } else {
      optional.push_back(in.name);
      needs = in.needs;
    }
  }
  std::string text = fmt::format("{}", fmt::join(always, ", "));
  if (!optional.empty()) text += fmt::format(" ({} instead, with {})", fmt::join(optional, ", "), to_string(needs));
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
  constexpr std::size_t name_column = 13;
  for (const Step s : all_steps()) {
    const StepInfo& info = step_info(s);
    std::string notes;
    if (info.needs != Needs::always) notes += fmt::format("; only with {}", to_string(info.needs));
    if (info.tiled) notes += "; flash holds it in tiles only";
    add(fmt::format("{:<13}({})  ← {}", info.name, fmt::join(dim_names(s, false), ", "), from_text(info)),
        name_column + 2);
    add(fmt::format("{:<13}{}{}", "", info.formula, notes), name_column);
  }
  return out;
}

std::string step_names_text() {
  std::string out;
  for (const Step s : all_steps()) out += fmt::format("{}\n", step_info(s).name);
  return out;
}

}  // namespace attn
