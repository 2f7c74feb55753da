#pragma once
// The one mistaken backward pass: every gradient of attention computed plainly from the small ops of
// ops/attention_backward.hpp, in the order the step table lists them (d_output first), with one backward
// mistake of lessons/catalogue.hpp made (or none). The counterpart of lessons/mistaken_forward.hpp: `diff` computes
// ours from a user's dumped gradients with it, and tries each backward mistake on the same inputs.

#include <array>

#include "lessons/catalogue.hpp"
#include "lessons/mistaken_forward.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/steps.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// Every step's values by slot (table_size): the backward fills the gradient steps' slots only.
template <class T>
using TableValues = std::array<Tensor<T>, table_size>;

template <class T>
struct BackwardRun {
  TableValues<T> computed;  // every gradient that applies, as computed (empty where it does not apply)
  TableValues<T> carry;     // what the gradients after each one started from: the given value, else the computed
};

// Every gradient of `p` with `mistake` made (a forward mistake makes none here), computed in T and
// stored rounded to `storage`, from the forward's values `forward` (what each forward step handed on: a
// ForwardRun's carry). dY is the problem's (the input's "dY" or one drawn by --grad-seed), or 1
// everywhere; where `given` holds a gradient, the gradients after it start from that value.
template <class T>
BackwardRun<T> backward(const Problem& p, const StepValues<T>& forward, Mistake mistake, DType storage,
                        const GivenSteps& given = {});

extern template BackwardRun<float> backward<float>(const Problem&, const StepValues<float>&, Mistake, DType,
                                                   const GivenSteps&);
extern template BackwardRun<double> backward<double>(const Problem&, const StepValues<double>&, Mistake, DType,
                                                     const GivenSteps&);

}  // namespace attn
