// The explorer's core (docs/explorer.md): what the page calls, compiled to WebAssembly by em++
// (cmake/explorer_core.cmake) from the library the tool is built from. One call runs what
// `attn-trace run FILE --json -` runs on the page's input, with the page's engine, dtype, tiles and
// backward pass, and makes from that trace what `attn-trace report` makes (with compare's verdict). The
// page reads each result with attn_result, and the bundled examples (`attn-trace example`) with
// attn_examples.

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn/version.hpp"
#include "io/examples.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "json/error.hpp"
#include "render/pages/report/report.hpp"
#include "request/request.hpp"
#include "request/trace_options.hpp"
#include "trace/record.hpp"

namespace attn {

namespace {

// What attn_result hands back: 0 the trace (the trace format), 1 the report page, 3 the error line of a
// refused input.
struct Results {
  std::string trace, report, error;
};
Results results;

// The page's request as `attn-trace run` would take it: the input's text, named "input" in messages, the
// engine and dtype by the command line's names, the tiles (0: the default) and the backward pass.
TraceOptions page_options(const char* engine, const char* dtype, unsigned block_q, unsigned block_k, int backward) {
  TraceOptions o;
  o.file = "input";
  const std::optional<Engine> e = engine_from_name(engine);
  const std::optional<DType> d = dtype_from_name(dtype);
  if (!e) throw UsageError(fmt::format("engine {}: expected naive, flash or both", engine));
  if (!d) throw UsageError(fmt::format("dtype {}: expected float32, float64, float16 or bfloat16", dtype));
  o.engine = *e;
  o.dtype = *d;
  if (block_q != 0) o.block_q = block_q;
  if (block_k != 0) o.block_k = block_k;
  o.backward = backward != 0;
  // Far less than a tab may take: a page asked for a run too large is told so in one line.
  o.max_memory = "1G";
  return o;
}

void explore(const char* input, const TraceOptions& o) {
  results = {};
  const std::shared_ptr<const Problem> problem = std::make_shared<const Problem>(load_problem(input, o.file));
  Trace trace = record_run(problem, plan_run(o, *problem));
  results.trace = trace_to_json(trace, fmt::format("attn-trace {}", version));
  add_verdict(trace, o);
  ReportOptions report;
  report.version = version;
  results.report = report_html(trace, report);
}

}  // namespace

}  // namespace attn

// 0: the results are ready; 2: the input (or the request) was refused, and attn_result(3) says why in
// one line; 1: an internal error, said the same way.
extern "C" int attn_explore(const char* input, const char* engine, const char* dtype, unsigned block_q,
                            unsigned block_k, int backward) {
  try {
    attn::explore(input, attn::page_options(engine, dtype, block_q, block_k, backward));
    return 0;
  } catch (const attn::InputError& e) {
    attn::results.error = e.what();
  } catch (const attn::UsageError& e) {
    attn::results.error = e.what();
  } catch (const std::bad_alloc&) {
    attn::results.error = "out of memory: the input is too large for this page";
  } catch (const std::exception& e) {
    attn::results.error = fmt::format("internal error: {}", e.what());
    return 1;
  }
  return 2;
}

extern "C" const char* attn_result(int part) {
  switch (part) {
    case 0: return attn::results.trace.c_str();
    case 1: return attn::results.report.c_str();
    default: return attn::results.error.c_str();
  }
}

// The bundled examples as JSON: [{"name", "description", "text"}, …], the text each file byte for byte.
extern "C" const char* attn_examples() {
  static const std::string list = [] {
    nlohmann::json out = nlohmann::json::array();
    for (const attn::Example& e : attn::examples())
      out.push_back({{"name", e.name}, {"description", attn::example_description(e)}, {"text", e.text}});
    return out.dump();
  }();
  return list.c_str();
}
