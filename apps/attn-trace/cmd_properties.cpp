// attn-trace properties FILE: the explainer's properties of attention, checked on the user's own input.

#include <cstdint>
#include <memory>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/load.hpp"
#include "io/output.hpp"
#include "io/properties_json.hpp"
#include "options.hpp"
#include "render/pages/properties_page.hpp"
#include "lessons/properties.hpp"

namespace attn::cli {

namespace {

struct PropertiesOptions {
  TraceOptions trace;  // FILE, --dtype, --json and --max-memory, as the other commands read them
  std::uint64_t seed = 0;
};

int run(const PropertiesOptions& o) {
  const TraceOptions& t = o.trace;
  auto problem = std::make_shared<const Problem>(load_problem_file(t.file, memory_limit(t)));
  StepFilter weights;
  weights.only = {Step::weights};
  weights.tiles = false;
  const RunRequest request = run_request(t, *problem, weights);
  check_range(*problem, display_name(t.file), t.dtype);
  check_memory(t, request, *problem, {.naive = true, .flash = true, .reference = true});

  const std::vector<PropertyCheck> checks =
      check_properties(problem, {.dtype = t.dtype, .tile_size = request.tile_size, .seed = o.seed});
  if (!t.json_out.empty())
    write_result(t.json_out, properties_to_json(checks, t.dtype, o.seed, fmt::format("attn-trace {}", version)));
  if (t.json_out != "-") {
    const std::string title =
        fmt::format("properties of {} ({}, permutation seed {})", display_name(t.file), name_of(t.dtype), o.seed);
    write_stdout(render_properties(checks, title, render_options(t)));
  }
  return all_expected_hold(checks) ? 0 : 1;
}

}  // namespace

Runner add_properties(CLI::App& app) {
  auto options = std::make_shared<PropertiesOptions>();
  TraceOptions& t = options->trace;
  CLI::App* cmd = app.add_subcommand(
      "properties", "check what attention promises on your input: rows sum to 1, equivariance, ... (exit 1: fail)");
  cmd->add_option("FILE", t.file, "the input JSON (docs/input-format.md); - reads standard input")->required();
  add_dtype_option(*cmd, t.dtype, /*half=*/false, "the arithmetic");
  cmd->add_option("--seed", options->seed, "the seed of the permutation of the tokens")->default_str("0");
  cmd->add_option("--json", t.json_out,
                  "also write the checks as JSON (format attn-trace.properties) to this file; - writes them to "
                  "stdout instead of the text");
  add_memory_option(*cmd, t);
  cmd->footer(
      "Runs the input (naive, flash and a wider reference, as compare does) and checks, in every batch item\n"
      "and head:\n"
      "  rows sum to 1             each query's weights, within (m + 2) * u of the dtype\n"
      "  columns sum to 1          not expected: softmax normalises rows; shown to say so\n"
      "  permutation equivariance  the tokens shuffled by --seed give the outputs shuffled the same way;\n"
      "                            not expected with a causal or sliding-window mask (they depend on\n"
      "                            positions)\n"
      "  masked keys get weight 0  exactly 0 wherever the mask forbids a key\n"
      "  flash equals naive        compare's verdict: max|flash - ref| <= 2 * max|naive - ref| + noise\n"
      "Each with its measured figure, tolerance and reason. Exit code 0 when every property expected to\n"
      "hold holds, 1 when one does not, 2 for input that cannot be used.\n"
      "\n"
      "Example:\n"
      "  attn-trace properties data/the_cat_sat.json\n"
      "  attn-trace properties data/gpt_causal.json --seed 7 --dtype float64\n"
      "  attn-trace example padded_batch | attn-trace properties - --json props.json");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
