// attn-trace show TRACE.json: print a saved trace again, as `run` printed it.

#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "options.hpp"

namespace attn::cli {

namespace {

int run(const TraceOptions& o) {
  Trace trace = trace_from_json(read_text(o.file, memory_limit(o)), display_name(o.file));
  if (!o.steps.empty() || o.head) {
    if (o.head && trace.head && *o.head != *trace.head)
      throw UsageError(fmt::format("--head {}: this trace holds head {} only (it was saved with --head {})", *o.head,
                                   *trace.head, *trace.head));
    const StepFilter filter = trace_filter(o, *trace.problem, trace.flash.has_value());
    trace = keep_only(std::move(trace), filter);
  }
  emit(trace, o, render_options(o));
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
  cmd->footer(
      "Example:\n"
      "  attn-trace run data/the_cat_sat.json --json cat.json > /dev/null\n"
      "  attn-trace show cat.json\n"
      "  attn-trace show cat.json --steps weights");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
