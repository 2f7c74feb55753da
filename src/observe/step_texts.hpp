#pragma once
// The step table's texts that depend on the input (observe/steps.cpp): a formula with the input's own
// numbers in it ("S' = S·0.7071"), a meaning that names its mask, kept apart from the table itself.

#include <array>

#include "observe/steps.hpp"

namespace attn {

// Sets formula_for and description_for of the rows whose formula or meaning depends on the input.
void set_texts(std::array<StepInfo, table_size>& steps);

}  // namespace attn
