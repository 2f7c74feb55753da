// attn-trace compare FILE: naive vs flash vs a wider reference, with a verdict.

#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "io/load.hpp"
#include "options.hpp"
#include "trace/record.hpp"

namespace attn::cli {

namespace {

int run_compare(const TraceOptions& o) {
  const std::shared_ptr<const Problem> problem = load_input(o);
  // With --steps or --head the terminal shows those steps (and tiles) before the comparison; without
  // them it shows the comparison alone, so no step is kept unless --json saves them.
  const bool show_steps = !o.steps.empty() || o.head.has_value();
  StepFilter filter = trace_filter(o, *problem, /*has_tiles=*/true);
  if (!show_steps && o.json_out.empty()) {
    filter.only = {Step::output};
    filter.none = false;
    filter.tiles = false;
  }
  const RunRequest request = run_request(o, *problem, filter);
  check_range(*problem, display_name(o.file), o.dtype);
  check_memory(o, request, *problem, {.naive = true, .flash = true, .reference = true});
  const Trace trace = record_compare(problem, request);
  RenderOptions render = render_options(o);
  render.compare_only = !show_steps;
  emit(trace, o, render);
  return passes(*trace.compare) ? 0 : 1;
}

}  // namespace

Runner add_compare(CLI::App& app) {
  auto options = std::make_shared<TraceOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "naive vs flash vs a wider reference, with a verdict (exit 1: fail)");
  add_run_options(*cmd, *options, /*with_engine=*/false, /*half=*/true);
  add_filter_options(*cmd, *options);
  add_memory_option(*cmd, *options);
  add_display_options(*cmd, *options);
  add_backward_options(*cmd, *options);
  add_dropout_options(*cmd, *options);
  check_declared(*cmd, compare_options());
  cmd->footer(
      "Runs naive and flash attention in --dtype, and naive attention one precision up (float64 for float32,\n"
      "float16 and bfloat16; 80-bit long double for float64) on the same rounded inputs as the reference; it\n"
      "prints both outputs, their errors, the memory each engine held for scores, and the verdict of\n"
      "max|flash - ref| <= 2 * max|naive - ref| + noise. Exit code 1 when flash fails it.\n"
      "With --steps or --head it first prints those steps (and the flash tiles), as run does.\n"
      "In float16 or bfloat16 both engines store every step in it and sum in float32, and errors are\n"
      "counted in its ULPs (docs/precision.md).\n"
      "With --backward both engines run their backward pass too (flash: FlashAttention-2's, tile by tile), and\n"
      "every gradient is judged by the same kind of rule, its noise floor growing with the logits\n"
      "(docs/backward.md).\n"
      "\n"
      "Example:\n"
      "  attn-trace compare data/the_cat_sat.json\n"
      "  attn-trace compare data/gqa.json --block-q 3 --block-k 2 --json gqa-compare.json\n"
      "  attn-trace compare data/gqa.json --steps weights,tiles --head 1\n"
      "  attn-trace compare docs/examples/large_scores.json --dtype float16\n"
      "  attn-trace compare data/gqa.json --backward");
  return [cmd, options] { return cmd->parsed() ? run_compare(*options) : -1; };
}

}  // namespace attn::cli
