// attn-trace run FILE: trace every step of the attention in FILE.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "io/load.hpp"
#include "options.hpp"

namespace attn::cli {

namespace {

// The score steps that the flash engine never forms as whole matrices, among those --steps names (in
// trace order, as run_problem has checked every name).
std::vector<std::string> steps_flash_never_forms(const std::vector<std::string>& steps) {
  std::vector<std::string> names;
  for (const Step s : all_steps())
    if (is_score_step(s) && std::find(steps.begin(), steps.end(), step_info(s).name) != steps.end())
      names.emplace_back(step_info(s).name);
  return names;
}

int run(const TraceOptions& o) {
  if (o.engine == Engine::naive && (o.block_q || o.block_k))
    throw UsageError(
        fmt::format("--{}: tile sizes apply to the flash pass; add --engine flash or --engine both, or use "
                    "attn-trace compare",
                    o.block_q ? "block-q" : "block-k"));
  check_format(o);
  const Trace trace = run_problem(o, std::make_shared<const Problem>(load_problem_file(o.file, memory_limit(o))));

  RenderOptions render = render_options(o);
  if (const std::vector<std::string> never = steps_flash_never_forms(o.steps);
      o.engine == Engine::flash && !never.empty())
    render.notes.push_back(fmt::format("flash never forms the whole {} matrix: {}, or use --engine both",
                                       fmt::join(never, ", "),
                                       o.format ? "--format text shows its tiles" : "see its tiles below"));
  emit(trace, o, render);
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto options = std::make_shared<TraceOptions>();
  CLI::App* cmd = app.add_subcommand("run", "trace every step of the attention in FILE");
  cmd->footer(
      "Example:\n"
      "  attn-trace run data/the_cat_sat.json\n"
      "  attn-trace run data/gpt_causal.json --steps scores,weights --head 1 --dtype float64\n"
      "  attn-trace run data/the_cat_sat.json --engine flash --block-q 2 --block-k 1\n"
      "  attn-trace run data/the_cat_sat.json --json trace.json\n"
      "  attn-trace run data/the_cat_sat.json --steps weights --format markdown\n"
      "  attn-trace run data/gpt_causal.json --format csv > steps.csv\n"
      "  attn-trace example | attn-trace run -");
  add_run_options(*cmd, *options, /*with_engine=*/true);
  add_filter_options(*cmd, *options);
  add_memory_option(*cmd, *options);
  add_display_options(*cmd, *options);
  add_format_option(*cmd, *options);
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
