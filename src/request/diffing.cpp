#include "request/diffing.hpp"

#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attn/version.hpp"
#include "check/diff.hpp"
#include "formats/dumped_steps.hpp"
#include "io/diff_json.hpp"
#include "io/load.hpp"
#include "io/read.hpp"
#include "io/trace_json.hpp"
#include "text/visible.hpp"
#include "request/memory.hpp"
#include "request/request.hpp"
#include "text/number.hpp"
#include "trace/record.hpp"

namespace attn {

namespace {

// --name STEP=NAME, as a map from the dump's name to the step.
std::map<std::string, Step> name_map(const std::vector<std::string>& names) {
  std::map<std::string, Step> map;
  for (const std::string& pair : names) {
    const std::size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      throw UsageError(fmt::format("--name {}: write STEP=NAME, as in --name weights=attn_probs", pair));
    const Step step = step_by_name("--name", pair.substr(0, eq));
    if (!map.emplace(pair.substr(eq + 1), step).second)
      throw UsageError(fmt::format("--name {}: the name {} is given twice", pair, pair.substr(eq + 1)));
  }
  return map;
}

// The problem of FILE (or of its text): an input, or the input a saved trace holds.
std::shared_ptr<const Problem> problem_of(const TraceOptions& t, const std::optional<std::string>& given) {
  const std::string text = given ? *given : read_text(t.file, memory_limit(t));
  if (looks_like_trace(text)) return trace_from_json(text, display_name(t.file)).problem;
  return std::make_shared<const Problem>(load_problem(text, display_name(t.file)));
}

// Refuses (InputError) a diff whose values would not fit --max-memory. Every step is held for three
// computations at once (from the input, from the dump, one mistake at a time), each as its float64
// value, what the next step started from and its value in the dtype (9 copies), with the dtype's run
// while it is made (a float32 run: 1 more) and the dump's values as read and as given (2 more): 12.
void check_diff_memory(const TraceOptions& t, const Problem& p, bool gradients = false) {
  constexpr std::size_t copies = 12;
  std::size_t values = 0;
  for (const Step s : steps_of(p)) values += element_count(canonical_shape(s, p));
  if (gradients)
    for (const Step s : gradient_steps_of(p)) values += element_count(canonical_shape(s, p));
  const std::size_t bytes = values * sizeof(double) * copies;
  const MemoryLimit limit = memory_limit(t);
  if (bytes / copies != values * sizeof(double) || bytes > limit.bytes)
    throw InputError(display_name(t.file), "",
                     fmt::format("diff holds every step about {} times over ({}), over --max-memory {}", copies,
                                 describe_bytes(bytes), limit.text));
}

}  // namespace

std::shared_ptr<const Problem> diff_problem(const DiffOptions& o, const std::optional<std::string>& text) {
  name_map(o.names);  // a mistaken --name is refused before the input is read, as the command always did
  std::shared_ptr<const Problem> problem = problem_of(o.trace, text);
  if (o.grad_seed) problem = std::make_shared<const Problem>(with_grad_seed(*problem, *o.grad_seed));
  check_diff_memory(o.trace, *problem);
  return problem;
}

Diffed diff_for(const DiffOptions& o, const std::shared_ptr<const Problem>& problem, std::vector<NamedDump> dumps,
                const std::string& dumps_name) {
  const TraceOptions& t = o.trace;
  const Problem& p = *problem;
  const std::map<std::string, Step> names = name_map(o.names);
  Dumped dumped = dumped_steps(p, std::move(dumps), names, dumps_name, display_name(t.file));
  if (dumped.gradients) check_diff_memory(t, p, true);  // the backward's steps are held as the forward's are
  const DType dtype = o.dtype_given ? t.dtype : dumped.least;
  check_range(p, display_name(t.file), dtype);

  DiffResult result = diff_dump(p, dumped.steps, dtype);
  std::string json = diff_to_json(result, fmt::format("attn-trace {}", version), display_name(t.file), dumps_name);
  const bool differs = result.first.has_value();
  return {std::move(result), fmt::format("{} against {}", display_name(t.file), dumps_name), std::move(json), differs};
}

}  // namespace attn
