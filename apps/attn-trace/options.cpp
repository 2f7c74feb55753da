#include "options.hpp"

#include <cstdlib>
#include <unistd.h>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/atomic_file.hpp"
#include "io/json_pointer.hpp"
#include "io/trace_json.hpp"

namespace attn::cli {

void add_trace_options(CLI::App& command, TraceOptions& o, bool with_engine) {
  command.add_option("FILE", o.file, "the input JSON (input-format.md); - reads standard input")->required();
  if (with_engine)
    command.add_option("--engine", o.engine, "which computation to trace: naive (every step), flash (tile by tile "
                                           "with an online softmax), or both")
      ->check(CLI::IsMember({"naive", "flash", "both"}))
      ->default_str("naive");
  command.add_option("--dtype", o.dtype, "the arithmetic")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->default_str("float32");
  command.add_option("--block-q", o.block_q, "flash: query rows per tile (default about √n)")->check(CLI::Range(1, 1 << 20));
  command.add_option("--block-k", o.block_k, "flash: keys per tile (default about √m)")->check(CLI::Range(1, 1 << 20));
  command.add_option("--steps", o.steps, "only these steps, by trace name: q,k,v,q_heads,k_heads,v_heads,scores,"
                                         "scaled,masked,weights,head_outputs,concat,output")
      ->delimiter(',');
  command.add_option("--head", o.head, "only this query head (and the key/value head it reads)")
      ->check(CLI::Range(0, 65535));
  command.add_option("--json", o.json_out, "also write the trace (trace-format.md) to this file; - writes it to "
                                           "stdout instead of the text");
  add_display_options(command, o);
}

void add_display_options(CLI::App& command, TraceOptions& o) {
  command.add_option("--precision", o.precision, "digits after the point")->check(CLI::Range(0, 17))->default_str("4");
  command.add_option("--color", o.color, "colour: auto (only on a terminal, never with NO_COLOR set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
  command.add_option("--max-rows", o.max_rows, "show at most this many rows of a table (first and last); 0: all")
      ->default_str("16");
  command.add_option("--max-cols", o.max_cols, "show at most this many columns of a table (first and last); 0: all")
      ->default_str("10");
}

StepFilter trace_filter(const TraceOptions& options, const Problem& problem) {
  StepFilter filter;
  if (options.head && *options.head >= problem.h) {
    throw UsageError(problem.h == 1
                         ? fmt::format("--head {}: the input has one head, head 0", *options.head)
                         : fmt::format("--head {}: the input has {} heads, 0 to {}", *options.head, problem.h, problem.h - 1));
  }
  filter.head = options.head;
  for (const std::string& name : options.steps) {
    const std::optional<Step> step = step_from_name(name);
    if (!step) {
      std::vector<std::string_view> names;
      for (const Step s : all_steps()) names.push_back(step_info(s).name);
      const std::string near = nearest_word(name, names);
      throw UsageError(fmt::format("--steps: unknown step \"{}\"{}; the steps are {}", name,
                                   near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                   fmt::join(names, ",")));
    }
    filter.only.push_back(*step);
  }
  return filter;
}

FlashConfig flash_config(const TraceOptions& options, const Problem& problem) {
  FlashConfig config = default_blocks(problem.n, problem.m);
  if (options.block_q) config.Br = *options.block_q;
  if (options.block_k) config.Bc = *options.block_k;
  return config;
}

RenderOptions render_options(const TraceOptions& options) {
  RenderOptions r;
  r.precision = options.precision;
  r.color = use_color(options.color);
  r.max_rows = options.max_rows;
  r.max_cols = options.max_cols;
  r.version = attn::version;
  return r;
}

bool use_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return isatty(STDOUT_FILENO) != 0;
}

}  // namespace attn::cli

namespace attn::cli {

void emit(const Trace& trace, const TraceOptions& options, bool compare_only) {
  if (!options.json_out.empty()) {
    const std::string text = trace_to_json(trace, fmt::format("attn-trace {}", attn::version));
    if (options.json_out == "-") {
      fmt::print("{}", text);
      return;
    }
    write_file_atomically(options.json_out, text);
  }
  RenderOptions render = render_options(options);
  render.compare_only = compare_only;
  fmt::print("{}", render_trace(trace, render));
}

}  // namespace attn::cli
