// attn-trace run FILE: trace every step of the attention in FILE.

#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"
#include "options.hpp"
#include "render/terminal.hpp"
#include "trace/trace.hpp"

namespace attn::cli {

namespace {

template <class T>
Trace trace_naive(std::shared_ptr<const Problem> problem, std::string dtype, StepFilter filter) {
  TraceCollector collector(problem, std::move(dtype), std::move(filter));
  AttentionResult<T> result = run_naive<T>(*problem, collector);
  return std::move(collector).finish(std::move(result.empty_rows));
}

int run(const TraceOptions& o) {
  auto problem = std::make_shared<const Problem>(load_problem_file(o.file));
  const StepFilter filter = trace_filter(o, *problem);
  if (o.dtype == "float32") check_float32_range(*problem, display_name(o.file));
  const Trace trace = o.dtype == "float64" ? trace_naive<double>(problem, o.dtype, filter)
                                           : trace_naive<float>(problem, o.dtype, filter);
  emit(trace, o);
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto options = std::make_shared<TraceOptions>();
  CLI::App* cmd = app.add_subcommand("run", "trace every step of the attention in FILE");
  cmd->footer(
      "Example:\n"
      "  attn-trace run data/the_cat_sat.json\n"
      "  attn-trace run my.json --steps scores,weights --head 1 --dtype float64\n"
      "  attn-trace run data/the_cat_sat.json --json trace.json\n"
      "  attn-trace example | attn-trace run -");
  add_trace_options(*cmd, *options);
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
