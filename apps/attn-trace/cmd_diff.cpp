// attn-trace diff FILE DUMPS: a user's dump of attention's steps judged step by step against ours, the
// first step that goes wrong, and which known mistake reproduces it (docs/diff.md). The judging is
// request/diffing.hpp's, which the Python module asks too; this reads the dumps from files.

#include <memory>
#include <optional>

#include "command.hpp"
#include "formats/dump_folder.hpp"
#include "io/read.hpp"
#include "options.hpp"
#include "render/pages/diff_page.hpp"
#include "request/diffing.hpp"
#include "request/memory.hpp"
#include "request/terminal_caps.hpp"

namespace attn::cli {

namespace {

struct DiffCommand {
  DiffOptions diff;              // FILE, --dtype, --max-memory, --precision, --color, --name, --grad-seed
  std::string dumps;             // DUMPS
  bool bfloat16 = false;         // --bfloat16
  CLI::Option* dtype = nullptr;  // to tell whether --dtype was given
};

int run(DiffCommand& o) {
  o.diff.dtype_given = o.dtype->count() > 0;
  const TraceOptions& t = o.diff.trace;
  const std::shared_ptr<const Problem> problem = diff_problem(o.diff, std::nullopt);
  const Diffed d = diff_for(o.diff, problem, read_dumps(o.dumps, o.bfloat16, memory_limit(t)), display_name(o.dumps));
  if (!t.json_out.empty()) write_result(t.json_out, d.json);
  if (t.json_out != "-") write_result("", render_diff(d.result, d.title, render_options(t)));
  return d.differs ? 1 : 0;
}

}  // namespace

Runner add_diff(CLI::App& app) {
  auto options = std::make_shared<DiffCommand>();
  TraceOptions& t = options->diff.trace;
  CLI::App* cmd = app.add_subcommand(
      "diff", "check your own attention's dumped steps against ours: the first step that goes wrong, and why");
  cmd->add_option("FILE", t.file, "the input JSON (docs/input-format.md), or a trace saved by --json")->required();
  cmd->add_option("DUMPS", options->dumps,
                  "a folder of <step>.npy or <step>.json files, or one .safetensors file whose tensors are named "
                  "by step: forward steps, gradients (d_q, d_W_q, …) or their PyTorch-style names (grad_q, q.grad)")
      ->required();
  cmd->add_option("--name", options->diff.names,
                  "STEP=NAME: the dump calls step STEP NAME (--name weights=attn_probs, --name d_q=my_dq); may be "
                  "repeated")
      ->type_name("STEP=NAME");
  SharedOptions<DiffOptions> shared(*cmd, options->diff, diff_options());
  options->dtype = shared.add("--dtype");
  cmd->add_flag("--bfloat16", options->bfloat16,
                "read .npy files of 16-bit integers as bfloat16 bits (as does a name ending in .bf16.npy)");
  cmd->add_option("--json", t.json_out,
                  "also write the findings as JSON (format attn-trace.diff) to this file; - writes them to stdout "
                  "instead of the text")
      ->type_name("OUT");
  shared.add("--grad-seed");
  shared.add("--max-memory");
  shared.all_placed();
  cmd->add_option("--precision", t.precision, "digits after the point")->check(CLI::Range(0, 17))->default_str("4");
  add_color_option(*cmd, t);
  cmd->footer(
      "Dumped gradients (d_output … d_b_o, or grad_q, q.grad, dq, …) are judged after the forward steps, in the "
      "backward's order, with dY from the input, --grad-seed, the dump's d_output, or 1 everywhere.\n"
      "\n"
      "Exit status: 0 every dumped step agrees, 1 a step differs, 2 bad input.\n"
      "\n"
      "Examples:\n"
      "  attn-trace diff input.json dumps/\n"
      "  attn-trace diff input.json model.safetensors --name weights=attn_probs --name output=attn_out\n"
      "  attn-trace diff input.json dumps/ --json findings.json\n"
      "  attn-trace diff input.json grads/ --grad-seed 7 --name d_q=my_dq");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
