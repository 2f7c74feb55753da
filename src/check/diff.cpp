#include "check/diff.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/compare_backward.hpp"
#include "engine/rows.hpp"
#include "lessons/mistaken_backward.hpp"
#include "lessons/mistaken_forward.hpp"
#include "observe/observer.hpp"
#include "ops/attention.hpp"
#include "ops/bounds.hpp"
#include "tensor/half.hpp"
#include "text/number.hpp"
#include "trace/trace.hpp"

#include "check/diagnosis.hpp"
#include "check/judge.hpp"
#include "check/readings.hpp"

namespace attn {

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::agrees: return "agrees";
    case Verdict::differs: return "differs";
    case Verdict::follows: return "follows";
  }
  return "?";
}

std::string_view to_string(Fusion fusion) {
  switch (fusion) {
    case Fusion::none: return "none";
    case Fusion::later_step: return "later_step";
    case Fusion::unnormalised: return "unnormalised";
  }
  return "?";
}

namespace {

// The row of step `s`: its figures against our run from the input and from the dump's earlier steps, and
// its verdict from the latter (follows is decided after).
StepJudgement judgement_of(const check::ReadDump& read, Step s, const check::Ours& full, const check::Ours& resumed,
                           const check::Judged& local) {
  const DumpedStep& d = *read.source[slot(s)];
  const std::span<const double> as_dumped = read.as_given[slot(s)]->values();
  StepJudgement j{.step = s,
                  .named = d.step,
                  .fusion = read.fusion[slot(s)],
                  .source = d.source,
                  .dumped_shape = d.shape,
                  .layout = read.layouts[slot(s)],
                  .dtype = d.dtype};
  std::tie(j.max_abs, j.max_rel) = check::largest_difference(as_dumped, full.in_dtype[slot(s)], s == Step::masked);
  j.max_abs_resumed = check::largest_difference(as_dumped, resumed.in_dtype[slot(s)], s == Step::masked).first;
  j.tolerance = local.worst_tolerance;
  j.out_of_tolerance = local.out;
  j.large_negatives = local.large_negatives;
  j.verdict = local.ok() ? Verdict::agrees : Verdict::differs;
  return j;
}

// The figures of the judgement that gave the verdict: a row shows a value over its tolerance exactly when
// it does not agree.
void show_judged(StepJudgement& j, const check::Judged& local, const check::Judged& against_trace) {
  const check::Judged& by = j.verdict == Verdict::follows ? against_trace : local;
  j.judged_against_input = j.verdict == Verdict::follows;
  j.judged_max_abs = by.max_abs;
  j.judged_max_rel = by.max_rel;
  j.judged_tolerance = by.worst_tolerance;
}

}  // namespace

namespace {

// The problem with the upstream gradient a dump of gradients is judged with: the input's dY (its "dY", or
// drawn by --grad-seed), else the dump's own d_output, else 1 everywhere; where it came from, as diff's
// JSON names it, and the note that says so.
struct WithUpstream {
  Problem problem;
  std::string upstream;  // "input", "grad_seed", "dump", "ones"
  std::string note;
};

WithUpstream with_dumped_upstream(const Problem& input, const std::vector<DumpedStep>& dumped) {
  WithUpstream w{input, "ones",
                 "the upstream gradient dY is 1 everywhere (L = ΣY): the input has no \"dY\" and the dump no "
                 "d_output"};
  if (input.upstream == Upstream::input) {
    w.upstream = "input";
    w.note = "the upstream gradient dY is the input's \"dY\"";
    return w;
  }
  if (input.upstream == Upstream::seeded) {
    w.upstream = "grad_seed";
    w.note =
        fmt::format("the upstream gradient dY is drawn from a standard normal with --grad-seed {}", input.grad_seed);
    return w;
  }
  const auto d_output =
      std::find_if(dumped.begin(), dumped.end(), [](const DumpedStep& d) { return d.step == Step::d_output; });
  if (d_output == dumped.end()) return w;
  const std::vector<DumpLayout> fits = layouts_that_fit(Step::d_output, input, d_output->shape);
  if (fits.empty()) return w;  // refused by its shape when it is read
  w.problem.dY = to_canonical(Step::d_output, input, fits.front(), d_output->values);
  w.upstream = "dump";
  w.note = fmt::format("the upstream gradient dY is the dump's own d_output ({}): the input has no \"dY\"",
                       d_output->source);
  return w;
}

}  // namespace

DiffResult diff_dump(const Problem& input, const std::vector<DumpedStep>& dumped, DType dtype) {
  DiffResult result;
  result.dtype = dtype;
  const bool gradients =
      std::any_of(dumped.begin(), dumped.end(), [](const DumpedStep& d) { return is_gradient_step(d.step); });
  const WithUpstream dY = gradients ? with_dumped_upstream(input, dumped) : WithUpstream{};
  const Problem& p = gradients ? dY.problem : input;
  result.upstream = dY.upstream;

  // pass 1: every dumped step read into its canonical shape, as the step it holds
  const check::Ours full = check::reference(p, check::Given{}, Mistake::none, dtype, gradients);
  const check::ReadDump read = check::read_dump(p, dumped, full, dtype);
  result.notes = read.notes;
  if (gradients) result.notes.push_back(dY.note);
  if (const auto& theirs = read.given[slot(Step::dropped)]; p.dropout && theirs) {
    // The dump's keep mask against the seed's: where a weight is not 0, is it kept by both or dropped by both?
    const Tensor<double>& weights = full.exact[slot(Step::weights)];
    const Tensor<double>& seeded = full.exact[slot(Step::dropped)];
    std::size_t choices = 0, other = 0;
    for (std::size_t e = 0; e < theirs->size() && e < seeded.size(); ++e) {
      if (weights.values()[e] == 0) continue;
      ++choices;
      if ((theirs->values()[e] != 0) != (seeded.values()[e] != 0)) ++other;
    }
    result.notes.push_back(fmt::format(
        "dropped: the keep mask is read from the dump (a weight is kept where the dump's is not 0), so its weights "
        "and their 1/(1 - p) are judged, not its random numbers; {} of its {} keep-or-drop choices differ from the "
        "mask of seed {} (Philox4x32-10)",
        other, choices, p.dropout->seed));
  }

  // pass 2: each dumped step judged against ours from the dump's earlier steps (resumed) and from the
  // input (full), forward steps first, then the gradients in the backward's order; at the first that is
  // wrong itself, pass 3: the diagnosis (divergence_at)
  const check::Ours resumed = check::reference(p, read.given, Mistake::none, dtype, gradients);
  std::vector<Step> differing;
  std::vector<Step> walk(all_steps().begin(), all_steps().end());
  if (gradients) walk.insert(walk.end(), gradient_steps().begin(), gradient_steps().end());
  for (const Step s : walk) {
    if (!read.given[slot(s)]) continue;
    // Judge the dump's values as dumped: the masked step before its large negatives were read as -inf.
    const Tensor<double>& as_dumped = *read.as_given[slot(s)];
    const check::Judged local = check::judge_against(p, resumed, s, as_dumped.values(), dtype);
    const check::Judged against_trace = check::judge_against(p, full, s, as_dumped.values(), dtype);
    StepJudgement j = judgement_of(read, s, full, resumed, local);
    if (!local.ok()) {
      if (!result.first) result.first = check::divergence_at(p, read, s, as_dumped, resumed, local, dtype);
      differing.push_back(s);
    } else if (!against_trace.ok()) {
      for (const Step e : differing)
        if (depends_on(s, e)) j.follows = e;  // the latest one it uses
      if (j.follows) j.verdict = Verdict::follows;
    }
    show_judged(j, local, against_trace);
    check::add_reading_notes(j, read.layouts[slot(s)], result.notes);
    result.steps.push_back(std::move(j));
  }
  return result;
}

const std::vector<std::pair<std::string_view, Step>>& gradient_aliases() {
  using enum Step;
  static const std::vector<std::pair<std::string_view, Step>> aliases = {
      {"grad_output", d_output},
      {"grad_out", d_output},
      {"d_out", d_output},
      {"dy", d_output},
      {"dY", d_output},
      {"output.grad", d_output},
      {"out.grad", d_output},
      {"grad_attn", d_weights},
      {"dP", d_weights},
      {"dA", d_weights},
      {"grad_q", d_q},
      {"q.grad", d_q},
      {"dq", d_q},
      {"dQ", d_q},
      {"grad_k", d_k},
      {"k.grad", d_k},
      {"dk", d_k},
      {"dK", d_k},
      {"grad_v", d_v},
      {"v.grad", d_v},
      {"dv", d_v},
      {"dV", d_v},
      {"grad_x", d_X},
      {"x.grad", d_X},
      {"dx", d_X},
      {"dX", d_X},
      {"grad_context", d_context},
      {"context.grad", d_context},
      {"W_q.grad", d_W_q},
      {"q_proj.weight.grad", d_W_q},
      {"dW_q", d_W_q},
      {"W_k.grad", d_W_k},
      {"k_proj.weight.grad", d_W_k},
      {"dW_k", d_W_k},
      {"W_v.grad", d_W_v},
      {"v_proj.weight.grad", d_W_v},
      {"dW_v", d_W_v},
      {"W_o.grad", d_W_o},
      {"o_proj.weight.grad", d_W_o},
      {"out_proj.weight.grad", d_W_o},
      {"dW_o", d_W_o},
      {"b_q.grad", d_b_q},
      {"q_proj.bias.grad", d_b_q},
      {"db_q", d_b_q},
      {"b_k.grad", d_b_k},
      {"k_proj.bias.grad", d_b_k},
      {"db_k", d_b_k},
      {"b_v.grad", d_b_v},
      {"v_proj.bias.grad", d_b_v},
      {"db_v", d_b_v},
      {"b_o.grad", d_b_o},
      {"o_proj.bias.grad", d_b_o},
      {"out_proj.bias.grad", d_b_o},
      {"db_o", d_b_o},
  };
  return aliases;
}

std::optional<Step> gradient_alias(std::string_view name) {
  for (const auto& [alias, step] : gradient_aliases())
    if (alias == name) return step;
  return std::nullopt;
}

}  // namespace attn
