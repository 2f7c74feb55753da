// attn-trace explore [FILE]: one self-contained HTML page that runs the attention core, compiled to
// WebAssembly, in the browser, and recomputes every step from any input (docs/explorer.md).

#include <memory>
#include <string>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "explorer_core.hpp"
#include "io/examples.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "options.hpp"
#include "render/pages/explorer/explorer.hpp"

namespace attn::cli {

namespace {

struct ExploreCommand {
  TraceOptions trace;
  std::string out = "explorer.html";  // -o: "-" for stdout
};

// The worked example, when FILE is left out.
constexpr std::string_view default_example = "the-cat-sat";

int run(const ExploreCommand& c) {
  // Said before anything is read: without the core there is no page to make.
  if (explorer_core().empty())
    throw UsageError(
        "explore: this attn-trace was built without the explorer's WebAssembly core: install Debian's emscripten "
        "(apt-get install emscripten) and build it again (bash scripts/demo.sh does both)");
  TraceOptions o = c.trace;
  check_tiles_need_flash(o);
  std::string text;
  if (o.file.empty()) {
    text = std::string(find_example(default_example)->text);
    o.file = "the_cat_sat.json";
  } else {
    text = read_text(o.file, memory_limit(o));
  }
  // The page opens with the trace the tool makes, which the core then makes again in the page.
  const std::shared_ptr<const Problem> problem = as_run(o, load_problem(text, display_name(o.file)));
  const Trace trace = run_problem(o, problem);
  ExplorerPage page;
  page.core = explorer_core();
  page.input = text;
  page.trace = trace_to_json(trace, fmt::format("attn-trace {}", version));
  page.engine = std::string(name_of(o.engine));
  page.dtype = std::string(name_of(o.dtype));
  page.block_q = o.block_q;
  page.block_k = o.block_k;
  page.backward = o.backward;
  page.version = version;
  write_result(c.out, explorer_html(page));
  return 0;
}

}  // namespace

Runner add_explore(CLI::App& app) {
  auto c = std::make_shared<ExploreCommand>();
  c->trace.engine = Engine::both;  // as report: the tile walk and naive vs flash
  CLI::App* cmd = app.add_subcommand(
      "explore", "one offline HTML page that recomputes every step in the browser as you edit the input");
  add_run_options(*cmd, c->trace, /*with_engine=*/true, /*half=*/true);
  cmd->remove_option(cmd->get_option("--json"));
  cmd->get_option("FILE")->required(false)->description(
      "the input the page opens with (docs/input-format.md); - reads standard input; left out, the "
      "worked example \"The cat sat\"");
  cmd->get_option("--engine")->default_str("both");
  add_shared_option(*cmd, c->trace, option_named(explorer_options(), "--backward"));
  check_declared(*cmd, explorer_options());
  add_memory_option(*cmd, c->trace);
  cmd->add_option("-o,--output", c->out, "write the page to this file; - writes it to stdout")
      ->default_str("explorer.html");
  cmd->footer(
      "The page fetches nothing: open it from disk, or send it. It opens with\n"
      "another input when its address ends in #input= and that input's JSON in\n"
      "base64url (docs/explorer.md).\n"
      "Example:\n"
      "  attn-trace explore -o explorer.html\n"
      "  attn-trace explore data/gpt_causal.json --block-q 2 --block-k 2 -o gpt.html\n"
      "  attn-trace explore data/the_cat_sat.json --backward -o cat-backward.html");
  return [cmd, c] { return cmd->parsed() ? run(*c) : -1; };
}

}  // namespace attn::cli
