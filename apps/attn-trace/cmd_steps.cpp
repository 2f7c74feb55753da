// attn-trace steps: the steps of attention, in pipeline order, from the one table that traces, diff,
// explain and the pictures read (docs/cli.md, "steps").

#include <memory>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/output.hpp"
#include "io/trace_json.hpp"
#include "options.hpp"
#include "render/pages/steps_page.hpp"
#include "render/draw/text.hpp"

namespace attn::cli {

namespace {

struct StepsOptions {
  bool names = false;
  bool json = false;
};

int run(const StepsOptions& o) {
  if (o.names && o.json) throw UsageError("steps: --names and --json each print the list: choose one");
  if (o.json) write_stdout(steps_to_json(fmt::format("attn-trace {}", version)));
  else if (o.names) write_stdout(step_names_text());
  else write_stdout(steps_text(terminal_width(), !utf8_terminal()));
  return 0;
}

}  // namespace

Runner add_steps(CLI::App& app) {
  auto options = std::make_shared<StepsOptions>();
  CLI::App* cmd = app.add_subcommand("steps", "list the steps of attention: names, axes, what each reads, formulas");
  cmd->add_flag("--names", options->names, "print only the names, one to a line (for scripts)");
  cmd->add_flag("--json", options->json, "print the table as JSON (docs/trace-format.md, \"The steps\")");
  cmd->footer(
      "Example:\n"
      "  attn-trace steps                       the pipeline, step by step\n"
      "  attn-trace steps --names               the names that --steps takes");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
