// attn-trace explain FILE --query Q --key K: one attention weight from the inputs to the output, every
// operation with its real numbers; --output C: one output number instead (docs/cli.md, "explain").
// The explanation itself is request/explaining.hpp's, which the Python module asks too.

#include <memory>
#include <optional>
#include <string>

#include "command.hpp"
#include "options.hpp"
#include "render/pages/explain_page.hpp"
#include "request/explaining.hpp"
#include "request/terminal_caps.hpp"

namespace attn::cli {

namespace {

struct ExplainCommand {
  ExplainOptions request;  // FILE, the options of the explanation
  std::string json_out;    // --json: "" none, "-" stdout instead of the text
};

int run(const ExplainCommand& o) {
  const Explained e = explain_for(o.request, std::nullopt);
  if (!o.json_out.empty()) write_result(o.json_out, e.json);
  if (o.json_out != "-") write_result("", render_explained(e.what, e.title, render_options(o.request.trace)));
  return 0;
}

}  // namespace

Runner add_explain(CLI::App& app) {
  auto options = std::make_shared<ExplainCommand>();
  TraceOptions& t = options->request.trace;
  ExplainOptions& r = options->request;
  CLI::App* cmd = app.add_subcommand(
      "explain", "one attention weight from the inputs to the output, every operation with its numbers");
  cmd->add_option("FILE", t.file, "the input JSON (docs/input-format.md); - reads standard input")->required();
  SharedOptions<ExplainOptions> shared(*cmd, r, explain_options());
  for (const char* name : {"--query", "--key", "--head", "--batch", "--output", "--engine", "--decode", "--grad",
                           "--index", "--grad-seed", "--dtype", "--block-q", "--block-k"})
    shared.add(name);
  cmd->add_option("--json", options->json_out,
                  "also write every number of the explanation as JSON (format attn-trace.explain) to this file; - "
                  "writes it to stdout instead of the text")
      ->type_name("OUT");
  shared.add("--max-memory");
  shared.all_placed();
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
      "  attn-trace explain data/gpt_causal.json --query down --key cat --decode\n"
      "  attn-trace explain data/bert_bias.json --query dog --key my --head 1 --json explain.json\n"
      "  attn-trace explain data/the_cat_sat.json --grad d_weights --index 0,1,0\n"
      "  attn-trace explain data/gqa.json --grad d_W_q --index 2,5 --grad-seed 7");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
