#include "request/explaining.hpp"

#include <memory>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attn/version.hpp"
#include "io/explain_json.hpp"
#include "io/load.hpp"
#include "io/read.hpp"
#include "lessons/explain.hpp"
#include "json/error.hpp"
#include "lessons/explain_gradient.hpp"
#include "model/slice.hpp"
#include "text/visible.hpp"
#include "request/memory.hpp"
#include "request/request.hpp"
#include "text/words.hpp"
#include "trace/record.hpp"
#include "trace/trace.hpp"

namespace attn {

namespace {

std::string count_range(std::size_t count, std::string_view one, std::string_view many) {
  return count == 1 ? fmt::format("one {}, 0", one) : fmt::format("{} {}, 0 to {}", count, many, count - 1);
}

std::string generator() { return fmt::format("attn-trace {}", version); }

// The index `text` names among `tokens` (by name, else by index), or a UsageError naming `option`.
std::size_t token_index(std::string_view option, const std::string& text, const std::vector<std::string>& tokens,
                        std::string_view what) {
  const TokenLookup found = find_token(tokens, text, what);
  if (!found.index) throw UsageError(fmt::format("{} {}: {}", option, text, found.error));
  return *found.index;
}

// --head, --batch and --output checked against the problem, each refused with its valid range.
void check_ranges(const ExplainOptions& o, const Problem& p) {
  if (o.batch && *o.batch >= p.B)
    throw UsageError(
        fmt::format("--batch {}: the input has {}", *o.batch, count_range(p.B, "batch item", "batch items")));
  if (o.head && *o.head >= p.h)
    throw UsageError(fmt::format("--head {}: the input has {}", *o.head, count_range(p.h, "head", "heads")));
  if (o.output && *o.output >= p.d_out)
    throw UsageError(
        fmt::format("--output {}: the output has {} (d_out)", *o.output, count_range(p.d_out, "column", "columns")));
}

// explain --grad STEP --index I,J,…: one gradient entry of the naive backward pass, term by term.
Explained explain_gradient_entry(const ExplainOptions& o, const std::optional<std::string>& text) {
  const TraceOptions& t = o.trace;
  for (const auto& [given, option] :
       {std::pair{o.query.has_value(), "--query"}, std::pair{o.key.has_value(), "--key"},
        std::pair{o.output.has_value(), "--output"}, std::pair{o.head.has_value(), "--head"},
        std::pair{o.batch.has_value(), "--batch"}})
    if (given)
      throw UsageError(
          fmt::format("{}: --grad names its entry by --index alone (every axis of the gradient, in order)", option));
  if (t.engine != Engine::naive || t.block_q || t.block_k)
    throw UsageError("--engine: --grad explains the naive backward pass, whose gradients are whole; leave it out");
  const Step step = step_by_name("--grad", o.grad);
  if (!is_gradient_step(step))
    throw UsageError(
        fmt::format("--grad {}: a forward step; a gradient is d_ + a step or a weight (d_{}), and "
                    "--query with --key explains a weight",
                    o.grad, o.grad));
  TraceOptions backward = t;
  backward.backward = true;
  const std::shared_ptr<const Problem> problem = load_input(backward, text);
  const Problem& p = *problem;
  if (!step_applies(step, p))
    throw UsageError(fmt::format("--grad {}: this input has no \"{}\", so no gradient {}", o.grad,
                                 needs_name(step_info(step)), o.grad));
  const Shape shape = gradient_index_shape(step, p);
  const std::vector<std::string> dims = dim_names(step, p.batched, p.layout);
  bool inside = o.index.size() == shape.size();
  for (std::size_t a = 0; inside && a < shape.size(); ++a) inside = o.index[a] < shape[a];
  if (!inside) {
    std::vector<std::string> axes;
    for (std::size_t a = 0; a < shape.size(); ++a) axes.push_back(fmt::format("{} 0 to {}", dims[a], shape[a] - 1));
    throw UsageError(fmt::format("--index {}: {} has {} ({}), so --index takes {} numbers",
                                 o.index.empty() ? std::string("missing") : fmt::format("{}", fmt::join(o.index, ",")),
                                 o.grad, plural(shape.size(), "axis", "axes"), fmt::join(axes, ", "), shape.size()));
  }
  check_range(p, display_name(t.file), t.dtype);
  StepFilter filter;
  const RunRequest request = run_request(backward, p, filter);
  check_memory(t, request, p, {.naive = true, .flash = false, .runs = 2});
  const GradientExplanation e = explain_gradient(problem, {.step = step, .index = o.index, .dtype = t.dtype});
  const std::string title = fmt::format("{}, {}, naive backward", display_name(t.file), name_of(t.dtype));
  return {e, title, gradient_explanation_to_json(e, generator())};
}

}  // namespace

Explained explain_for(const ExplainOptions& o, const std::optional<std::string>& text) {
  const TraceOptions& t = o.trace;
  if (!o.grad.empty() && o.decode)
    throw UsageError("--decode: a decode step runs no backward pass; drop --decode or --grad");
  if (!o.grad.empty()) return explain_gradient_entry(o, text);
  if (!o.index.empty()) throw UsageError("--index: it places a --grad entry; add --grad STEP");
  if (t.grad_seed) throw UsageError("--grad-seed: it draws the upstream gradient of --grad; add --grad STEP");
  check_tiles_need_flash(t);
  if (o.output && o.key)
    throw UsageError("--key: --output explains one output number, which every key feeds; give --key or --output");
  if (o.output && o.head)
    throw UsageError(
        "--head: --output explains one output number, which every head feeds (each head's share is "
        "shown); drop --head");
  if (!o.key && !o.output)
    throw UsageError("--key is needed: the key whose weight to explain (or --output C for one output number)");
  if (!o.query) throw UsageError("--query is needed: the query token, by name or index");

  auto whole = std::make_shared<const Problem>(input_problem(t, text));
  check_ranges(o, *whole);
  const std::size_t b = o.batch.value_or(0);
  const std::size_t asked = token_index("--query", *o.query, whole->tokens[b], "query");
  check_range(*whole, display_name(t.file), t.dtype);
  std::string title = fmt::format("{}, {}, {} engine", display_name(t.file), name_of(t.dtype), name_of(t.engine));
  // --decode: the query's decode step, its one row (query 0 of the part) against the cache of keys 0 … asked
  if (o.decode) {
    if (const std::optional<std::string> why = decode_refusal(*whole)) throw InputError(display_name(t.file), "", *why);
    title += fmt::format(", the decode step of {} (its row against a cache of {} key{})",
                         visible(whole->tokens[b][asked]), asked + 1, asked == 0 ? "" : "s");
  }
  const std::shared_ptr<const Problem> problem =
      o.decode ? std::make_shared<const Problem>(slice_problem(*whole, asked, asked + 1, 0)) : whole;
  const Problem& p = *problem;
  const std::size_t i = o.decode ? 0 : asked;

  const bool flash = t.engine == Engine::flash;
  StepFilter filter;  // what explain_weight and explain_output keep, for the memory estimate
  filter.tiles = flash;

  if (o.output) {
    filter.only = steps_explaining_output(p);
    const RunRequest request = run_request(t, p, filter);
    check_memory(t, request, p, {.naive = !flash, .flash = flash});
    const OutputExplanation e = explain_output(problem, {.batch = b,
                                                         .query = i,
                                                         .column = *o.output,
                                                         .engine = t.engine,
                                                         .dtype = t.dtype,
                                                         .tile_size = request.tile_size});
    return {e, title, output_explanation_to_json(e, generator())};
  }

  const std::size_t j = token_index("--key", *o.key, whole->context_tokens[b], whole->cross ? "context" : "key");
  if (o.decode && j > asked)
    throw UsageError(
        fmt::format("--key {}: it comes after --query {}, so {}'s decode step has no such key in its "
                    "cache (keys 0 … {})",
                    *o.key, *o.query, visible(whole->tokens[b][asked]), asked));
  filter.head = o.head.value_or(0);
  filter.only = steps_explaining_weight(p);
  const RunRequest request = run_request(t, p, filter);
  check_memory(t, request, p, {.naive = true, .flash = flash});  // flash runs with naive beside it, to compare
  const Explanation e = explain_weight(problem, {.batch = b,
                                                 .head = o.head.value_or(0),
                                                 .query = i,
                                                 .key = j,
                                                 .engine = t.engine,
                                                 .dtype = t.dtype,
                                                 .tile_size = request.tile_size});
  return {e, title, explanation_to_json(e, generator())};
}

}  // namespace attn
