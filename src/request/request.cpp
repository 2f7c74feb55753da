#include "request/request.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "json/error.hpp"
#include "text/nearest.hpp"
#include "io/load.hpp"
#include "io/read.hpp"
#include "request/memory.hpp"

namespace attn {

void check_tiles_need_flash(const TraceOptions& o) {
  if (o.engine == Engine::naive && (o.block_q || o.block_k))
    throw UsageError(
        fmt::format("--{}: tile sizes apply to the flash pass; add --engine flash", o.block_q ? "block-q" : "block-k"));
}

Step step_by_name(std::string_view option, const std::string& name) {
  if (const std::optional<Step> step = step_from_name(name)) return *step;
  std::vector<std::string_view> names, gradients;
  for (const Step s : all_steps()) names.push_back(step_info(s).name);
  for (const Step s : gradient_steps()) gradients.push_back(step_info(s).name);
  std::vector<std::string_view> every = names;
  every.insert(every.end(), gradients.begin(), gradients.end());
  throw UsageError(fmt::format("{}: unknown step \"{}\"{}; the steps are {} (and with --backward {})", option, name,
                               did_you_mean(name, every), fmt::join(names, ","), fmt::join(gradients, ",")));
}

StepFilter trace_filter(const TraceOptions& options, const Problem& problem, bool has_tiles, TraceSource source) {
  StepFilter filter;
  if (options.head && *options.head >= problem.h) {
    throw UsageError(problem.h == 1 ? fmt::format("--head {}: the input has one head, head 0", *options.head)
                                    : fmt::format("--head {}: the input has {} heads, 0 to {}", *options.head,
                                                  problem.h, problem.h - 1));
  }
  filter.head = options.head;
  // "tiles" (the flash pass's tiles) is not a step of the trace, but can be chosen like one; so can
  // the score steps, whose flash counterparts live in the tiles.
  filter.tiles = options.steps.empty();
  for (const std::string& name : options.steps) {
    if (name == "tiles") {
      if (!has_tiles && source == TraceSource::saved)
        throw UsageError(
            "--steps tiles: only the flash pass has tiles, and this trace was saved without it; save one with "
            "attn-trace run FILE --engine flash --json TRACE.json");
      if (!has_tiles)
        throw UsageError(
            "--steps tiles: only the flash pass has tiles; add --engine flash or --engine both, or use "
            "attn-trace compare");
      filter.tiles = true;
      continue;
    }
    const Step step = step_by_name("--steps", name);
    if (is_gradient_step(step) && source == TraceSource::run && !options.backward)
      throw UsageError(fmt::format("--steps {}: a step of the backward pass; add --backward", name));
    if (!step_applies(step, problem)) {
      std::vector<std::string_view> names;
      for (const Step s : is_gradient_step(step) ? gradient_steps_of(problem) : steps_of(problem))
        names.push_back(step_info(s).name);
      throw UsageError(fmt::format("--steps {}: this input has no \"{}\", so no step {}; its {} are {}", name,
                                   needs_name(step_info(step)), name, is_gradient_step(step) ? "gradients" : "steps",
                                   fmt::join(names, ",")));
    }
    if (is_score_step(step)) filter.tiles = true;
    const auto add = [&filter](Step s) {
      if (std::find(filter.only.begin(), filter.only.end(), s) == filter.only.end()) filter.only.push_back(s);
    };
    add(step);
    // The sinks' shares are the weights' last column (the tables and pictures draw them there): they
    // come with the weights.
    if (step == Step::weights && step_applies(Step::sink_weights, problem)) add(Step::sink_weights);
  }
  filter.none = !options.steps.empty() && filter.only.empty();  // --steps tiles: the tiles alone
  return filter;
}

RunRequest run_request(const TraceOptions& options, const Problem& problem, StepFilter filter) {
  return {options.engine, options.dtype, asked_tiles(problem.n, problem.m, options.block_q, options.block_k),
          std::move(filter), options.backward};
}

RunRequest plan_run(const TraceOptions& o, const Problem& p) {
  // pass 1: what to run: --steps and --head as a filter, the engine, the dtype, the tiles
  StepFilter filter = trace_filter(o, p, o.engine != Engine::naive);
  RunRequest request{o.engine, o.dtype, asked_tiles(p.n, p.m, o.block_q, o.block_k), std::move(filter), o.backward};
  // pass 2: the verdicts, refused in the order a reader meets them: the input's range, then the memory
  const MemoryVerdict memory =
      memory_verdict(o, request, p, {.naive = o.engine != Engine::flash, .flash = o.engine != Engine::naive});
  check_range(p, display_name(o.file), o.dtype);
  if (!memory.fits()) throw InputError(display_name(o.file), "", memory.refusal);
  return request;
}

void add_verdict(Trace& trace, const TraceOptions& o) {
  if (trace.engine != Engine::both || trace.compare || !trace.flash) return;
  StepFilter output_only;
  output_only.only = {Step::output};
  output_only.tiles = false;
  const RunRequest request{Engine::both, trace.dtype, trace.flash->tile_size, output_only};
  check_memory(o, request, *trace.problem, {.naive = true, .flash = true, .reference = true});
  trace.compare = record_compare(trace.problem, request).compare;
}

namespace {

// --dropout and --dropout-seed in place of the input's "dropout": --dropout 0 turns it off.
void apply_dropout_options(const TraceOptions& o, Problem& problem) {
  if (o.dropout && !(*o.dropout >= 0 && *o.dropout < 1))
    throw UsageError(
        fmt::format("--dropout {}: expected a probability 0 <= p < 1 (p = 1 would drop every weight)", *o.dropout));
  if (o.dropout_seed && !o.dropout && !problem.dropout)
    throw UsageError(
        "--dropout-seed: it seeds dropout's keep mask, and this run has no dropout; add --dropout P (or a \"dropout\" "
        "key to the input)");
  if (o.dropout_seed && o.dropout && *o.dropout == 0)
    throw UsageError("--dropout-seed: --dropout 0 drops nothing, so there is no mask to seed");
  if (o.dropout) {
    if (*o.dropout == 0) {
      problem.dropout.reset();
      return;
    }
    const std::uint64_t seed = problem.dropout ? problem.dropout->seed : 0;
    problem.dropout = Dropout{*o.dropout, seed};
  }
  if (o.dropout_seed) problem.dropout->seed = *o.dropout_seed;
}

}  // namespace

std::shared_ptr<const Problem> as_run(const TraceOptions& o, Problem problem) {
  if (o.grad_seed && !o.backward) throw UsageError("--grad-seed: it draws the backward pass's dY; add --backward");
  if (o.grad_seed) problem = with_grad_seed(std::move(problem), *o.grad_seed);
  apply_dropout_options(o, problem);
  return std::make_shared<const Problem>(std::move(problem));
}

Problem input_problem(const TraceOptions& o, const std::optional<std::string>& text) {
  return text ? load_problem(*text, display_name(o.file)) : load_problem_file(o.file, memory_limit(o));
}

std::shared_ptr<const Problem> load_input(const TraceOptions& o, const std::optional<std::string>& text) {
  return as_run(o, input_problem(o, text));
}

}  // namespace attn
