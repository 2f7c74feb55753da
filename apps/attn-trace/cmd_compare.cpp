// attn-trace compare FILE: naive vs flash vs a float64 reference, with a verdict.

#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "engine/compare.hpp"
#include "io/load.hpp"
#include "options.hpp"
#include "trace/trace.hpp"

namespace attn::cli {

namespace {

template <class T>
Trace compare(const std::shared_ptr<const Problem>& problem, const TraceOptions& o, const StepFilter& filter) {
  const FlashConfig blocks = flash_config(o, *problem);
  TraceCollector naive(problem, o.dtype, filter);
  TraceCollector flash(problem, o.dtype, filter, FlashBlocks{blocks.Br, blocks.Bc});
  CompareRecord record = compare_engines<T>(*problem, blocks, naive, flash);
  Trace trace = std::move(naive).finish(find_empty_rows(*problem));
  trace.flash = std::move(flash).finish({}).flash;
  trace.engine = "both";
  trace.compare = std::move(record);
  return trace;
}

int run(const TraceOptions& o) {
  auto problem = std::make_shared<const Problem>(load_problem_file(o.file, memory_limit(o)));
  StepFilter filter = trace_filter(o, *problem);
  if (o.json_out.empty()) {  // only the comparison is printed: keep no steps and no tiles
    filter.only = {Step::output};
    filter.none = false;
    filter.tiles = false;
  }
  if (o.dtype == "float32") check_float32_range(*problem, display_name(o.file));
  check_memory(o, *problem, filter, true, true, /*reference=*/true);
  const Trace trace = o.dtype == "float64" ? compare<double>(problem, o, filter) : compare<float>(problem, o, filter);
  emit(trace, o, /*compare_only=*/true);
  return trace.compare->pass ? 0 : 1;
}

}  // namespace

Runner add_compare(CLI::App& app) {
  auto options = std::make_shared<TraceOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "naive vs flash vs a wider reference, with a verdict (exit 1: fail)");
  add_trace_options(*cmd, *options, /*with_engine=*/false);
  cmd->footer(
      "Runs naive and flash attention in --dtype, and naive attention one precision up (float64 for float32,\n"
      "80-bit long double for float64) on the same rounded inputs as the reference; it\n"
      "prints both outputs, their errors, the memory each engine held for scores, and the verdict of\n"
      "max|flash - ref| <= 2 * max|naive - ref| + noise. Exit code 1 when flash fails it.\n"
      "\n"
      "Example:\n"
      "  attn-trace compare data/the_cat_sat.json\n"
      "  attn-trace compare data/gqa.json --block-q 3 --block-k 2 --json gqa-compare.json");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
