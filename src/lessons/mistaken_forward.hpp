#pragma once
// The one mistaken forward pass: every step of attention computed plainly, in pipeline order, with one
// mistake of lessons/catalogue.hpp made (or none). `run --mistake` and `report --mistake` trace it;
// `diff` computes ours from a user's dumped steps with it and tries each mistake on the same inputs.

#include <array>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "lessons/catalogue.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/steps.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// Some steps' values, each in its step's shape with the batch axis (step_shape): a user's dump, say. Room
// for the gradient steps too (table_size), which the mistaken backward pass (lessons/mistaken_backward.hpp) reads;
// the forward pass reads the forward steps' slots only.
using GivenSteps = std::array<std::optional<Tensor<double>>, table_size>;
template <class T>
using StepValues = std::array<Tensor<T>, step_count>;

template <class T>
struct ForwardRun {
  StepValues<T> computed;  // every step that applies, as computed (empty where it does not apply)
  StepValues<T> carry;     // what the steps after each one started from: the given value, else the computed
};

// Every step of `p` with `mistake` made, computed in T and stored rounded to `storage` (as the naive
// engine does: engine/common.hpp); where `given` holds a step, the steps after it start from that value.
// A mistake that is a different problem (mistaken_problem) computes that problem.
template <class T>
ForwardRun<T> forward(const Problem& p, Mistake mistake, DType storage, const GivenSteps& given = {});

extern template ForwardRun<float> forward<float>(const Problem&, Mistake, DType, const GivenSteps&);
extern template ForwardRun<double> forward<double>(const Problem&, Mistake, DType, const GivenSteps&);

// The steps `mistake` computes differently, each with its mistaken formula.
std::vector<std::pair<Step, std::string_view>> changed_steps(Mistake mistake);

// The lowest number code writes for -inf in `storage`: -1e9, or the half type's lowest finite value.
double lowest_written(DType storage);

}  // namespace attn
