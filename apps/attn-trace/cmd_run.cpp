// attn-trace run FILE: trace every step of the attention in FILE.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/load.hpp"
#include "io/mistake_json.hpp"
#include "io/output.hpp"
#include "lessons/mistakes.hpp"
#include "options.hpp"
#include "render/pages/trace/mistake_section.hpp"

namespace attn::cli {

namespace {

// The score steps that the flash engine never forms as whole matrices, among those --steps names (in
// trace order, as run_problem has checked every name).
std::vector<std::string> steps_flash_never_forms(const std::vector<std::string>& steps) {
  std::vector<std::string> names;
  const auto named = [&](Step s) {
    if (is_score_step(s) && std::find(steps.begin(), steps.end(), step_info(s).name) != steps.end())
      names.emplace_back(step_info(s).name);
  };
  for (const Step s : all_steps()) named(s);
  for (const Step s : gradient_steps()) named(s);
  return names;
}

struct RunOptions {
  TraceOptions trace;
  std::string mistake;  // --mistake NAME, or "list"
};

// run --mistake NAME: the intended naive computation beside the mistaken one; --steps shows those steps
// side by side, --head that head. The options that choose an engine or its tiles have no meaning here
// and are refused.
int run_with_mistake(const TraceOptions& o, const std::string& name, const CLI::App& cmd) {
  const Mistake mistake = mistake_by_name(name);
  for (const char* option : {"--engine", "--block-q", "--block-k", "--format", "--backward", "--grad-seed"})
    if (cmd.count(option) != 0)
      throw UsageError(
          fmt::format("{}: --mistake compares every step of the naive computation; leave {} out", option, option));
  if (std::find(o.steps.begin(), o.steps.end(), "tiles") != o.steps.end())
    throw UsageError("--steps tiles: --mistake runs the naive computation, which has no tiles");
  check_mistake_dtype(o.dtype);
  const std::shared_ptr<const Problem> problem = as_run(o, load_problem_file(o.file, memory_limit(o)));
  const StepFilter filter = trace_filter(o, *problem, /*has_tiles=*/false);
  check_mistake_fits(mistake, *problem);
  check_range(*problem, display_name(o.file), o.dtype);
  // Two naive runs that keep every step, held at once.
  check_memory(o, run_request(o, *problem, {}), *problem, {.naive = true, .flash = false, .runs = 2});
  MistakeResult result = run_mistake(problem, mistake, o.dtype);
  if (!filter.only.empty() || filter.head) result = focus_mistake(std::move(result), filter);
  if (!o.json_out.empty()) write_result(o.json_out, mistake_to_json(result, fmt::format("attn-trace {}", version)));
  if (o.json_out != "-") write_stdout(render_mistake(result, render_options(o)));
  return 0;
}

int run(const TraceOptions& o) {
  check_tiles_need_flash(o);
  check_format(o);
  const Trace trace = run_problem(o, load_input(o));

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
  auto all = std::make_shared<RunOptions>();
  TraceOptions* options = &all->trace;
  CLI::App* cmd = app.add_subcommand("run", "trace every step of the attention in FILE");
  cmd->footer(
      "Example:\n"
      "  attn-trace run data/the_cat_sat.json\n"
      "  attn-trace run data/gpt_causal.json --steps scores,weights --head 1 --dtype float64\n"
      "  attn-trace run data/the_cat_sat.json --engine flash --block-q 2 --block-k 1\n"
      "  attn-trace run data/the_cat_sat.json --json trace.json\n"
      "  attn-trace run data/the_cat_sat.json --backward\n"
      "  attn-trace run data/gqa.json --backward --engine flash --grad-seed 7 --steps d_q,d_W_q\n"
      "  attn-trace run data/the_cat_sat.json --steps weights --format markdown\n"
      "  attn-trace run data/gpt_causal.json --format csv > steps.csv\n"
      "  attn-trace example | attn-trace run -\n"
      "  attn-trace run data/gpt_causal.json --mistake no-mask\n"
      "  attn-trace run --mistake list");
  add_run_options(*cmd, *options, /*with_engine=*/true, /*half=*/true);
  // FILE may be left out for --mistake list alone; run() asks for it otherwise.
  cmd->get_option("FILE")->required(false);
  add_filter_options(*cmd, *options);
  add_memory_option(*cmd, *options);
  add_display_options(*cmd, *options);
  add_format_option(*cmd, *options);
  add_backward_options(*cmd, *options);
  add_dropout_options(*cmd, *options);
  check_declared(*cmd, run_options());
  add_mistake_option(*cmd, all->mistake,
                     "make one of the common mistakes on purpose and show what it changes, step by step, and what it "
                     "costs; --mistake list lists them",
                     /*list=*/true);
  return [cmd, all] {
    if (!cmd->parsed()) return -1;
    const TraceOptions& o = all->trace;
    if (all->mistake == "list") {
      write_stdout(render_mistake_list(render_options(o)));
      return 0;
    }
    if (o.file.empty()) throw UsageError("FILE is required: the input JSON to trace (attn-trace run --help)");
    return all->mistake.empty() ? run(o) : run_with_mistake(o, all->mistake, *cmd);
  };
}

}  // namespace attn::cli
