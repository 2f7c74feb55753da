#pragma once
// attn-trace run --mistake NAME: the common mistakes of writing attention, made on purpose. The intended
// computation and the mistaken one run on the same input; every step of both is kept, the first step
// where they differ is found, and what the mistake costs is measured on this input.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lessons/catalogue.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/steps.hpp"
#include "trace/trace.hpp"

namespace attn {

// How far one step of the mistaken run is from the intended one.
struct StepDifference {
  Step step;
  bool same_shape = true;
  Shape intended_shape, mistaken_shape;
  double max_abs = 0;                 // max |intended - mistaken| (inf where only one side is infinite); 0: identical
  std::size_t flat = 0;               // where that largest difference is, in the traced value's row-major order
  std::vector<std::size_t> at;        // and as one index per axis of the traced shape
  double intended = 0, mistaken = 0;  // the two values there
  bool differs() const { return !same_shape || max_abs != 0; }
};

// One measured figure per row (a query of one batch item and head, or a key's column), intended beside
// mistaken: "largest weight" 0.77 vs 0.94.
struct CostRow {
  std::size_t batch = 0, head = 0, index = 0;  // index: the query (or the key, for a column table)
  std::vector<double> intended, mistaken;      // one per measure
};

struct CostTable {
  std::string title;                  // "per query: the largest weight and the entropy of its row"
  std::vector<std::string> measures;  // "largest weight", "entropy (nats)"
  bool by_key = false;                // rows are keys (columns of the weights), not queries
  std::vector<CostRow> rows;
};

struct MistakeResult {
  Mistake mistake;
  Trace intended;                     // every step of the naive engine on the input
  Trace mistaken;                     // every step of the same computation with the mistake made
  std::vector<StepDifference> steps;  // in pipeline order, one per step both traces hold
  std::optional<Step> first_difference;
  std::vector<CostTable> costs;
  std::vector<std::string> findings;  // measured sentences: "the largest weight rises from 0.77 to 0.94 on average"
  // What focus_mistake kept: the steps to show side by side (--steps; empty: every step, and the first
  // difference shown), and the one head (--head) that the traces, the differences and the costs hold.
  std::vector<Step> shown;
  std::optional<std::size_t> head;
};

// The difference at the first step where the two runs differ, or nullptr when none does.
const StepDifference* first_difference_of(const MistakeResult& result);

// Whether `mistake` can be made on `p`, or the reason it cannot (shared-qkv needs self-attention with d_v = d_k).
std::optional<std::string> mistake_refused(Mistake mistake, const Problem& p);

// Runs the intended computation and the mistaken one in `dtype` on `problem` (naive engine, every step
// kept) and measures the difference. Precondition: mistake_refused() is empty.
MistakeResult run_mistake(const std::shared_ptr<const Problem>& problem, Mistake mistake, DType dtype);

// `result` cut down to what `filter` keeps (run --mistake --steps, --head): both traces keep only the
// filter's head (trace/trace.hpp, keep_only), every step's difference and the first difference are
// measured again in that head, and the cost tables keep only its rows; the findings stay measured over
// the whole input. `filter.only`, in pipeline order, becomes `shown`: the steps to show, of all still
// measured.
MistakeResult focus_mistake(MistakeResult result, const StepFilter& filter);

// ------------------------------------------------------------------ the measures, for tests
// A (B, h, n, m) weights as a trace holds them (with or without the batch axis).

// Σ_j a_ij · ln(1 / a_ij) over the row's nonzero weights: 0 when one key takes everything, ln m when
// all are equal.
double row_entropy(const Tensor<double>& A, std::size_t b, std::size_t hd, std::size_t i);

}  // namespace attn
