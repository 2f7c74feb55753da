// attn-trace explain FILE --query Q --key K: one attention weight from the inputs to the output, every
// operation with its real numbers; --output C: one output number instead (docs/cli.md, "explain").

#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/explain_json.hpp"
#include "io/load.hpp"
#include "io/read.hpp"
#include "lessons/explain.hpp"
#include "options.hpp"
#include "render/pages/explain.hpp"

namespace attn::cli {

namespace {

struct ExplainOptions {
  TraceOptions trace;  // FILE, --engine, --dtype, the tiles, --json, --max-memory, --precision, --color
  std::optional<std::string> query, key;
  std::optional<std::size_t> head, batch, output;
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

int run(const ExplainOptions& o) {
  const TraceOptions& t = o.trace;
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
      "  attn-trace explain data/bert_bias.json --query dog --key my --head 1 --json explain.json");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
