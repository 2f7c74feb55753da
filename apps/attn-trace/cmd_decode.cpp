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

int run_decode_command(DecodeCommand& command, const CLI::App& cmd) {
  DecodeOptions& o = command.decode;
  if (cmd.count("--page-seed") != 0 && o.page_size == 0)
    throw UsageError("--page-seed: the pool's order needs a paged cache; add --page-size P");
  if (cmd.count("--split-kv") != 0) o.split_kv = at_least_one("--split-kv", o.split_kv);
  if (cmd.count("--page-size") != 0) o.page_size = at_least_one("--page-size", o.page_size);
  if (cmd.count("--layers") != 0) o.layers = at_least_one("--layers", *o.layers);
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
  cmd->add_option("--prompt", options->prompt,
                  "the first N tokens are the prompt, run as one causal pass (prefill); each later token is one "
                  "decode step (default: all but the last three)")
      ->type_name("N")
      ->check(whole_number);
  cmd->add_option("--split-kv", options->split_kv,
                  "flash-decoding: cut the cache into S chunks, each with its own softmax and log-sum-exp, merged "
                  "exactly")
      ->type_name("S")
      ->check(whole_number);
  cmd->add_option("--page-size", options->page_size,
                  "a paged cache: keys and values in pages of P tokens from one pool, through a block table")
      ->type_name("P")
      ->check(whole_number);
  cmd->add_option("--page-seed", options->page_seed, "the order in which the pool hands out its pages (default 0)")
      ->type_name("SEED")
      ->check(whole_number);
  cmd->add_option("--layers", options->layers, "the model's layer count: the cache's size for the whole model")
      ->type_name("N")
      ->check(whole_number);
  add_dtype_option(*cmd, t.dtype, /*half=*/true, "the arithmetic");
  cmd->add_option("--json", t.json_out,
                  "also write the trace (docs/trace-format.md, with its `decode` object) to this file; - writes it "
                  "to stdout instead of the text")
      ->type_name("OUT");
  cmd->add_option("--report", command->report,
                  "also write one self-contained HTML page of the decode (the cache, each step's row, the chunks, "
                  "the block table, the check) to this file")
      ->type_name("OUT");
  add_memory_option(*cmd, t);
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
  return [cmd, command] { return cmd->parsed() ? run_decode_command(*command, *cmd) : -1; };
}

}  // namespace attn::cli
