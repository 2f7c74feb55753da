#pragma once
// The options that every tracing command takes (cli.md), and their checks.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/flash.hpp"
#include "io/read.hpp"
#include "model/problem.hpp"
#include "render/terminal.hpp"
#include "trace/trace.hpp"

namespace attn::cli {

struct TraceOptions {
  std::string file;
  std::string engine = "naive";
  std::string dtype = "float32";
  std::optional<std::size_t> block_q;  // flash tile sizes; default: engine's default_blocks
  std::optional<std::size_t> block_k;
  std::vector<std::string> steps;   // trace names; empty: all
  std::optional<std::size_t> head;
  int precision = 4;
  std::string color = "auto";
  std::size_t max_rows = 16;
  std::size_t max_cols = 10;
  std::string json_out;             // --json: "" none, "-" stdout instead of the text
  std::string max_memory = "4G";    // refuse runs estimated to need more
};

// The options of every tracing command; `display_only` for commands that print a saved trace.
void add_trace_options(CLI::App& command, TraceOptions& options, bool with_engine = true);
void add_display_options(CLI::App& command, TraceOptions& options);
void add_memory_option(CLI::App& command, TraceOptions& options);

// --max-memory as a limit, or a UsageError when it is not a size.
MemoryLimit memory_limit(const TraceOptions& options);

// The finished trace where --json sends it, and the text to stdout unless --json is "-".
void emit(const Trace& trace, const TraceOptions& options, bool compare_only = false);

// --steps and --head, checked against the problem: an unknown step name (the nearest is suggested)
// or a head the input does not have is a UsageError.
StepFilter trace_filter(const TraceOptions& options, const Problem& problem);

// The flash tile sizes: --block-q/--block-k, or the defaults for this problem's lengths.
FlashConfig flash_config(const TraceOptions& options, const Problem& problem);

// Refuses (InputError, exit 2) a run whose estimated memory is over --max-memory, before anything
// is allocated, saying whether the flash engine would fit.
// `reference`: compare's wider naive reference runs too.
void check_memory(const TraceOptions& options, const Problem& problem, const StepFilter& filter, bool naive, bool flash,
                  bool reference = false);

// How the terminal trace should look.
RenderOptions render_options(const TraceOptions& options);

// --color: auto means only on a terminal and never with NO_COLOR set.
bool use_color(const std::string& mode);

}  // namespace attn::cli
