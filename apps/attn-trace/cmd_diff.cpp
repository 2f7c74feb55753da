// attn-trace diff FILE DUMPS: a user's dump of attention's steps judged step by step against ours, the
// first step that goes wrong, and which known mistake reproduces it (docs/diff.md).

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attn/version.hpp"
#include "check/diff.hpp"
#include "command.hpp"
#include "formats/dump_folder.hpp"
#include "formats/dumped_steps.hpp"
#include "io/diff_json.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "options.hpp"
#include "render/pages/diff_page.hpp"
#include "render/draw/visible.hpp"
#include "trace/record.hpp"
#include "text/number.hpp"

namespace attn::cli {

namespace {

struct DiffOptions {
  TraceOptions trace;                      // FILE, --dtype, --json, --max-memory, --precision, --color
  std::string dumps;                       // DUMPS
  std::vector<std::string> names;          // --name STEP=NAME
  bool bfloat16 = false;                   // --bfloat16
  std::optional<std::uint64_t> grad_seed;  // --grad-seed: dY drawn as run --backward --grad-seed draws it
  CLI::Option* dtype = nullptr;            // to tell whether --dtype was given
};

// --name STEP=NAME, as a map from the dump's name to the step.
std::map<std::string, Step> name_map(const std::vector<std::string>& names) {
  std::map<std::string, Step> map;
  for (const std::string& pair : names) {
    const std::size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      throw UsageError(fmt::format("--name {}: write STEP=NAME, as in --name weights=attn_probs", pair));
    const Step step = step_by_name("--name", pair.substr(0, eq));
    if (!map.emplace(pair.substr(eq + 1), step).second)
      throw UsageError(fmt::format("--name {}: the name {} is given twice", pair, pair.substr(eq + 1)));
  }
  return map;
}

// The problem of FILE: an input, or the input a saved trace holds.
std::shared_ptr<const Problem> problem_of(const TraceOptions& t) {
  const std::string text = read_text(t.file, memory_limit(t));
  if (looks_like_trace(text)) return trace_from_json(text, display_name(t.file)).problem;
  return std::make_shared<const Problem>(load_problem(text, display_name(t.file)));
}

// Refuses (InputError) a diff whose values would not fit --max-memory. Every step is held for three
// computations at once (from the input, from the dump, one mistake at a time), each as its float64
// value, what the next step started from and its value in the dtype (9 copies), with the dtype's run
// while it is made (a float32 run: 1 more) and the dump's values as read and as given (2 more): 12.
void check_diff_memory(const TraceOptions& t, const Problem& p, bool gradients = false) {
  constexpr std::size_t copies = 12;
  std::size_t values = 0;
  for (const Step s : steps_of(p)) values += element_count(canonical_shape(s, p));
  if (gradients)
    for (const Step s : gradient_steps_of(p)) values += element_count(canonical_shape(s, p));
  const std::size_t bytes = values * sizeof(double) * copies;
  const MemoryLimit limit = memory_limit(t);
  if (bytes / copies != values * sizeof(double) || bytes > limit.bytes)
    throw InputError(display_name(t.file), "",
                     fmt::format("diff holds every step about {} times over ({}), over --max-memory {}", copies,
                                 describe_bytes(bytes), limit.text));
}

int run(const DiffOptions& o) {
  const TraceOptions& t = o.trace;
  const std::map<std::string, Step> names = name_map(o.names);
  std::shared_ptr<const Problem> problem = problem_of(t);
  if (o.grad_seed) problem = std::make_shared<const Problem>(with_grad_seed(*problem, *o.grad_seed));
  const Problem& p = *problem;
  check_diff_memory(t, p);

  Dumped dumped = dumped_steps(p, read_dumps(o.dumps, o.bfloat16, memory_limit(t)), names, display_name(o.dumps),
                               display_name(t.file));
  const bool gradients = dumped.gradients;
  if (gradients) check_diff_memory(t, p, true);  // the backward's steps are held as the forward's are
  const DType dtype = o.dtype->count() > 0 ? t.dtype : dumped.least;
  check_range(p, display_name(t.file), dtype);

  const DiffResult result = diff_dump(p, dumped.steps, dtype);
  if (!t.json_out.empty())
    write_result(t.json_out, diff_to_json(result, fmt::format("attn-trace {}", version), display_name(t.file),
                                          display_name(o.dumps)));
  if (t.json_out != "-")
    write_result("", render_diff(result, fmt::format("{} against {}", display_name(t.file), display_name(o.dumps)),
                                 render_options(t)));
  return result.first ? 1 : 0;
}

}  // namespace

Runner add_diff(CLI::App& app) {
  auto options = std::make_shared<DiffOptions>();
  TraceOptions& t = options->trace;
  CLI::App* cmd = app.add_subcommand(
      "diff", "check your own attention's dumped steps against ours: the first step that goes wrong, and why");
  cmd->add_option("FILE", t.file, "the input JSON (docs/input-format.md), or a trace saved by --json")->required();
  cmd->add_option("DUMPS", options->dumps,
                  "a folder of <step>.npy or <step>.json files, or one .safetensors file whose tensors are named "
                  "by step: forward steps, gradients (d_q, d_W_q, …) or their PyTorch-style names (grad_q, q.grad)")
      ->required();
  cmd->add_option("--name", options->names,
                  "STEP=NAME: the dump calls step STEP NAME (--name weights=attn_probs, --name d_q=my_dq); may be "
                  "repeated")
      ->type_name("STEP=NAME");
  options->dtype = add_dtype_option(*cmd, t.dtype, /*half=*/true, "compute ours in this dtype")
                       ->default_str("the dump's: the least precise of its files");
  cmd->add_flag("--bfloat16", options->bfloat16,
                "read .npy files of 16-bit integers as bfloat16 bits (as does a name ending in .bf16.npy)");
  cmd->add_option("--json", t.json_out,
                  "also write the findings as JSON (format attn-trace.diff) to this file; - writes them to stdout "
                  "instead of the text")
      ->type_name("OUT");
  cmd->add_option("--grad-seed", options->grad_seed,
                  "for dumped gradients: dY drawn from a standard normal with this seed, as run --backward "
                  "--grad-seed draws it, in place of the input's dY (or of the dump's d_output, or 1 everywhere)")
      ->check(whole_number);
  add_memory_option(*cmd, t);
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
