#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "engine/estimate.hpp"
#include "io/error.hpp"
#include "io/json_pointer.hpp"
#include "io/load.hpp"
#include "io/output.hpp"
#include "io/read.hpp"
#include "io/trace_json.hpp"
#include "render/text.hpp"
#include "text/number.hpp"
#include "trace/record.hpp"

namespace attn::cli {

CLI::Option* add_dtype_option(CLI::App& command, DType& dtype, bool half, const std::string& what) {
  std::vector<std::string> names = {"float32", "float64"};
  std::string help = what + ": float32 or float64";
  if (half) {
    names.insert(names.end(), {"float16", "bfloat16"});
    help = what +
           ": float32, float64, float16 or bfloat16; a 16-bit type rounds the inputs and every stored step to it "
           "(to nearest, ties to even) and sums in float32, as GPU kernels do (docs/precision.md)";
  }
  return command
      .add_option_function<std::string>(
          "--dtype", [&dtype](const std::string& name) { dtype = *dtype_from_name(name); }, help)
      ->check(CLI::IsMember(names))
      ->default_str("float32");
}

void add_run_options(CLI::App& command, TraceOptions& o, bool with_engine, bool half) {
  command.add_option("FILE", o.file, "the input JSON (docs/input-format.md); - reads standard input")->required();
  if (with_engine)
    command
        .add_option_function<std::string>(
            "--engine", [&o](const std::string& name) { o.engine = *engine_from_name(name); },
            "which computation to trace: naive (every step), flash (tile by tile with an online softmax), or both")
        ->check(CLI::IsMember({"naive", "flash", "both"}))
        ->default_str("naive");
  add_dtype_option(command, o.dtype, half, "the arithmetic");
  command.add_option("--block-q", o.block_q, "flash: query rows per tile (default about √n)")
      ->check(CLI::Range(1, 1 << 20));
  command.add_option("--block-k", o.block_k, "flash: keys per tile (default about √m)")->check(CLI::Range(1, 1 << 20));
  command.add_option("--json", o.json_out,
                     "also write the trace (docs/trace-format.md) to this file; - writes it to "
                     "stdout instead of the text");
}

void add_filter_options(CLI::App& command, TraceOptions& o) {
  command
      .add_option("--steps", o.steps,
                  "only these steps, by trace name: q,k,v,q_heads,k_heads,v_heads,q_rot,k_rot (with rope),"
                  "scores,scaled,bias (with alibi),masked,weights,head_outputs,concat,output, and tiles for "
                  "the flash pass's tiles")
      ->delimiter(',');
  command.add_option("--head", o.head, "only this query head (and the key/value head it reads)")
      ->check(CLI::Range(0, 65535));
}

void add_memory_option(CLI::App& command, TraceOptions& o) {
  command
      .add_option("--max-memory", o.max_memory,
                  "refuse input or a run estimated to need more than this, before it is allocated (bytes, or "
                  "with K, M, G: 512M, 4G)")
      ->default_str("4G");
}

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

void add_display_options(CLI::App& command, TraceOptions& o) {
  command.add_option("--precision", o.precision, "digits after the point")->check(CLI::Range(0, 17))->default_str("4");
  add_color_option(command, o);
  command.add_option("--max-rows", o.max_rows, "show at most this many rows of a table (first and last); 0: all")
      ->default_str("16");
  command.add_option("--max-cols", o.max_cols, "show at most this many columns of a table (first and last); 0: all")
      ->default_str("10");
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

Step step_by_name(std::string_view option, const std::string& name) {
  if (const std::optional<Step> step = step_from_name(name)) return *step;
  std::vector<std::string_view> names;
  for (const Step s : all_steps()) names.push_back(step_info(s).name);
  const std::string near = nearest_word(name, names);
  throw UsageError(fmt::format("{}: unknown step \"{}\"{}; the steps are {}", option, name,
                               near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                               fmt::join(names, ",")));
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

StepFilter trace_filter(const TraceOptions& options, const Problem& problem, bool has_tiles) {
  StepFilter filter;
  if (options.head && *options.head >= problem.h) {
    throw UsageError(problem.h == 1 ? fmt::format("--head {}: the input has one head, head 0", *options.head)
                                    : fmt::format("--head {}: the input has {} heads, 0 to {}", *options.head,
                                                  problem.h, problem.h - 1));
  }
  filter.head = options.head;
  // "tiles" (the flash pass's tiles) is not a step of the trace, but can be chosen like one; so can
  // the score steps, whose flash counterparts live in the tiles.
  filter.tiles = options.steps.empty();
  for (const std::string& name : options.steps) {
    if (name == "tiles") {
      if (!has_tiles)
        throw UsageError(
            "--steps tiles: only the flash pass has tiles; add --engine flash or --engine both, or use "
            "attn-trace compare");
      filter.tiles = true;
      continue;
    }
    const Step step = step_by_name("--steps", name);
    if (!step_applies(step, problem)) {
      std::vector<std::string_view> names;
      for (const Step s : steps_of(problem)) names.push_back(step_info(s).name);
      throw UsageError(fmt::format("--steps {}: this input has no \"{}\", so no step {}; its steps are {}", name,
                                   step == Step::bias ? "alibi" : "rope", name, fmt::join(names, ",")));
    }
    if (is_score_step(step)) filter.tiles = true;
    filter.only.push_back(step);
  }
  filter.none = !options.steps.empty() && filter.only.empty();  // --steps tiles: the tiles alone
  return filter;
}

namespace {

// "4G", "512M", "1.5GiB", "1000000": a size in bytes.
std::size_t parse_size(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  double factor = 0;
  if (unit.empty()) factor = 1;
  else if (unit == "K") factor = 1024.0;
  else if (unit == "M") factor = 1024.0 * 1024;
  else if (unit == "G") factor = 1024.0 * 1024 * 1024;
  else if (unit == "T") factor = 1024.0 * 1024 * 1024 * 1024;
  if (used == 0 || factor == 0 || !(value >= 0) || value * factor > 1e19)
    throw UsageError(fmt::format("--max-memory: expected a size such as 512M or 4G, found \"{}\"", text));
  return static_cast<std::size_t>(value * factor);
}

std::string human(std::size_t bytes) {
  return bytes == too_large ? "more than 16 EiB (the sizes overflow a 64-bit count)" : describe_bytes(bytes);
}

RunShape run_shape(const TraceOptions& o, const RunRequest& r, const Problem& p, const StepFilter& filter, bool naive,
                   bool flash) {
  RunShape shape;
  shape.naive = naive;
  shape.flash = flash;
  shape.scalar = scalar_bytes(r.dtype);
  shape.tile_size = r.tile_size;
  for (const Step s : steps_of(p)) {
    if (!filter.keeps(s)) continue;
    const bool score = is_score_step(s);
    if (score && naive) ++shape.score_steps_traced;
    if (!score) shape.shared_traced = true;
  }
  shape.tiles_traced = flash && filter.tiles;
  shape.json = !o.json_out.empty();
  return shape;
}

}  // namespace

MemoryLimit memory_limit(const TraceOptions& options) { return {parse_size(options.max_memory), options.max_memory}; }

void check_memory(const TraceOptions& o, const RunRequest& r, const Problem& p, bool naive, bool flash, bool reference,
                  std::size_t runs) {
  const std::size_t limit = memory_limit(o).bytes;
  RunShape shape = run_shape(o, r, p, r.filter, naive, flash);
  if (reference) shape.reference_scalar = r.dtype == DType::float64 ? sizeof(long double) : 8;
  runs = std::max<std::size_t>(runs, 1);
  const std::size_t need = estimate_memory(p, shape).total();  // of one run
  if (need <= limit / runs) return;
  if (runs > 1) {
    const std::size_t all =
        need > std::numeric_limits<std::size_t>::max() / runs ? std::numeric_limits<std::size_t>::max() : need * runs;
    throw InputError(display_name(o.file), "",
                     fmt::format("this comparison holds {} runs of the input with every step, about {}, over "
                                 "--max-memory {}",
                                 runs, human(all), o.max_memory));
  }
  // Would the flash engine alone fit, as asked or keeping only the output?
  std::string hint;
  const std::size_t flash_need = estimate_memory(p, run_shape(o, r, p, r.filter, false, true)).total();
  StepFilter output_only;
  output_only.only = {Step::output};
  output_only.tiles = false;
  const std::size_t lean_need = estimate_memory(p, run_shape(o, r, p, output_only, false, true)).total();
  if (naive && !reference && flash_need <= limit)
    hint = fmt::format("; --engine flash would need about {}", human(flash_need));
  else if (!reference && lean_need <= limit)
    hint = fmt::format("; --engine flash --steps output (no score tiles kept) would need about {}", human(lean_need));
  throw InputError(display_name(o.file), "",
                   fmt::format("this run needs about {}, over --max-memory {}{}", human(need), o.max_memory, hint));
}

RunRequest run_request(const TraceOptions& options, const Problem& problem, StepFilter filter) {
  RunRequest request;
  request.engine = options.engine;
  request.dtype = options.dtype;
  request.tile_size = default_tiles(problem.n, problem.m);
  if (options.block_q) request.tile_size.Br = *options.block_q;
  if (options.block_k) request.tile_size.Bc = *options.block_k;
  request.filter = std::move(filter);
  return request;
}

Trace saved_trace(const TraceOptions& o, std::string_view text) {
  Trace trace = trace_from_json(text, display_name(o.file));
  if (o.head && trace.head && *o.head != *trace.head)
    throw UsageError(fmt::format("--head {}: this trace holds head {} only (it was saved with --head {})", *o.head,
                                 *trace.head, *trace.head));
  if (!o.steps.empty() || o.head) {
    // The filter first: the order in which a call's arguments are evaluated is unspecified, and the
    // moved-from trace has no problem left to check the filter against.
    const StepFilter filter = trace_filter(o, *trace.problem, trace.flash.has_value());
    trace = keep_only(std::move(trace), filter);
  }
  return trace;
}

Trace run_problem(const TraceOptions& o, const std::shared_ptr<const Problem>& problem) {
  const RunRequest request = run_request(o, *problem, trace_filter(o, *problem, o.engine != Engine::naive));
  check_range(*problem, display_name(o.file), o.dtype);
  check_memory(o, request, *problem, o.engine != Engine::flash, o.engine != Engine::naive);
  return record_run(problem, request);
}

Trace input_or_trace(const TraceOptions& o) {
  const std::string text = read_text(o.file, memory_limit(o));
  if (looks_like_trace(text)) return saved_trace(o, text);
  return run_problem(o, std::make_shared<const Problem>(load_problem(text, display_name(o.file))));
}

namespace {

bool use_color(ColorMode mode) {
  if (mode != ColorMode::automatic) return mode == ColorMode::always;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return isatty(STDOUT_FILENO) != 0;
}

// COLUMNS when it is a positive number, else the terminal's width, else 100.
std::size_t terminal_width() {
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && columns[0] != '\0') {
    char* end = nullptr;
    const unsigned long value = std::strtoul(columns, &end, 10);
    if (*end == '\0' && value > 0 && value < 100000) return value;
  }
  winsize size{};
  if (isatty(STDOUT_FILENO) != 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 100;
}

bool truecolor_terminal() {
  const char* colorterm = std::getenv("COLORTERM");
  if (colorterm == nullptr) return false;
  const std::string_view c = colorterm;
  return c == "truecolor" || c == "24bit";
}

}  // namespace

bool utf8_terminal() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"})
    if (const char* value = std::getenv(name); value != nullptr && value[0] != '\0') return utf8_locale(value);
  return false;
}

RenderOptions render_options(const TraceOptions& options) {
  RenderOptions r;
  r.precision = options.precision;
  r.color = use_color(options.color);
  r.max_rows = options.max_rows;
  r.max_cols = options.max_cols;
  r.view = options.view;
  r.width = terminal_width();
  r.unicode = utf8_terminal();
  r.truecolor = truecolor_terminal();
  r.version = attn::version;
  return r;
}

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
