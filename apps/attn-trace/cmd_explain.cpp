// attn-trace explain FILE --query Q --key K: one attention weight from the inputs to the output, every
// operation with its real numbers; --output C: one output number instead (docs/cli.md, "explain").

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/explain_json.hpp"
#include "io/load.hpp"
#include "io/read.hpp"
#include "lessons/explain.hpp"
#include "options.hpp"
#include "render/pages/explain_page.hpp"
#include "text/words.hpp"
#include "trace/trace.hpp"

namespace attn::cli {

namespace {

struct ExplainOptions {
  TraceOptions trace;  // FILE, --engine, --dtype, the tiles, --json, --max-memory, --precision, --color
  std::optional<std::string> query, key;
  std::optional<std::size_t> head, batch, output;
  std::string grad;                // --grad STEP
  std::vector<std::size_t> index;  // --index I,J,…
};

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
int run_gradient(const ExplainOptions& o) {
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
  const std::shared_ptr<const Problem> problem = load_input(backward);
  const Problem& p = *problem;
  if (!step_applies(step, p))
    throw UsageError(fmt::format("--grad {}: this input has no \"{}\", so no gradient {}", o.grad,
                                 to_string(step_info(step).needs), o.grad));
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
  if (!t.json_out.empty()) write_result(t.json_out, gradient_explanation_to_json(e, generator()));
  const std::string title = fmt::format("{}, {}, naive backward", display_name(t.file), name_of(t.dtype));
  if (t.json_out != "-") write_result("", render_gradient_explanation(e, title, render_options(t)));
  return 0;
}

int run(const ExplainOptions& o) {
  const TraceOptions& t = o.trace;
  if (!o.grad.empty()) return run_gradient(o);
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

  auto problem = std::make_shared<const Problem>(load_problem_file(t.file, memory_limit(t)));
  const Problem& p = *problem;
  check_ranges(o, p);
  const std::size_t b = o.batch.value_or(0);
  const std::size_t i = token_index("--query", *o.query, p.tokens[b], "query");
  check_range(p, display_name(t.file), t.dtype);

  const bool flash = t.engine == Engine::flash;
  StepFilter filter;  // what explain_weight and explain_output keep, for the memory estimate
  filter.tiles = flash;
  const std::string title = fmt::format("{}, {}, {} engine", display_name(t.file), name_of(t.dtype), name_of(t.engine));
  const RenderOptions render = render_options(t);

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
    if (!t.json_out.empty()) write_result(t.json_out, output_explanation_to_json(e, generator()));
    if (t.json_out != "-") write_result("", render_output_explanation(e, title, render));
    return 0;
  }

  const std::size_t j = token_index("--key", *o.key, p.context_tokens[b], p.cross ? "context" : "key");
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
  if (!t.json_out.empty()) write_result(t.json_out, explanation_to_json(e, generator()));
  if (t.json_out != "-") write_result("", render_explanation(e, title, render));
  return 0;
}

}  // namespace

Runner add_explain(CLI::App& app) {
  auto options = std::make_shared<ExplainOptions>();
  TraceOptions& t = options->trace;
  CLI::App* cmd = app.add_subcommand(
      "explain", "one attention weight from the inputs to the output, every operation with its numbers");
  cmd->add_option("FILE", t.file, "the input JSON (docs/input-format.md); - reads standard input")->required();
  cmd->add_option("--query", options->query, "the query token: its name, or its index when no token has that name")
      ->type_name("Q");
  cmd->add_option("--key", options->key,
                  "the key token (a context token in cross-attention): its name, or its index when no token has "
                  "that name")
      ->type_name("K");
  cmd->add_option("--head", options->head, "the query head (default 0)")->type_name("H");
  cmd->add_option("--batch", options->batch, "the batch item (default 0)")->type_name("B");
  cmd->add_option("--output", options->output,
                  "explain output column C of the query's row instead (Y[i][C]), from concat and W_o; without --key")
      ->type_name("C");
  cmd->add_option_function<std::string>(
         "--engine", [&t](const std::string& name) { t.engine = *engine_from_name(name); },
         "naive (the softmax of the whole row), or flash (how the weight builds up tile by tile, with naive "
         "beside it to compare)")
      ->check(CLI::IsMember({"naive", "flash"}))
      ->default_str("naive");
  cmd->add_option("--grad", options->grad,
                  "explain one entry of this gradient of the backward pass instead (d_weights, d_W_q, …: attn-trace "
                  "steps lists them), term by term; with --index")
      ->type_name("STEP");
  cmd->add_option("--index", options->index,
                  "with --grad: the entry, one number per axis of the gradient in order (batch first for a batch), "
                  "comma-separated")
      ->type_name("I,J,…")
      ->delimiter(',');
  cmd->add_option("--grad-seed", t.grad_seed,
                  "with --grad: draw dY from a standard normal with this seed, in place of the input's dY (or of 1 "
                  "everywhere)")
      ->check(whole_number);
  add_dtype_option(*cmd, t.dtype, /*half=*/false, "the arithmetic");
  add_tile_options(*cmd, t);
  cmd->add_option("--json", t.json_out,
                  "also write every number of the explanation as JSON (format attn-trace.explain) to this file; - "
                  "writes it to stdout instead of the text")
      ->type_name("OUT");
  add_memory_option(*cmd, t);
  cmd->add_option("--precision", t.precision, "digits after the point")->check(CLI::Range(0, 17))->default_str("4");
  add_color_option(*cmd, t);
  cmd->footer(
      "A token is found by its exact name first; a number is read as an index only when no token has that\n"
      "name. A name that several tokens share is refused: give the index instead.\n"
      "\n"
      "Examples:\n"
      "  attn-trace explain data/the_cat_sat.json --query cat --key The\n"
      "  attn-trace explain data/the_cat_sat.json --query 1 --key 0 --engine flash\n"
      "  attn-trace explain data/gqa.json --query tea --key like --head 3\n"
      "  attn-trace explain data/gpt_causal.json --query cat --output 0\n"
      "  attn-trace explain data/bert_bias.json --query dog --key my --head 1 --json explain.json\n"
      "  attn-trace explain data/the_cat_sat.json --grad d_weights --index 0,1,0\n"
      "  attn-trace explain data/gqa.json --grad d_W_q --index 2,5 --grad-seed 7");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
