// The Python module's core (docs/python.md): attn_trace/__init__.py hands it the input as JSON text and
// the options by the command line's names; it runs what `attn-trace run FILE --json -` runs, keeps the
// trace, and lends each step's numbers to numpy in place. The module never calls the command line.

#include <cstddef>
#include <variant>
#include <type_traits>
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "attn/version.hpp"
#include "formats/dump.hpp"
#include "formats/dump_folder.hpp"
#include "io/load.hpp"
#include "io/read.hpp"
#include "io/trace_json.hpp"
#include "json/error.hpp"
#include "render/pages/diff_page.hpp"
#include "render/pages/explain_page.hpp"
#include "render/pages/report/report.hpp"
#include "render/pages/trace/terminal.hpp"
#include "request/command_options.hpp"
#include "request/decoding.hpp"
#include "request/diffing.hpp"
#include "request/explaining.hpp"
#include "request/memory.hpp"
#include "request/request.hpp"
#include "request/terminal_caps.hpp"
#include "request/trace_options.hpp"
#include "trace/decode.hpp"
#include "trace/record.hpp"

namespace py = pybind11;

namespace attn {

namespace {

// One run: the trace as recorded and, for a dtype narrower than float64, each step's numbers as float32
// (exact: every value of float32, float16 and bfloat16 is one), made when first asked for. The arrays
// handed to Python point into this object and keep it alive.
struct Run {
  TraceOptions options;
  Trace trace;
  bool compared = false;  // a run of `compare`: naive vs flash vs the reference, with its verdict
  std::map<const double*, std::vector<float>> narrow;  // by the recorded numbers they copy
};

// One keyword's value as the command line would have it (request/command_options.hpp's set_option takes
// it so): a flag "true" or "false", a number as Python writes it, a list item by item, and a text of a
// comma-separated option split at its commas.
std::vector<std::string> texts_of(const py::handle& value, bool comma_list) {
  if (py::isinstance<py::bool_>(value)) return {value.cast<bool>() ? "true" : "false"};
  if (py::isinstance<py::str>(value)) {
    const std::string text = value.cast<std::string>();
    if (!comma_list) return {text};
    std::vector<std::string> items;
    for (std::size_t at = 0; at <= text.size();) {
      const std::size_t comma = std::min(text.find(',', at), text.size());
      if (comma > at) items.push_back(text.substr(at, comma - at));
      at = comma + 1;
    }
    return items;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::vector<std::string> items;
    for (const py::handle item : value) items.push_back(texts_of(item, false).front());
    return items;
  }
  return {py::str(value).cast<std::string>()};
}

// The keywords of `options` that `defs` (a command's shared options) define, each set in `target` as the
// command line sets it; what is left, returned: the module's own keywords (name, names), or a mistake.
template <class Target>
py::dict take_keywords(const std::vector<OptionDef<Target>>& defs, const py::dict& options, Target& target) {
  py::dict rest;
  for (const auto& [key_object, value] : options) {
    if (value.is_none()) continue;
    const std::string key = py::cast<std::string>(key_object);
    const auto def = std::find_if(defs.begin(), defs.end(),
                                  [&key](const OptionDef<Target>& d) { return keyword_of(d.name) == key; });
    if (def == defs.end()) rest[key_object] = value;
    else set_option(*def, target, texts_of(value, def->comma_list), key);
  }
  return rest;
}

// What is left after a command's keywords: `name`, the input's name in messages (else "input"), and
// nothing else.
std::string input_name(const py::dict& rest, std::string_view command) {
  std::string name = "input";
  for (const auto& [key_object, value] : rest) {
    const std::string key = py::cast<std::string>(key_object);
    if (key == "name") name = py::cast<std::string>(value);
    else throw UsageError(fmt::format("{}: not an option of {}", key, command));
  }
  return name;
}

// A Python dict of a tracing command's options (`defs`, by their keywords), as TraceOptions, from `o` as the
// command starts them (compare: with both engines).
TraceOptions options_from(const py::dict& d, const std::vector<OptionDef<TraceOptions>>& defs, std::string_view command,
                          TraceOptions o = {}) {
  o.file = input_name(take_keywords(defs, d, o), command);
  check_tiles_need_flash(o);
  return o;
}

// A command's keywords and their defaults, for the module's signatures: a keyword's default is what its
// field holds when the option is left out (None for an empty optional or list), or None when --help
// shows another default (diff's dtype: the dumps').
template <class Target>
py::list keywords_of(const std::vector<OptionDef<Target>>& defs) {
  py::list out;
  Target start;
  for (const OptionDef<Target>& def : defs) {
    py::object value = std::visit(
        [&start](const auto& field) -> py::object {
          const auto& v = field(start);
          using Value = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_same_v<Value, NoSeparateSeed> || std::is_same_v<Value, std::optional<NoSeparateSeed>>)
            return py::none();
          else if constexpr (std::is_same_v<Value, Engine> || std::is_same_v<Value, DType>)
            return py::str(std::string(name_of(v)));
          else if constexpr (std::is_same_v<Value, std::vector<std::string>> ||
                             std::is_same_v<Value, std::vector<std::size_t>>)
            return v.empty() ? py::none() : py::cast(v);
          else return py::cast(v);
        },
        def.field);
    const bool other_default = !def.shown_default.empty() && py::str(value).cast<std::string>() != def.shown_default;
    out.append(py::make_tuple(keyword_of(def.name), other_default ? py::none() : value));
  }
  return out;
}

py::list keywords(const std::string& command) {
  if (command == "run") return keywords_of(run_options());
  if (command == "compare") return keywords_of(compare_options());
  if (command == "explain") return keywords_of(explain_options());
  if (command == "decode") return keywords_of(decode_options());
  if (command == "diff") return keywords_of(diff_options());
  throw std::invalid_argument(command + ": no such command of the module");
}

// `attn-trace run FILE --json -`.
std::shared_ptr<Run> run(const std::optional<std::string>& text, const py::dict& options) {
  auto r = std::make_shared<Run>();
  r->options = options_from(options, run_options(), "run");
  const std::shared_ptr<const Problem> problem = load_input(r->options, text);
  r->trace = record_run(problem, plan_run(r->options, *problem));
  return r;
}

// `attn-trace compare FILE --json -`: naive and flash in the dtype, naive one precision up as the
// reference, every step kept, and the verdict.
std::shared_ptr<Run> compare(const std::optional<std::string>& text, const py::dict& options) {
  auto r = std::make_shared<Run>();
  TraceOptions both;  // as compare starts: both engines
  both.engine = Engine::both;
  r->options = options_from(options, compare_options(), "compare", both);
  r->compared = true;
  const TraceOptions& o = r->options;
  const std::shared_ptr<const Problem> problem = load_input(o, text);
  const RunRequest request = run_request(o, *problem, trace_filter(o, *problem, /*has_tiles=*/true));
  check_range(*problem, display_name(o.file), o.dtype);
  check_memory(o, request, *problem, {.naive = true, .flash = true, .reference = true});
  r->trace = record_compare(problem, request);
  return r;
}

// `attn-trace explain`: the explanation's text, as the command prints it to a pipe, and its JSON (explain
// --json -). `options` are run's with the question: query, key, head, batch, output, grad and index.
std::pair<std::string, std::string> explain(const std::optional<std::string>& text, const py::dict& options) {
  ExplainOptions e;
  e.trace.file = input_name(take_keywords(explain_options(), options, e), "explain");
  e.trace.color = ColorMode::never;
  check_tiles_need_flash(e.trace);
  const Explained out = explain_for(e, text);
  return {render_explained(out.what, out.title, render_options(e.trace)), out.json};
}

// One dumped tensor: its name (a step's, an alias, or a name `names` maps), its values as float64 and
// the dtype it was stored in ("float16", "bfloat16", "float32", "float64").
using DumpedArray =
    std::tuple<std::string, py::array_t<double, py::array::c_style | py::array::forcecast>, std::string>;

// `attn-trace diff`: the dumps judged against the input. `options`: dtype (None: the dumps' least
// precise), max_memory, grad_seed, names (STEP=NAME each). Returns the text, the JSON and whether a
// step differs.
std::tuple<std::string, std::string, bool> diff(const std::optional<std::string>& text, const py::dict& options,
                                                const std::vector<DumpedArray>& arrays, const std::string& dumps_name) {
  DiffOptions o;
  py::dict rest = take_keywords(diff_options(), options, o);
  if (rest.contains("names")) {
    o.names = py::cast<std::vector<std::string>>(rest["names"]);
    rest.attr("pop")("names");
  }
  o.dtype_given = options.contains("dtype") && !options["dtype"].is_none();
  o.trace.file = input_name(rest, "diff");
  o.trace.color = ColorMode::never;
  const std::shared_ptr<const Problem> problem = diff_problem(o, text);
  std::vector<NamedDump> dumps;
  for (const auto& [name, values, stored] : arrays) {
    DumpTensor tensor;
    tensor.shape.assign(values.shape(), values.shape() + values.ndim());
    tensor.values.assign(values.data(), values.data() + values.size());
    if (stored == "float16") tensor.dtype = DumpDType::float16;
    else if (stored == "bfloat16") tensor.dtype = DumpDType::bfloat16;
    else if (stored == "float32") tensor.dtype = DumpDType::float32;
    else tensor.dtype = DumpDType::float64;
    dumps.push_back({name, tensor_source(dumps_name, name), std::move(tensor)});
  }
  const Diffed d = diff_for(o, problem, std::move(dumps), dumps_name);
  return {render_diff(d.result, d.title, render_options(o.trace)), d.json, d.differs};
}

// `attn-trace decode FILE --json -`: the prompt's causal pass, then every later token one decode step, as
// decode's options (decode_options(), by their keywords) ask.
std::shared_ptr<Run> decode(const std::optional<std::string>& text, const py::dict& options) {
  auto r = std::make_shared<Run>();
  DecodeOptions o;
  o.trace.file = input_name(take_keywords(decode_options(), options, o), "decode");
  check_decode_options(o);
  r->options = o.trace;
  r->trace = decode_for(o, load_input(o.trace, text));
  return r;
}

// What the command prints to a pipe in this environment (COLUMNS, LANG), without colour: run's steps,
// or compare's comparison (with its steps only when steps or head were asked for, as compare does).
std::string text_of(const Run& r) {
  TraceOptions o = r.options;
  o.color = ColorMode::never;
  RenderOptions render = render_options(o);
  render.compare_only = r.compared && o.steps.empty() && !o.head;
  return render_trace(r.trace, render);
}

const StepRecord& step_at(const Run& r, std::size_t index) {
  if (index >= r.trace.steps.size())
    throw py::index_error(fmt::format("step {}: the trace has {}", index, r.trace.steps.size()));
  return r.trace.steps[index];
}

// `value`, recorded in `r`, as a numpy array of its shape that points into `r` (float64 as recorded,
// the narrower dtypes as float32, made once), read-only: the trace is what the tool computed.
py::array lend(const std::shared_ptr<Run>& r, const Tensor<double>& value) {
  const std::vector<std::size_t> shape(value.shape().begin(), value.shape().end());
  py::object owner = py::cast(r);
  py::array out;
  if (r->trace.dtype == DType::float64) {
    out = py::array_t<double>(shape, value.values().data(), owner);
  } else {
    auto [at, made] = r->narrow.try_emplace(value.values().data());
    if (made) at->second.assign(value.values().begin(), value.values().end());
    out = py::array_t<float>(shape, at->second.data(), owner);
  }
  py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return out;
}

py::array step_array(const std::shared_ptr<Run>& r, std::size_t index) { return lend(r, step_at(*r, index).value); }

// The flash pass's tiles in the order it ran them, as the trace format's flash.tiles lists them: where
// each is (batch, head, i, j, its rows and columns), whether the mask skipped it, and its fields (S, the
// running state, P, O, …) as arrays. Empty without a flash pass.
py::list tiles_of(const std::shared_ptr<Run>& r) {
  py::list out;
  if (!r->trace.flash) return out;
  for (const FlashTile& tile : r->trace.flash->tiles) {
    py::dict d;
    d["batch"] = tile.batch;
    d["head"] = tile.head;
    d["i"] = tile.i;
    d["j"] = tile.j;
    d["rows"] = py::make_tuple(tile.row_begin, tile.row_end);
    d["cols"] = py::make_tuple(tile.col_begin, tile.col_end);
    d["skipped"] = tile.skipped;
    if (!tile.skipped)
      for (const TileField<FlashTile>& f : tile_fields())
        if (has_field(f, *r->trace.problem)) d[py::str(std::string(f.name))] = lend(r, tile.*f.member);
    out.append(d);
  }
  return out;
}

// The steps of a part of a decode (the prefill, a decode step's token or row) as name -> array.
void put_steps(const std::shared_ptr<Run>& r, const Trace& part, py::dict& into) {
  for (const StepRecord& s : part.steps) into[py::str(std::string(step_info(s.step).name))] = lend(r, s.value);
}

// A decode's parts (docs/trace-format.md, "Decoding: decode"), its numbers as arrays: the prefill's steps
// (None without a prompt), and every decode step's position, cache length, steps (the new token's, the
// cache as the row reads it, k_cache and v_cache, and the row's), chunks (split), pages and check.
py::dict decode_of(const std::shared_ptr<Run>& r) {
  py::dict out;
  if (!r->trace.decode) return out;
  const DecodeRecord& d = *r->trace.decode;
  if (d.prefill) {
    py::dict prefill;
    put_steps(r, *d.prefill, prefill);
    out["prefill"] = prefill;
  } else {
    out["prefill"] = py::none();
  }
  py::list steps;
  for (const DecodeStepRecord& s : d.steps) {
    py::dict step, arrays;
    step["position"] = s.position;
    step["cache_length"] = s.cache_length;
    put_steps(r, s.token, arrays);
    arrays["k_cache"] = lend(r, s.k_cache);
    arrays["v_cache"] = lend(r, s.v_cache);
    put_steps(r, s.attend, arrays);
    step["steps"] = arrays;
    if (s.split) {
      py::dict split;
      py::list chunks;
      for (const auto& [begin, end] : s.split->chunks) chunks.append(py::make_tuple(begin, end));
      split["chunks"] = chunks;
      split["o"] = lend(r, s.split->o);
      split["lse"] = lend(r, s.split->lse);
      split["share"] = lend(r, s.split->share);
      split["lse_merged"] = lend(r, s.split->merged_lse);
      step["split"] = split;
    } else {
      step["split"] = py::none();
    }
    if (s.pages) {
      py::dict pages;
      pages["page_size"] = s.pages->page_size;
      pages["pool_pages"] = s.pages->pool_pages;
      pages["pages_in_use"] = s.pages->pages_in_use;
      pages["block_tables"] = s.pages->tables;
      step["pages"] = pages;
    } else {
      step["pages"] = py::none();
    }
    step["check"] = py::dict(py::arg("bit_exact") = s.bit_exact, py::arg("max_abs") = s.max_abs);
    steps.append(step);
  }
  out["steps"] = steps;
  out["passed"] = d.check.pass;
  return out;
}

py::dict step_info_of(const Run& r, std::size_t index) {
  const StepRecord& s = step_at(r, index);
  const StepInfo& info = step_info(s.step);
  py::dict d;
  d["name"] = std::string(info.name);
  d["formula"] = s.formula;
  d["meaning"] = s.description;
  d["axes"] = dim_names(s.step, r.trace.problem->batched, r.trace.problem->layout);
  d["shape"] = std::vector<std::size_t>(s.value.shape().begin(), s.value.shape().end());
  return d;
}

// A C++ exception of the library as Python's: a refused input or option as ValueError with the tool's
// one-line message.
void translate(std::exception_ptr p) {  // NOLINT(performance-unnecessary-value-param): pybind11's translator type
  try {
    if (p) std::rethrow_exception(p);
  } catch (const InputError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const UsageError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  }
}

}  // namespace

}  // namespace attn

PYBIND11_MODULE(_core, m) {
  m.doc() = "attn-trace's library, for the attn_trace package (docs/python.md)";
  py::register_exception_translator(&attn::translate);
  py::class_<attn::Run, std::shared_ptr<attn::Run>>(m, "Run")
      .def_property_readonly("steps",
                             [](const attn::Run& r) {
                               std::vector<std::string> names;
                               for (const attn::StepRecord& s : r.trace.steps)
                                 names.emplace_back(attn::step_info(s.step).name);
                               return names;
                             })
      .def_property_readonly("dtype", [](const attn::Run& r) { return std::string(attn::name_of(r.trace.dtype)); })
      .def_property_readonly("engine", [](const attn::Run& r) { return std::string(attn::name_of(r.trace.engine)); })
      .def_property_readonly("passed",
                             [](const attn::Run& r) -> std::optional<bool> {
                               if (r.trace.decode) return r.trace.decode->check.pass;
                               if (!r.trace.compare) return std::nullopt;
                               return attn::passes(*r.trace.compare);
                             })
      .def("text", &attn::text_of)
      .def("array", &attn::step_array)
      .def("tiles", &attn::tiles_of)
      .def("decode", &attn::decode_of)
      .def("info", &attn::step_info_of)
      .def("to_json",
           [](const attn::Run& r) { return attn::trace_to_json(r.trace, fmt::format("attn-trace {}", attn::version)); })
      .def("report_html", [](const attn::Run& r) {
        attn::Trace judged = r.trace;
        if (!judged.decode) attn::add_verdict(judged, r.options);  // a decode carries its own check
        attn::ReportOptions report;
        report.version = attn::version;
        return attn::report_html(judged, report);
      });
  m.def("run", &attn::run, py::arg("text"), py::arg("options"));
  m.def("compare", &attn::compare, py::arg("text"), py::arg("options"));
  m.def("explain", &attn::explain, py::arg("text"), py::arg("options"));
  m.def("diff", &attn::diff, py::arg("text"), py::arg("options"), py::arg("dumps"), py::arg("dumps_name"));
  m.def("decode", &attn::decode, py::arg("text"), py::arg("options"));
  m.def("keywords", &attn::keywords, py::arg("command"));
  m.attr("version") = std::string(attn::version);
}
