// attn-trace decode FILE: attention at inference. The prompt runs as one causal pass that fills the KV cache;
// every later token is one row against it, traced step by step and checked against run's causal pass
// (docs/decode.md). The decode itself is request/decoding.hpp's.

#include <memory>

#include "attn/version.hpp"
#include "command.hpp"
#include "options.hpp"
#include "render/pages/report/report.hpp"
#include "request/decoding.hpp"
#include "trace/decode.hpp"

namespace attn::cli {

namespace {

struct DecodeCommand {
  DecodeOptions decode;
  std::string report;  // --report OUT: the HTML page too
};

int run_decode_command(DecodeCommand& command) {
  DecodeOptions& o = command.decode;
  check_decode_options(o);
  check_format(o.trace);
  if (command.report == "-" && (o.trace.json_out.empty() || o.trace.json_out == "-"))
    throw UsageError("--report -: the page and the text (or --json -) would both go to stdout; give --report a file");
  const Trace trace = decode_for(o, load_input(o.trace));
  if (!command.report.empty()) {
    ReportOptions report;
    report.version = attn::version;
    report.weight_scale = o.trace.weight_scale;
    write_result(command.report, report_html(trace, report));
  }
  emit(trace, o.trace, render_options(o.trace));
  return trace.decode->check.pass ? 0 : 1;
}

}  // namespace

Runner add_decode(CLI::App& app) {
  auto command = std::make_shared<DecodeCommand>();
  DecodeOptions* options = &command->decode;
  TraceOptions& t = options->trace;
  CLI::App* cmd = app.add_subcommand(
      "decode", "attention at inference: a KV cache filled token by token, flash-decoding, a paged cache");
  cmd->add_option("FILE", t.file, "a causal self-attention input (docs/input-format.md); - reads standard input")
      ->required();
  SharedOptions<DecodeOptions> shared(*cmd, *options, decode_options());
  for (const char* name : {"--prompt", "--split-kv", "--page-size", "--page-seed", "--layers", "--dtype"})
    shared.add(name);
  cmd->add_option("--json", t.json_out,
                  "also write the trace (docs/trace-format.md, with its `decode` object) to this file; - writes it "
                  "to stdout instead of the text")
      ->type_name("OUT");
  cmd->add_option("--report", command->report,
                  "also write one self-contained HTML page of the decode (the cache, each step's row, the chunks, "
                  "the block table, the check) to this file")
      ->type_name("OUT");
  shared.add("--max-memory");
  shared.all_placed();
  add_display_options(*cmd, t);
  cmd->footer(
      "Every decode step's output row is checked against the same row of run's causal pass on the whole\n"
      "input: unsplit it is the same bit for bit (the same sums in the same order); split, the merge sums\n"
      "in another order, and the whole output is judged by compare's rule with decode in flash's place:\n"
      "max|decode - ref| <= 2 * max|run - ref| + noise. Exit code 1 when it fails.\n"
      "\n"
      "Example:\n"
      "  attn-trace decode data/gpt_causal.json\n"
      "  attn-trace decode data/gpt_causal.json --split-kv 3\n"
      "  attn-trace decode data/gpt_causal.json --page-size 2 --json decode.json\n"
      "  attn-trace decode data/gpt_causal.json --split-kv 3 --report decode.html\n"
      "  attn-trace decode data/llama_layer.json --prompt 2 --layers 32");
  return [cmd, command] { return cmd->parsed() ? run_decode_command(*command) : -1; };
}

}  // namespace attn::cli
