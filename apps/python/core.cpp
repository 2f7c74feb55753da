// The Python module's core (docs/python.md): attn_trace/__init__.py hands it the input as JSON text and
// the options by the command line's names; it runs what `attn-trace run FILE --json -` runs, keeps the
// trace, and lends each step's numbers to numpy in place. The module never calls the command line.

#include <cstddef>
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
#include "request/diffing.hpp"
#include "request/explaining.hpp"
#include "request/memory.hpp"
#include "request/request.hpp"
#include "request/terminal_caps.hpp"
#include "request/trace_options.hpp"
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

// A Python dict of options, by the command line's names with `_` for `-`, as TraceOptions.
TraceOptions options_from(const py::dict& d) {
  TraceOptions o;
  o.file = "input";
  for (const auto& [key_object, value] : d) {
    const std::string key = py::cast<std::string>(key_object);
    if (value.is_none()) continue;
    if (key == "name") o.file = py::cast<std::string>(value);
    else if (key == "engine") {
      const std::string name = py::cast<std::string>(value);
      const std::optional<Engine> e = engine_from_name(name);
      if (!e) throw UsageError(fmt::format("engine {}: expected naive, flash or both", name));
      o.engine = *e;
    } else if (key == "dtype") {
      const std::string name = py::cast<std::string>(value);
      const std::optional<DType> t = dtype_from_name(name);
      if (!t) throw UsageError(fmt::format("dtype {}: expected float32, float64, float16 or bfloat16", name));
      o.dtype = *t;
    } else if (key == "block_q") o.block_q = py::cast<std::size_t>(value);
    else if (key == "block_k") o.block_k = py::cast<std::size_t>(value);
    else if (key == "steps") o.steps = py::cast<std::vector<std::string>>(value);
    else if (key == "head") o.head = py::cast<std::size_t>(value);
    else if (key == "backward") o.backward = py::cast<bool>(value);
    else if (key == "grad_seed") o.grad_seed = py::cast<std::uint64_t>(value);
    else if (key == "dropout") o.dropout = py::cast<double>(value);
    else if (key == "dropout_seed") o.dropout_seed = py::cast<std::uint64_t>(value);
    else if (key == "max_memory") o.max_memory = py::cast<std::string>(value);
    else throw UsageError(fmt::format("{}: not an option of run", key));
  }
  if (o.block_q && *o.block_q == 0) throw UsageError("block_q: expected at least 1, found 0");
  if (o.block_k && *o.block_k == 0) throw UsageError("block_k: expected at least 1, found 0");
  check_tiles_need_flash(o);
  return o;
}

// `attn-trace run FILE --json -`.
std::shared_ptr<Run> run(const std::optional<std::string>& text, const py::dict& options) {
  auto r = std::make_shared<Run>();
  r->options = options_from(options);
  const std::shared_ptr<const Problem> problem = load_input(r->options, text);
  r->trace = record_run(problem, plan_run(r->options, *problem));
  return r;
}

// `attn-trace compare FILE --json -`: naive and flash in the dtype, naive one precision up as the
// reference, every step kept, and the verdict.
std::shared_ptr<Run> compare(const std::optional<std::string>& text, const py::dict& options) {
  auto r = std::make_shared<Run>();
  py::dict both;  // the caller's options, untouched, and the engines compare runs
  for (const auto& [key, value] : options) both[key] = value;
  both["engine"] = "both";
  r->options = options_from(both);
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
  py::dict rest;
  for (const auto& [key_object, value] : options) {
    const std::string key = py::cast<std::string>(key_object);
    if (value.is_none()) continue;
    if (key == "query") e.query = py::cast<std::string>(py::str(value));
    else if (key == "key") e.key = py::cast<std::string>(py::str(value));
    else if (key == "head") e.head = py::cast<std::size_t>(value);
    else if (key == "batch") e.batch = py::cast<std::size_t>(value);
    else if (key == "output") e.output = py::cast<std::size_t>(value);
    else if (key == "grad") e.grad = py::cast<std::string>(value);
    else if (key == "index") e.index = py::cast<std::vector<std::size_t>>(value);
    else rest[key_object] = value;
  }
  e.trace = options_from(rest);
  e.trace.color = ColorMode::never;
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
  py::dict rest;
  for (const auto& [key_object, value] : options) {
    const std::string key = py::cast<std::string>(key_object);
    if (value.is_none()) continue;
    if (key == "names") o.names = py::cast<std::vector<std::string>>(value);
    else if (key == "grad_seed") o.grad_seed = py::cast<std::uint64_t>(value);
    else rest[key_object] = value;
  }
  o.dtype_given = rest.contains("dtype");
  o.trace = options_from(rest);
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
    dumps.push_back({name, fmt::format("{}[\"{}\"]", dumps_name, name), std::move(tensor)});
  }
  const Diffed d = diff_for(o, problem, std::move(dumps), dumps_name);
  return {render_diff(d.result, d.title, render_options(o.trace)), d.json, d.differs};
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
                               if (!r.trace.compare) return std::nullopt;
                               return attn::passes(*r.trace.compare);
                             })
      .def("text", &attn::text_of)
      .def("array", &attn::step_array)
      .def("tiles", &attn::tiles_of)
      .def("info", &attn::step_info_of)
      .def("to_json",
           [](const attn::Run& r) { return attn::trace_to_json(r.trace, fmt::format("attn-trace {}", attn::version)); })
      .def("report_html", [](const attn::Run& r) {
        attn::Trace judged = r.trace;
        attn::add_verdict(judged, r.options);
        attn::ReportOptions report;
        report.version = attn::version;
        return attn::report_html(judged, report);
      });
  m.def("run", &attn::run, py::arg("text"), py::arg("options"));
  m.def("compare", &attn::compare, py::arg("text"), py::arg("options"));
  m.def("explain", &attn::explain, py::arg("text"), py::arg("options"));
  m.def("diff", &attn::diff, py::arg("text"), py::arg("options"), py::arg("dumps"), py::arg("dumps_name"));
  m.attr("version") = std::string(attn::version);
}
