#pragma once
// What every subcommand file provides: it registers itself on the app and returns what to run
// when the user chose it.

#include <functional>

#include <CLI/CLI.hpp>

#include "request/trace_options.hpp"  // UsageError

namespace attn::cli {

using Runner = std::function<int()>;

Runner add_run(CLI::App& app);
Runner add_example(CLI::App& app);
Runner add_show(CLI::App& app);
Runner add_compare(CLI::App& app);
Runner add_decode(CLI::App& app);
Runner add_plot(CLI::App& app);
Runner add_report(CLI::App& app);
Runner add_properties(CLI::App& app);
Runner add_new(CLI::App& app);
Runner add_scaling(CLI::App& app);
Runner add_explain(CLI::App& app);
Runner add_diff(CLI::App& app);
Runner add_import(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_steps(CLI::App& app);
Runner add_explore(CLI::App& app);

}  // namespace attn::cli
