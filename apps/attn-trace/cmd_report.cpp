// attn-trace report FILE: one self-contained HTML page of a trace (docs/report.md).

#include <memory>
#include <string>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "lessons/mistakes.hpp"
#include "options.hpp"
#include "request/memory.hpp"
#include "request/request.hpp"
#include "trace/record.hpp"
#include "render/pages/report/report.hpp"

namespace attn::cli {

namespace {

struct ReportCommand {
  TraceOptions trace;
  std::string out;      // -o: "" or "-" for stdout
  std::string mistake;  // --mistake NAME: the page opens with it
};

// A saved trace keeps the engine, dtype and tiles it was run with; asking for others is a mistake worth
// a line, not something to ignore. (A run of an input always matches what was asked.)
void check_saved_run(const CLI::App& cmd, const TraceOptions& o, const Trace& trace) {
  const auto given = [&](const char* name) { return cmd.get_option(name)->count() > 0; };
  const auto refuse = [&](std::string_view option, std::string_view saved) {
    throw UsageError(
        fmt::format("{}: {} is a saved trace, run with {}; run its input again to change it", option, o.file, saved));
  };
  if (given("--engine") && trace.engine != o.engine)
    refuse(fmt::format("--engine {}", name_of(o.engine)), fmt::format("--engine {}", name_of(trace.engine)));
  if (given("--dtype") && trace.dtype != o.dtype)
    refuse(fmt::format("--dtype {}", name_of(o.dtype)), fmt::format("--dtype {}", name_of(trace.dtype)));
  const auto tiles = [&](const char* option, const std::optional<std::size_t>& asked, bool rows) {
    if (!asked) return;
    if (!trace.flash) refuse(fmt::format("{} {}", option, *asked), "no flash pass");
    const std::size_t saved = rows ? trace.flash->tile_size.Br : trace.flash->tile_size.Bc;
    if (saved != *asked) refuse(fmt::format("{} {}", option, *asked), fmt::format("{} {}", option, saved));
  };
  tiles("--block-q", o.block_q, true);
  tiles("--block-k", o.block_k, false);
  // Dropout is part of the saved run, as its input records it.
  if (o.dropout || o.dropout_seed) {
    const std::optional<Dropout>& d = trace.problem->dropout;
    const bool same = (!o.dropout || (*o.dropout == 0 ? !d : d && d->p == *o.dropout)) &&
                      (!o.dropout_seed || (d && d->seed == *o.dropout_seed));
    if (!same)
      refuse(o.dropout ? fmt::format("--dropout {}", *o.dropout) : fmt::format("--dropout-seed {}", *o.dropout_seed),
             d ? fmt::format("dropout {} and seed {}", d->p, d->seed) : std::string("no dropout"));
  }
  // The backward pass is in the trace or not, with the dY it was run with.
  if (o.backward && !trace.backward) refuse("--backward", "no backward pass");
  if (o.grad_seed) {
    const Problem& p = *trace.problem;
    if (!trace.backward) refuse(fmt::format("--grad-seed {}", *o.grad_seed), "no backward pass");
    if (p.upstream != Upstream::seeded || p.grad_seed != *o.grad_seed)
      refuse(fmt::format("--grad-seed {}", *o.grad_seed),
             p.upstream == Upstream::seeded  ? fmt::format("--grad-seed {}", p.grad_seed)
             : p.upstream == Upstream::input ? std::string("the input's dY")
                                             : std::string("dY = 1"));
  }
}

int run(const CLI::App& cmd, const ReportCommand& c) {
  const TraceOptions& o = c.trace;
  check_tiles_need_flash(o);
  // An unknown mistake is refused before anything is read or run.
  std::optional<Mistake> which;
  if (!c.mistake.empty()) which = mistake_by_name(c.mistake);
  Trace trace = input_or_trace(o);
  check_saved_run(cmd, o, trace);
  add_verdict(trace, o);
  ReportOptions options;
  options.version = attn::version;
  options.weight_scale = o.weight_scale;
  std::optional<MistakeResult> mistake;
  if (which) {
    check_mistake_dtype(trace.dtype);  // a saved trace may hold a half run
    check_mistake_fits(*which, *trace.problem);
    mistake = run_mistake(trace.problem, *which, trace.dtype);
    options.mistake = &*mistake;
  }
  const std::string page = report_html(trace, options);
  write_result(c.out, page);
  return 0;
}

}  // namespace

Runner add_report(CLI::App& app) {
  auto c = std::make_shared<ReportCommand>();
  c->trace.engine = Engine::both;  // so that the page has the tile walk and naive vs flash
  CLI::App* cmd =
      app.add_subcommand("report", "one self-contained HTML page of every step, the tile walk and the verdict");
  add_run_options(*cmd, c->trace, /*with_engine=*/true, /*half=*/false);
  // The page is the output: run's --json has no place here, and FILE may also be a saved trace.
  cmd->remove_option(cmd->get_option("--json"));
  cmd->get_option("FILE")->description(
      "an input (docs/input-format.md) or a trace saved by run --json or compare --json; - reads standard input");
  cmd->get_option("--engine")->default_str("both");
  add_filter_options(*cmd, c->trace);
  add_backward_options(*cmd, c->trace);
  add_dropout_options(*cmd, c->trace);
  add_memory_option(*cmd, c->trace);
  add_color_scale_option(*cmd, c->trace.weight_scale);
  cmd->add_option("-o,--output", c->out, "write the page to this file; - (the default) writes it to stdout");
  add_mistake_option(*cmd, c->mistake,
                     "open the page with one of the common mistakes beside the intended computation (attn-trace run "
                     "--mistake list lists them)",
                     /*list=*/false);
  cmd->footer(
      "Example:\n"
      "  attn-trace report data/the_cat_sat.json -o cat.html\n"
      "  attn-trace report data/gpt_causal.json --block-q 2 --block-k 2 -o gpt.html\n"
      "  attn-trace run data/gqa.json --engine both --json gqa.json > /dev/null\n"
      "  attn-trace report gqa.json --head 1 -o gqa-head1.html\n"
      "  attn-trace report data/gpt_causal.json --mistake no-mask -o leak.html\n"
      "  attn-trace report data/the_cat_sat.json --backward -o cat-backward.html");
  return [cmd, c] { return cmd->parsed() ? run(*cmd, *c) : -1; };
}

}  // namespace attn::cli
