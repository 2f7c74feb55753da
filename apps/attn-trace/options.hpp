#pragma once
// The options that every tracing command takes (cli.md), and their checks.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/problem.hpp"
#include "render/terminal.hpp"
#include "trace/trace.hpp"

namespace attn::cli {

struct TraceOptions {
  std::string file;
  std::string engine = "naive";
  std::string dtype = "float32";
  std::vector<std::string> steps;   // trace names; empty: all
  std::optional<std::size_t> head;
  int precision = 4;
  std::string color = "auto";
  std::size_t max_rows = 16;
  std::size_t max_cols = 10;
};

void add_trace_options(CLI::App& command, TraceOptions& options);

// --steps as Steps; an unknown name is a UsageError that suggests the nearest.
StepFilter step_filter(const TraceOptions& options);

// How the terminal trace should look, checked against the problem (--head must exist).
RenderOptions render_options(const TraceOptions& options, const Problem& problem, std::string engine);

// --color: auto means only on a terminal and never with NO_COLOR set.
bool use_color(const std::string& mode);

}  // namespace attn::cli
