// attn-trace show TRACE.json: print a saved trace again, as `run` printed it.

#include <memory>

#include "command.hpp"
#include "io/load.hpp"
#include "options.hpp"

namespace attn::cli {

namespace {

int run_show(const TraceOptions& o) {
  emit(saved_trace(o, read_text(o.file, memory_limit(o))), o, render_options(o));
  return 0;
}

}  // namespace

Runner add_show(CLI::App& app) {
  auto options = std::make_shared<TraceOptions>();
  CLI::App* cmd = app.add_subcommand("show", "print a saved trace (from run --json) again, as run printed it");
  cmd->add_option("TRACE", options->file, "a trace file written by --json; - reads standard input")->required();
  add_filter_options(*cmd, *options);
  add_memory_option(*cmd, *options);
  add_display_options(*cmd, *options);
  add_format_option(*cmd, *options);
  cmd->footer(
      "Example:\n"
      "  attn-trace run data/the_cat_sat.json --json cat.json > /dev/null\n"
      "  attn-trace show cat.json\n"
      "  attn-trace show cat.json --steps weights\n"
      "  attn-trace show cat.json --steps weights --format latex");
  return [cmd, options] { return cmd->parsed() ? run_show(*options) : -1; };
}

}  // namespace attn::cli
