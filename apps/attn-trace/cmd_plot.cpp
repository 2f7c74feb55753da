// attn-trace plot FILE: one traced step as a standalone SVG figure.

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "options.hpp"
#include "render/pages/svg.hpp"

namespace attn::cli {

namespace {

struct PlotCommand {
  TraceOptions trace;  // FILE, --engine, --dtype, --max-memory, and --head
  std::string step = "weights";
  bool all_heads = false;
  std::size_t batch = 0;
  std::string out;  // "" or "-": stdout
  std::size_t max_cells = 128;
};

// What can be told from the command line alone, before anything is read or run.
void check_request(const PlotCommand& c, Step step) {
  const std::string_view name = step_info(step).name;
  if ((c.trace.head || c.all_heads) && !has_head_axis(step))
    throw UsageError(
        fmt::format("{}: the {} step has no head axis (it holds every head at once); the steps drawn head by "
                    "head are q_heads, k_heads, v_heads, q_rot, k_rot, scores, scaled, bias, masked, weights and "
                    "head_outputs",
                    c.trace.head ? "--head" : "--all-heads", name));
  if (c.trace.engine == Engine::flash && is_score_step(step))
    throw UsageError(
        fmt::format("--step {}: the flash engine never forms the whole {} matrix; use --engine naive (the "
                    "default) or --engine both",
                    name, name));
}

// The record of `step` in `trace`, checked against --batch and drawable as matrices, or a UsageError
// that says how to get a figure.
const StepRecord& drawable_record(const Trace& trace, Step step, std::size_t batch) {
  const std::string_view name = step_info(step).name;
  const StepRecord* rec = nullptr;
  for (const StepRecord& r : trace.steps)
    if (r.step == step) rec = &r;
  if (rec == nullptr && trace.engine == Engine::flash)
    throw UsageError(
        fmt::format("--step {}: this trace was made by the flash engine, which never forms the whole {} "
                    "matrix; plot the input with --engine naive (the default) or both",
                    name, name));
  if (rec == nullptr)
    throw UsageError(
        fmt::format("--step {}: this trace does not hold the {} step (it was saved with --steps); plot the "
                    "input, or a trace saved without --steps",
                    name, name));
  const Problem& p = *trace.problem;
  const std::size_t items = p.batched ? p.B : 1;
  if (batch >= items)
    throw UsageError(items == 1
                         ? fmt::format("--batch {}: the input is one sequence, batch 0", batch)
                         : fmt::format("--batch {}: the input has {} batch items, 0 to {}", batch, items, items - 1));
  // Every step of docs/trace-format.md is a matrix for each batch item and head; anything else (from a
  // later format, say) is refused rather than drawn wrong.
  const std::size_t outer = (p.batched ? 1 : 0) + (has_head_axis(step) ? 1 : 0);
  if (rec->value.rank() != outer + 2)
    throw UsageError(
        fmt::format("--step {}: its values have {} axes, {} for each batch item and head; plot draws "
                    "matrices (2)",
                    name, rec->value.rank(), rec->value.rank() - std::min(outer, rec->value.rank())));
  return *rec;
}

int run(PlotCommand& c) {
  const Step step = step_by_name("--step", c.step);
  if (c.trace.grad_seed && !is_gradient_step(step))
    throw UsageError(
        fmt::format("--grad-seed: it draws dY for a gradient's --step (d_weights, d_W_q, …), and {} is "
                    "a forward step",
                    c.step));
  c.trace.backward = is_gradient_step(step);  // a gradient is drawn from a run of the backward pass
  check_request(c, step);
  c.trace.steps = {c.step};  // an input runs, and a saved trace keeps, the step drawn and no other
  const Trace trace = input_or_trace(c.trace);
  const StepRecord& rec = drawable_record(trace, step, c.batch);
  const PlotOptions options{step, c.trace.head, c.all_heads, c.batch, c.trace.weight_scale, c.max_cells};
  const std::string svg = render_svg(trace, options);
  write_result(c.out, svg);
  // A pooled figure says so where the user looks, not only inside the file.
  const Shape& shape = rec.value.shape();
  const std::size_t rows = shape[shape.size() - 2], cols = shape.back();
  if (const std::size_t pool = pool_factor(rows, cols, c.max_cells); pool > 1)
    fmt::print(stderr,
               "plot: {} × {} cells drawn pooled, each the mean of a {} × {} block (at most {} × {}); "
               "--max-cells 0 draws every cell\n",
               rows, cols, pool, pool, c.max_cells, c.max_cells);
  return 0;
}

}  // namespace

Runner add_plot(CLI::App& app) {
  auto c = std::make_shared<PlotCommand>();
  TraceOptions& o = c->trace;
  CLI::App* cmd = app.add_subcommand("plot", "draw one traced step as a standalone SVG figure");
  cmd->add_option("FILE", o.file, "an input (docs/input-format.md), or a trace saved by run --json; - reads stdin")
      ->required();
  cmd->add_option("--step", c->step,
                  "the step to draw, by trace name: q,k,v,q_heads,k_heads,v_heads,q_rot,k_rot (rope),scores,scaled,"
                  "bias (alibi),masked,weights,head_outputs,concat,output, or a gradient of the backward pass: "
                  "d_weights, d_scores, d_W_q, … (attn-trace steps lists them)")
      ->default_str("weights");
  CLI::Option* head =
      cmd->add_option("--head", o.head, "draw query head H (for k_heads and v_heads: the key/value head it reads)")
          ->check(CLI::Range(0, 65535))
          ->default_str("0");
  cmd->add_flag("--all-heads", c->all_heads, "draw every head, one panel each in a grid with one colour bar")
      ->excludes(head);
  cmd->add_option("--batch", c->batch, "the batch item to draw")->check(CLI::Range(0, 1 << 30))->default_str("0");
  cmd->add_option("-o,--output", c->out, "write the SVG to this file; - (or no -o) writes it to stdout");
  cmd->add_option_function<std::string>(
         "--engine", [&o](const std::string& name) { o.engine = *engine_from_name(name); },
         "an input's computation: naive, or both; flash never forms scores, scaled, masked or weights")
      ->check(CLI::IsMember({"naive", "flash", "both"}))
      ->default_str("naive");
  add_dtype_option(*cmd, o.dtype, /*half=*/false, "an input's arithmetic");
  cmd->add_option("--grad-seed", o.grad_seed,
                  "for a gradient's --step: draw dY from a standard normal with this seed, in place of the input's "
                  "dY (or of 1 everywhere)")
      ->check(whole_number);
  add_color_scale_option(*cmd, o.weight_scale);
  cmd->add_option("--max-cells", c->max_cells,
                  "draw at most this many cells a side, each the mean of a square block of what the mask kept; 0: "
                  "every cell")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20))
      ->default_str("128");
  add_memory_option(*cmd, o);
  cmd->footer(
      "Draws one step of FILE for one batch item: one head (head 0, or the head a trace saved with --head\n"
      "holds, unless --head says), or every head with --all-heads. Values that are all >= 0 are coloured\n"
      "with viridis, signed values blue-white-red around 0; cells the mask removed are grey and hatched.\n"
      "Each cell's <rect> carries its exact value as data-value.\n"
      "\n"
      "Example:\n"
      "  attn-trace plot data/the_cat_sat.json -o weights.svg\n"
      "  attn-trace plot data/gpt_causal.json --step scores --head 1 -o scores.svg\n"
      "  attn-trace plot data/gqa.json --all-heads -o heads.svg\n"
      "  attn-trace plot data/gqa.json --step d_scores --grad-seed 1 --all-heads -o d_scores.svg\n"
      "  attn-trace plot data/padded_batch.json --step masked --batch 1 > masked.svg\n"
      "  attn-trace run data/gpt_causal.json --json gpt.json > /dev/null && attn-trace plot gpt.json");
  return [cmd, c] { return cmd->parsed() ? run(*c) : -1; };
}

}  // namespace attn::cli
