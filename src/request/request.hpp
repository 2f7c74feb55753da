#pragma once
// What a tracing command runs, worked out from its options and the problem before anything is
// allocated: the engine, the dtype and the tiles, the step filter (--steps, --head), and the verdicts
// on float32's range and --max-memory. The command files parse, ask here, run and print.

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "model/problem.hpp"
#include "request/trace_options.hpp"
#include "trace/record.hpp"
#include "trace/trace.hpp"

namespace attn {

// --block-q or --block-k for a naive run: a UsageError (tiles belong to the flash pass).
void check_tiles_need_flash(const TraceOptions& options);

// The step called `name`, or a UsageError naming `option` that suggests the nearest step name.
Step step_by_name(std::string_view option, const std::string& name);

// Where a trace's steps come from, for the advice of a refusal: a run of the command itself (which
// --engine changes) or a trace saved earlier (which a run with --engine flash would have to save again).
enum class TraceSource { run, saved };

// --steps and --head, checked against the problem: an unknown step name (the nearest is suggested)
// or a head the input does not have is a UsageError. `has_tiles`: the run (or the saved trace) has a
// flash pass, without which --steps tiles is a UsageError that says how to get one.
StepFilter trace_filter(const TraceOptions& options, const Problem& problem, bool has_tiles,
                        TraceSource source = TraceSource::run);

// What record_run and record_compare are asked: the engine, the dtype, the tiles (--block-q/--block-k
// or the defaults for this problem's lengths) and `filter`.
RunRequest run_request(const TraceOptions& options, const Problem& problem, StepFilter filter);

// The run that --engine, --dtype, the tiles, --steps and --head ask for on `problem`, refused (exit 2)
// when an input value is beyond the dtype's range or the run would need more than --max-memory.
RunRequest plan_run(const TraceOptions& options, const Problem& problem);

// The problem of `problem` as the options run it: with dY drawn by --grad-seed (a UsageError without
// --backward) and dropout as --dropout and --dropout-seed set it (the command line's and the Python
// module's).
std::shared_ptr<const Problem> as_run(const TraceOptions& options, Problem problem);

// The input: its text `text`, or, with none, the file the options name, read within --max-memory.
Problem input_problem(const TraceOptions& options, const std::optional<std::string>& text = std::nullopt);

// input_problem as the options run it (as_run).
std::shared_ptr<const Problem> load_input(const TraceOptions& options,
                                          const std::optional<std::string>& text = std::nullopt);

// compare's verdict, for a page's naive vs flash and the unit of its map of flash − naive (report,
// explore): a trace of both engines that has none (a run of an input, or a saved run --engine both)
// gets it by running compare's wider reference on the same input, dtype and tiles, so that its page is
// the same either way. Refused (exit 2) when the reference would need more than --max-memory.
void add_verdict(Trace& trace, const TraceOptions& options);

}  // namespace attn
