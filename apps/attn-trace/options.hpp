#pragma once
// The options that the tracing commands share (docs/cli.md), declared on CLI11 once each, and the
// checks that need the command line; what they ask for is worked out in src/request/.

#include <cstddef>
#include <variant>
#include <type_traits>
#include <stdexcept>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "io/read.hpp"
#include "lessons/mistakes.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"
#include "render/pages/document.hpp"
#include "render/pages/trace/terminal.hpp"
#include "request/command_options.hpp"
#include "request/memory.hpp"
#include "request/trace_options.hpp"
#include "request/request.hpp"
#include "request/terminal_caps.hpp"
#include "trace/record.hpp"
#include "trace/trace.hpp"

namespace attn::cli {

// A size or a seed: digits that fit 64 bits. CLI11 alone would take "-1" for 2^64 - 1, and a number
// beyond 2^64 - 1 for 2^64 - 1.
extern const CLI::Validator whole_number;

// Declares `option` (its one definition, request/command_options.hpp) on `command`, setting its field of
// `target`: a flag, a choice checked against its names, or a value of its field's type (CLI11's), checked
// against its range or as a whole number, comma-separated for a list.
template <class Target>
CLI::Option* add_shared_option(CLI::App& command, Target& target, const OptionDef<Target>& option) {
  CLI::Option* added = std::visit(
      [&](const auto& field) -> CLI::Option* {
        auto& value = field(target);
        using Value = std::remove_reference_t<decltype(value)>;
        const std::string name(option.name);
        if constexpr (std::is_same_v<Value, bool>) {
          return command.add_flag(name, value, option.help);
        } else if constexpr (std::is_same_v<Value, Engine> || std::is_same_v<Value, DType>) {
          return command
              .add_option_function<std::string>(
                  name,
                  [&value](const std::string& text) {
                    if constexpr (std::is_same_v<Value, Engine>) value = *engine_from_name(text);
                    else value = *dtype_from_name(text);
                  },
                  option.help)
              ->check(CLI::IsMember(option.choices));
        } else if constexpr (std::is_same_v<Value, NoSeparateSeed> ||
                             std::is_same_v<Value, std::optional<NoSeparateSeed>>) {
          throw std::logic_error("an option of no field");
        } else {
          return command.add_option(name, value, option.help);
        }
      },
      option.field);
  if (!option.type_name.empty()) added->type_name(option.type_name);
  if (option.check == OptionCheck::range) added->check(CLI::Range(option.least, option.most));
  if (option.check == OptionCheck::whole_number) added->check(whole_number);
  if (option.comma_list) added->delimiter(',');
  if (!option.shown_default.empty()) added->default_str(option.shown_default);
  return added;
}

// A command's shared options (run_options(), explain_options(), …, request/command_options.hpp), each
// declared where the command places it among its own, by name; `all_placed` then checks that none was
// left out, so that the command line offers every one the Python module and the explorer take.
template <class Target>
class SharedOptions {
 public:
  SharedOptions(CLI::App& command, Target& target, std::vector<OptionDef<Target>> options)
      : command_(command), target_(target), options_(std::move(options)) {}

  CLI::Option* add(std::string_view name) {
    placed_.emplace_back(name);
    return add_shared_option(command_, target_, option_named(options_, name));
  }

  void all_placed() const {
    for (const OptionDef<Target>& o : options_)
      if (std::find(placed_.begin(), placed_.end(), o.name) == placed_.end())
        throw std::logic_error(fmt::format("{}: the shared option {} is not declared", command_.get_name(), o.name));
  }

 private:
  CLI::App& command_;
  Target& target_;
  std::vector<OptionDef<Target>> options_;
  std::vector<std::string_view> placed_;
};

// A std::logic_error unless `command` declares every one of `options` (run_options(), …): the command line
// offers what the Python module and the explorer take.
template <class Target>
void check_declared(const CLI::App& command, const std::vector<OptionDef<Target>>& options);

// --dtype into `dtype`, float32 by default: float32 or float64, and with `half` also float16 and bfloat16
// (stored in the half type, computed in float32: docs/precision.md). `what` opens its help text ("the
// arithmetic"). The one declaration of --dtype for every command.
CLI::Option* add_dtype_option(CLI::App& command, DType& dtype, bool half, const std::string& what);

// --block-q and --block-k, the flash pass's tiles: the one declaration for every command.
void add_tile_options(CLI::App& command, TraceOptions& options);
// FILE, --dtype (with the half types when `half`), the tiles and --json (run, compare, report), --engine
// (run and report).
void add_run_options(CLI::App& command, TraceOptions& options, bool with_engine, bool half);
// --steps and --head (run, compare, show).
void add_filter_options(CLI::App& command, TraceOptions& options);
void add_memory_option(CLI::App& command, TraceOptions& options);
// --color auto|always|never.
void add_color_option(CLI::App& command, TraceOptions& options);
// --precision, --color, --max-rows, --max-cols, --view, --color-scale.
void add_display_options(CLI::App& command, TraceOptions& options);
// --color-scale auto|absolute|row|log: how the weights' colours span them (render/draw/colormap.hpp).
void add_color_scale_option(CLI::App& command, WeightScale& scale);
// --backward and --grad-seed (run, compare).
void add_backward_options(CLI::App& command, TraceOptions& options);
// --dropout P and --dropout-seed S (run, compare, report): dropout in place of the input's.
void add_dropout_options(CLI::App& command, TraceOptions& options);
// --format text|markdown|latex|csv (run and show).
void add_format_option(CLI::App& command, TraceOptions& options);

// A document (--format other than text) and --json - would both go to stdout: a UsageError.
void check_format(const TraceOptions& options);

// `value` of a count option that must be at least 1 (`option` names it), or a UsageError.
std::size_t at_least_one(std::string_view option, std::size_t value);

// "TEXT:{a, b, c}": an option's type in --help with its choices, as CLI11 shows a set it checks. For an
// option whose values are checked elsewhere (or that also takes a pattern, such as sliding_window:W),
// so that --help names them and the shell completion (scripts/completion/attn-trace.bash) offers them.
std::string choices(const std::vector<std::string_view>& names);

// --mistake NAME (run, report): its choices in --help are the offered mistakes, and "list" with `list`.
CLI::Option* add_mistake_option(CLI::App& command, std::string& mistake, const std::string& description, bool list);

// --mistake NAME (run, report): the mistake called `name`, or a UsageError that lists them all.
Mistake mistake_by_name(const std::string& name);
// A UsageError when `mistake` cannot be made on `problem` (mistake_refused says why).
void check_mistake_fits(Mistake mistake, const Problem& problem);
// A UsageError when `dtype` is float16 or bfloat16: a mistake is made and measured in float32 or float64.
void check_mistake_dtype(DType dtype);

// The words of `text`, split at spaces (--tokens).
std::vector<std::string> words(const std::string& text);

// --mask for the commands that write an input (new, import): the masks that need no data of their own.
struct SimpleMask {
  MaskKind kind = MaskKind::none;
  std::size_t window = 0;  // sliding_window only
};
// "none", "causal" or "sliding_window:W", or a UsageError that says what `command` writes.
SimpleMask parse_simple_mask(const std::string& spec, std::string_view command);

// `text` to the file `out` (written as every file is, io/output.hpp), or to stdout when `out` is "" or "-".
void write_result(const std::string& out, const std::string& text);

// A trace saved by --json, read back from `text` and cut down to --steps and --head (a --head other
// than the one it was saved with is a UsageError).
Trace saved_trace(const TraceOptions& options, std::string_view text);

// `problem` run as plan_run (request/request.hpp) asks, once float32's range and --max-memory have
// been checked.
Trace run_problem(const TraceOptions& options, const std::shared_ptr<const Problem>& problem);

// FILE as a trace, for the commands that draw pictures (plot, report): a saved trace (run --json) read
// back and cut down to --steps/--head, or an input run by --engine, checked like `run` checks it.
// Recognises a trace by its first key, "format" (looks_like_trace).
Trace input_or_trace(const TraceOptions& options);

// The finished trace where --json sends it, and the text (or the --format document) to stdout unless
// --json is "-".
void emit(const Trace& trace, const TraceOptions& options, const RenderOptions& render);

}  // namespace attn::cli
