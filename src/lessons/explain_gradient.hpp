#pragma once
// attn-trace explain --grad STEP --index I,J,…: one entry of one gradient followed back to the numbers
// that make it, term by term (docs/backward.md). Every factor is what the naive backward pass reported
// (or an input, rounded to the dtype); each product is recomputed in double, and their sum set beside
// the engine's value. Plain records, so that render and io can show them without an engine.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lessons/explain.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/steps.hpp"

namespace attn {

// One term of the sum: a·b, with what each factor is ("dO[cat][0]", "V[The][0]").
struct GradientTerm {
  std::string a_name, b_name;
  double a = 0, b = 0;
  double product = 0;  // a·b in double
};

struct GradientExplanation {
  DType dtype = DType::float32;
  Step step = Step::d_output;
  std::vector<std::size_t> index;   // as the trace indexes the step (a batch axis only for a batch)
  std::string where;                // the index in words: "head 0, query cat, key The"
  std::string formula;              // the step's formula for this input
  std::string sum;                  // its index form for this entry: "dA[cat][The] = Σ_c dO[cat][c]·V[The][c]"
  std::vector<GradientTerm> terms;  // in the order of the sum
  // What is done with the sum: "", or e.g. "A[cat][The]·(dA[cat][The] − D)" and its numbers.
  std::string finish;
  double recomputed = 0;  // the terms summed (and finished) in double
  double value = 0;       // the engine's
  std::vector<std::string> notes;
  Upstream upstream = Upstream::ones;
  std::uint64_t grad_seed = 0;
};

struct GradientRequest {
  Step step = Step::d_W_q;
  std::vector<std::size_t> index;  // as the trace indexes the step
  DType dtype = DType::float32;
};

// The step's shape as the trace has it, for checking an index before the run.
Shape gradient_index_shape(Step step, const Problem& p);

// Runs the naive backward pass on `problem` in request.dtype and explains one entry of request.step.
// The step must be a gradient that applies to the problem and the index in range (std::invalid_argument).
GradientExplanation explain_gradient(const std::shared_ptr<const Problem>& problem, const GradientRequest& request);

// What `attn-trace explain` explains: one weight, one output number or one gradient entry.
using ExplainedNumber = std::variant<Explanation, OutputExplanation, GradientExplanation>;

}  // namespace attn
