// attn-trace run FILE: trace every step of the attention in FILE.

#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"
#include "options.hpp"
#include "render/terminal.hpp"
#include "trace/trace.hpp"

namespace attn::cli {

namespace {

template <class T>
Trace trace_engine(const std::shared_ptr<const Problem>& problem, const TraceOptions& o, const StepFilter& filter) {
  const FlashConfig blocks = flash_config(o, *problem);
  const auto flash = [&] {
    TraceCollector collector(problem, o.dtype, filter, FlashBlocks{blocks.Br, blocks.Bc});
    AttentionResult<T> result = run_flash<T>(*problem, collector, blocks);
    return std::move(collector).finish(std::move(result.empty_rows));
  };
  if (o.engine == "flash") return flash();

  TraceCollector collector(problem, o.dtype, filter);
  AttentionResult<T> result = run_naive<T>(*problem, collector);
  Trace trace = std::move(collector).finish(std::move(result.empty_rows));
  if (o.engine == "both") {
    trace.flash = flash().flash;
    trace.engine = "both";
  }
  return trace;
}

int run(const TraceOptions& o) {
  auto problem = std::make_shared<const Problem>(load_problem_file(o.file, memory_limit(o)));
  const StepFilter filter = trace_filter(o, *problem);
  if (o.dtype == "float32") check_float32_range(*problem, display_name(o.file));
  check_memory(o, *problem, filter, o.engine != "flash", o.engine != "naive");
  const Trace trace = o.dtype == "float64" ? trace_engine<double>(problem, o, filter) : trace_engine<float>(problem, o, filter);
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
      "  attn-trace run data/the_cat_sat.json --engine flash --block-q 2 --block-k 1\n"
      "  attn-trace run data/the_cat_sat.json --json trace.json\n"
      "  attn-trace example | attn-trace run -");
  add_trace_options(*cmd, *options);
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
