#pragma once
// attn-trace diff: a user's dump of attention's steps judged against ours, step by step in pipeline
// order, in the dump's precision. Each dumped step is judged twice: against our value computed from
// the input ("the trace"), and against our value computed from the dump's own earlier steps, which
// separates a step that is wrong itself from one that only carries an earlier step's error. At the
// first step that is wrong itself, known mistakes are tried on the same inputs, and those that
// reproduce the dump are the diagnosis. docs/diff.md describes the rule and every check.

#include <cstddef>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "lessons/catalogue.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"
#include "observe/steps.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// One tensor of the dump, matched to its step; its shape as dumped.
struct DumpedStep {
  Step step;
  std::string source;            // where it came from: "q.npy", "dump.safetensors: attn_probs"
  Shape shape;                   // as dumped
  std::vector<double> values;    // row-major in `shape`, widened exactly
  DType dtype = DType::float64;  // what it was stored in
};

// How the head axis and the token axis of a head step were dumped.
enum class HeadOrder { heads_first, tokens_first };  // (B, h, n, d) or (B, n, h, d)

// What a dumped step's shape was read as.
struct DumpLayout {
  bool batch_axis = true;                    // the dump has the leading batch axis
  HeadOrder order = HeadOrder::heads_first;  // head steps only
  std::vector<std::string> dims;             // the dumped axes by name: "batch", "query", "head", "d_k"
};

// The shape `step` has in the dump's reading order: with the batch axis, head axes first.
Shape canonical_shape(Step step, const Problem& p);

// How `shape` fits `step` of `p`: with or without the batch axis (when B is 1), heads first or tokens
// first. Every reading that fits, heads first before tokens first; none: the shape does not fit.
std::vector<DumpLayout> layouts_that_fit(Step step, const Problem& p, const Shape& shape);

// The steps a dump named for `named` may hold instead, because the code that made it did the next steps
// in the same line (docs/diff.md, "Fused dumps"): the steps after `named` that are computed from it
// alone and compute nothing new (a relayout, RoPE's rotation, the scale, ALiBi's bias, the mask), in
// pipeline order, up to the first step in `dumped` (a step dumped under its own name is not fused in).
// `q` may hold `q_heads` or `q_rot`, `scores` `scaled` or `masked`, `head_outputs` `concat`.
std::vector<Step> fused_steps(Step named, const Problem& p, std::span<const Step> dumped = {});

// Whether `shape` fits `named`, or one of the steps it may hold (fused_steps), in some layout.
bool fits_some_reading(Step named, const Problem& p, const Shape& shape, std::span<const Step> dumped = {});

// A dump of `shape` from `source` that fits no reading of `step`: one sentence naming the shapes that fit.
std::string shape_mismatch(Step step, const Problem& p, const std::string& source, const Shape& shape);

// `values` dumped in `layout`, in the canonical shape (canonical_shape).
Tensor<double> to_canonical(Step step, const Problem& p, const DumpLayout& layout, std::span<const double> values);

enum class Verdict {
  agrees,   // within tolerance of our value from the dump's earlier steps and of the trace
  differs,  // out of tolerance of our value from the dump's own earlier steps: wrong here
  follows,  // right given the dump's earlier steps, which are wrong: carries an earlier error
};
std::string_view to_string(Verdict verdict);

struct Diagnosis {
  DiagnosisCode code;
  std::string mistake;  // which one: "scale left out", "W_k transposed"
  std::string finding;  // a measured sentence: "the dump's scaled scores are 1.414 (√d_k) times ours"
};

// How a dump's values were read when it holds more than its name says.
enum class Fusion {
  none,          // the step it is named for
  later_step,    // a later step (fused_steps): `scores` holding our `scaled`
  unnormalised,  // weights before the division: exp(S'' − max) row by row, each row's largest value 1
};

// "none", "later_step", "unnormalised", as diff's JSON writes them.
std::string_view to_string(Fusion fusion);

struct StepJudgement {
  Step step;          // the step the values are judged as
  Step named = step;  // the step the dump was named for (another when it was fused)
  Fusion fusion = Fusion::none;
  std::string source;
  Shape dumped_shape;
  DumpLayout layout;
  DType dtype = DType::float64;      // the dump's
  double max_abs = 0, max_rel = 0;   // against the trace (our run from the input); inf where one side is infinite
  double max_abs_resumed = 0;        // against our value from the dump's earlier steps
  double tolerance = 0;              // the allowed difference at the element that is furthest out (or nearest to)
  std::size_t out_of_tolerance = 0;  // elements out of tolerance against the value from the dump's earlier steps
  std::size_t large_negatives = 0;   // masked: finite values <= -1e4 where ours is -inf, read as masked
  Verdict verdict = Verdict::agrees;
  std::optional<Step> follows;  // follows: the latest earlier dumped step that differs and that it uses
  // The figures the verdict was judged by, against the exact value element by element: ours from the
  // dump's earlier steps (agrees, differs), or ours from the input (follows). Some value is out of
  // tolerance exactly when judged_max_abs > judged_tolerance, the tolerance at the element furthest out
  // (or, when none is, at the largest difference).
  bool judged_against_input = false;
  double judged_max_abs = 0, judged_max_rel = 0, judged_tolerance = 0;
};

// A few rows and columns of the last two axes around the first divergence, ours beside the dump's.
struct DivergenceWindow {
  std::string row_axis, col_axis;                   // "query", "key"
  std::vector<std::size_t> rows, cols;              // their indices
  std::vector<std::string> row_labels, col_labels;  // tokens, or indices for features
  std::vector<std::vector<double>> ours, dumped;    // [row][col]
};

struct Divergence {
  Step step;
  std::vector<std::size_t> index;   // in the canonical shape
  std::vector<std::string> axes;    // its axes by name: "batch", "head", "query", "key"
  std::vector<std::string> labels;  // each index for people: the token's label, or the number
  double ours = 0, dumped = 0;      // the two values there (ours from the dump's earlier steps)
  double tolerance = 0;
  std::size_t out_of_tolerance = 0;  // elements of the step
  std::size_t elements = 0;
  DivergenceWindow window;
  std::vector<Diagnosis> diagnosis;  // every known mistake that reproduces the dump here; may be empty
};

struct DiffResult {
  DType dtype = DType::float32;      // what ours was computed in
  std::vector<StepJudgement> steps;  // the dumped steps, in pipeline order
  std::optional<Divergence> first;   // the first step that differs
  std::vector<std::string> notes;    // for people: fusions and layouts read, large negatives taken as masked
  // With gradients dumped, where the upstream gradient dY came from: "input" (its "dY"), "grad_seed",
  // "dump" (the dump's d_output), "ones"; empty for a dump of forward steps only.
  std::string upstream;
};

// The common PyTorch-style names of gradients that a dump may use instead of the step names, each with the
// step it stands for: grad_q, q.grad, dq -> d_q; x.grad, dx -> d_X; grad_output, dy -> d_output;
// q_proj.weight.grad, W_q.grad -> d_W_q; and so on (docs/diff.md, "Gradient dumps").
const std::vector<std::pair<std::string_view, Step>>& gradient_aliases();
// The step `name` stands for, by gradient_aliases; nothing when it is none of them.
std::optional<Step> gradient_alias(std::string_view name);

// Judges `dumped` (at most one tensor per step) against `problem`, computing ours in `dtype`. Dumped
// gradients are judged after the forward steps, in the backward's order, with the upstream gradient
// of `problem` (its "dY" or --grad-seed's), else the dump's own d_output, else 1 everywhere. A dump that
// agrees with its named step is read as it; else one that agrees with a step it may hold (fused_steps),
// or weights whose rows are exp(S'' − max) before the division, is read as that, with a note.
// A shape that fits no reading of its step is an std::invalid_argument naming the source and the
// shapes that would fit (the command turns it into a one-line error, exit 2).
DiffResult diff_dump(const Problem& problem, const std::vector<DumpedStep>& dumped, DType dtype);

}  // namespace attn
