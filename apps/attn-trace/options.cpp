#include "options.hpp"

#include <charconv>
#include <cstdint>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/load.hpp"
#include "io/output.hpp"
#include "io/read.hpp"
#include "io/trace_json.hpp"
#include "json/error.hpp"
#include "trace/record.hpp"

namespace attn::cli {

CLI::Option* add_dtype_option(CLI::App& command, DType& dtype, bool half, const std::string& what) {
  const OptionDef<TraceOptions> o = dtype_option(half, what);  // its one definition, bound to `dtype`
  return command
      .add_option_function<std::string>(
          std::string(o.name), [&dtype](const std::string& name) { dtype = *dtype_from_name(name); }, o.help)
      ->check(CLI::IsMember(o.choices))
      ->default_str(o.shown_default);
}

void add_tile_options(CLI::App& command, TraceOptions& o) {
  for (const OptionDef<TraceOptions>& tile : tile_options()) add_shared_option(command, o, tile);
}

void add_run_options(CLI::App& command, TraceOptions& o, bool with_engine, bool half) {
  command.add_option("FILE", o.file, "the input JSON (docs/input-format.md); - reads standard input")->required();
  if (with_engine) add_shared_option(command, o, run_engine_option());
  add_shared_option(command, o, dtype_option(half, "the arithmetic"));
  add_tile_options(command, o);
  command.add_option("--json", o.json_out,
                     "also write the trace (docs/trace-format.md) to this file; - writes it to stdout instead of the "
                     "text");
}

void add_filter_options(CLI::App& command, TraceOptions& o) {
  add_shared_option(command, o, steps_option());
  add_shared_option(command, o, head_option());
}

void add_memory_option(CLI::App& command, TraceOptions& o) { add_shared_option(command, o, memory_option()); }

void add_color_option(CLI::App& command, TraceOptions& o) {
  command
      .add_option_function<std::string>(
          "--color",
          [&o](const std::string& mode) {
            o.color = mode == "always" ? ColorMode::always : mode == "never" ? ColorMode::never : ColorMode::automatic;
          },
          "colour: auto (only on a terminal, never with NO_COLOR set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
}

void add_color_scale_option(CLI::App& command, WeightScale& scale) {
  command
      .add_option_function<std::string>(
          "--color-scale",
          [&scale](const std::string& name) {
            scale = name == "absolute" ? WeightScale::absolute
                    : name == "row"    ? WeightScale::row
                    : name == "log"    ? WeightScale::log
                                       : WeightScale::automatic;
          },
          "how the colours of the weights span them: absolute (0 to the largest weight), row (each row to its own "
          "largest), log (log10 of the weight), or auto (row when the rows' largest weights differ more than 4 "
          "times, else absolute)")
      ->check(CLI::IsMember({"auto", "absolute", "row", "log"}))
      ->default_str("auto");
}

void add_display_options(CLI::App& command, TraceOptions& o) {
  command.add_option("--precision", o.precision, "digits after the point")->check(CLI::Range(0, 17))->default_str("4");
  add_color_option(command, o);
  command.add_option("--max-rows", o.max_rows, "show at most this many rows of a table (first and last); 0: all")
      ->default_str("16");
  command.add_option("--max-cols", o.max_cols,
                     "show at most this many columns of a table (first and last); 0: all; by default as many as "
                     "the width holds");
  command
      .add_option_function<std::string>(
          "--view",
          [&o](const std::string& view) {
            o.view = view == "numbers" ? View::numbers : view == "heatmap" ? View::heatmap : View::automatic;
          },
          "how a matrix is shown: numbers, heatmap (coloured cells, a character ramp without colour), or auto "
          "(numbers when they fit, a heatmap when they do not)")
      ->check(CLI::IsMember({"numbers", "heatmap", "auto"}))
      ->default_str("auto");
  add_color_scale_option(command, o.weight_scale);
}

void add_format_option(CLI::App& command, TraceOptions& o) {
  command
      .add_option_function<std::string>(
          "--format", [&o](const std::string& name) { o.format = doc_format_from_name(name); },
          "how the steps are printed: text (the terminal trace), or every value as a document: markdown (pipe "
          "tables), latex (a tabular per matrix), csv (one long table); documents are UTF-8, without colour")
      ->check(CLI::IsMember({"text", "markdown", "latex", "csv"}))
      ->default_str("text");
}

void check_format(const TraceOptions& o) {
  if (o.format && o.json_out == "-")
    throw UsageError(fmt::format(
        "--format {}: --json - writes the trace to stdout, where the document goes too; give --json a file name",
        name_of(*o.format)));
}

std::string choices(const std::vector<std::string_view>& names) {
  return fmt::format("TEXT:{{{}}}", fmt::join(names, ", "));  // spaced, so that a long list wraps between names
}

CLI::Option* add_mistake_option(CLI::App& command, std::string& mistake, const std::string& description, bool list) {
  std::vector<std::string_view> names;
  if (list) names.emplace_back("list");
  for (const MistakeInfo& m : all_mistakes()) names.push_back(m.name);
  return command.add_option("--mistake", mistake, description)->type_name(choices(names));
}

Mistake mistake_by_name(const std::string& name) {
  if (const std::optional<Mistake> mistake = mistake_from_name(name)) return *mistake;
  std::vector<std::string> names;
  for (const MistakeInfo& m : all_mistakes()) names.emplace_back(m.name);
  throw UsageError(fmt::format(
      "--mistake: no mistake called \"{}\"; the mistakes are {} (attn-trace run --mistake list says what each one is)",
      name, fmt::join(names, ", ")));
}

void check_mistake_fits(Mistake mistake, const Problem& problem) {
  if (const std::optional<std::string> why = mistake_refused(mistake, problem))
    throw UsageError(fmt::format("--mistake {}: {}", mistake_info(mistake).name, *why));
}

void check_mistake_dtype(DType dtype) {
  if (is_half(dtype))
    throw UsageError(fmt::format("--mistake: mistakes run in float32 or float64, not {}; leave --dtype {} out",
                                 name_of(dtype), name_of(dtype)));
}

const CLI::Validator whole_number(
    [](const std::string& text) {
      std::uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      const bool whole = !text.empty() && error == std::errc() && end == text.data() + text.size();
      return whole ? std::string()
                   : fmt::format("expected a whole number from 0 to 18446744073709551615, found \"{}\"", text);
    },
    "N");

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

SimpleMask parse_simple_mask(const std::string& spec, std::string_view command) {
  constexpr std::string_view window_prefix = "sliding_window:";
  if (spec == "none" || spec == "causal") return {spec == "none" ? MaskKind::none : MaskKind::causal, 0};
  if (spec.starts_with(window_prefix)) {
    const std::string_view w = std::string_view(spec).substr(window_prefix.size());
    std::size_t window = 0;
    const auto [end, error] = std::from_chars(w.data(), w.data() + w.size(), window);
    if (error != std::errc() || end != w.data() + w.size() || window == 0)
      throw UsageError(
          fmt::format("--mask {}: the window must be a whole number, at least 1, as sliding_window:2", spec));
    return {MaskKind::sliding_window, window};
  }
  if (spec == "sliding_window") throw UsageError("--mask sliding_window: give the window too, as sliding_window:2");
  if (spec == "padding" || spec == "custom")
    throw UsageError(
        fmt::format("--mask {}: {} writes none, causal or sliding_window:W; a {} mask needs flags of "
                    "its own, to add by hand (docs/input-format.md)",
                    spec, command, spec));
  throw UsageError(fmt::format("--mask {}: unknown mask; expected none, causal or sliding_window:W", spec));
}

void write_result(const std::string& out, const std::string& text) {
  if (out.empty() || out == "-") write_stdout(text);
  else write_output_file(out, text);
}

Trace saved_trace(const TraceOptions& o, std::string_view text) {
  Trace trace = trace_from_json(text, display_name(o.file));
  if (o.head && trace.head && *o.head != *trace.head)
    throw UsageError(fmt::format("--head {}: this trace holds head {} only (it was saved with --head {})", *o.head,
                                 *trace.head, *trace.head));
  if (trace.decode) {
    // decode prints its trace whole: its steps belong to the prefill and to each decode step, not to one pass
    const char* option = !o.steps.empty() ? "--steps" : o.head ? "--head" : o.format ? "--format" : nullptr;
    if (option)
      throw UsageError(
          fmt::format("{}: this is a decode trace, which show prints whole, as decode printed it", option));
  }
  if (!o.steps.empty() || o.head) {
    // The filter first: the order in which a call's arguments are evaluated is unspecified, and the
    // moved-from trace has no problem left to check the filter against.
    const StepFilter filter = trace_filter(o, *trace.problem, trace.flash.has_value(), TraceSource::saved);
    trace = keep_only(std::move(trace), filter);
  }
  return trace;
}

Trace run_problem(const TraceOptions& o, const std::shared_ptr<const Problem>& problem) {
  const RunRequest request = plan_run(o, *problem);
  return record_run(problem, request);
}

Trace input_or_trace(const TraceOptions& o) {
  const std::string text = read_text(o.file, memory_limit(o));
  if (looks_like_trace(text)) return saved_trace(o, text);
  return run_problem(o, as_run(o, load_problem(text, display_name(o.file))));
}

void add_backward_options(CLI::App& command, TraceOptions& o) {
  add_shared_option(command, o, run_backward_option());
  add_shared_option(command, o, option_named(run_options(), "--grad-seed"));
}

void add_dropout_options(CLI::App& command, TraceOptions& o) {
  for (const OptionDef<TraceOptions>& dropout : dropout_options()) add_shared_option(command, o, dropout);
}

template <class Target>
void check_declared(const CLI::App& command, const std::vector<OptionDef<Target>>& options) {
  for (const OptionDef<Target>& o : options)
    if (command.get_option_no_throw(std::string(o.name)) == nullptr)
      throw std::logic_error(fmt::format("{}: the shared option {} is not declared", command.get_name(), o.name));
}

template void check_declared(const CLI::App&, const std::vector<OptionDef<TraceOptions>>&);

std::size_t at_least_one(std::string_view option, std::size_t value) {
  if (value == 0) throw UsageError(fmt::format("{}: expected at least 1, found 0", option));
  return value;
}

}  // namespace attn::cli

namespace attn::cli {

void emit(const Trace& trace, const TraceOptions& options, const RenderOptions& render) {
  if (!options.json_out.empty()) {
    const std::string text = trace_to_json(trace, fmt::format("attn-trace {}", attn::version));
    if (options.json_out == "-") {
      write_stdout(text);
      return;
    }
    write_output_file(options.json_out, text);
  }
  if (options.format)
    write_stdout(render_document(trace, *options.format, DocOptions{options.precision, render.notes}));
  else write_stdout(render_trace(trace, render));
}

}  // namespace attn::cli
