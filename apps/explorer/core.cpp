// The explorer's core (docs/explorer.md): what the page calls, compiled to WebAssembly by em++
// (cmake/explorer_core.cmake) from the library the tool is built from. attn_explore runs what
// `attn-trace run FILE --json -` runs on the page's input, with the page's settings (engine, dtype, tiles,
// backward pass: run's options by their keywords, request/command_options.hpp), and keeps the trace. What the page
// draws at once comes from attn_result(2) (a small JSON: every step's name, formula and shape, compare's verdict, the
// tile walk in brief) and attn_values (every step's numbers in one array of doubles the page reads in place); the trace
// as the trace format (0) and the report page (1) are written only when asked, after the page is drawn. attn_explain
// and attn_explain_grad say what `explain` and `explain --grad` say of one number; attn_examples lists the bundled
// examples, attn_features the input's features the page offers.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn/version.hpp"
#include "io/examples.hpp"
#include "io/features.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "json/error.hpp"
#include "lessons/explain.hpp"
#include "lessons/explain_gradient.hpp"
#include "render/pages/explain_page.hpp"
#include "render/pages/report/report.hpp"
#include "request/command_options.hpp"
#include "request/request.hpp"
#include "request/trace_options.hpp"
#include "trace/record.hpp"

namespace attn {

namespace {

// The state of the last run the page asked for: the problem, its options, the trace as recorded,
// compare's verdict on it (which the report and the view show and `run`'s trace does not hold), and
// what was made of them, each made once when first asked for.
struct Session {
  std::shared_ptr<const Problem> problem;
  TraceOptions options;
  Trace trace;
  std::optional<CompareRecord> verdict;
  std::string trace_json, report, view, error, explanation;
  std::vector<double> values;  // every step's numbers, one after another, as the view lists them
  bool have_json = false, have_report = false;
};
Session session;

// The page's settings, a JSON object by the options' keywords (explorer_options(): engine, dtype, block_q,
// block_k, backward; request/command_options.hpp), each checked and set as the command line sets it; a
// setting left out, or null, is the option left out.
TraceOptions page_options(const char* settings) {
  TraceOptions o;
  o.file = "input";
  const nlohmann::json given = nlohmann::json::parse(settings, nullptr, false);
  if (!given.is_object()) throw UsageError("the page's settings: expected a JSON object");
  const std::vector<OptionDef<TraceOptions>> options = explorer_options();
  for (const auto& item : given.items()) {
    const std::string key = item.key();
    const auto option = std::find_if(options.begin(), options.end(),
                                     [&key](const OptionDef<TraceOptions>& d) { return keyword_of(d.name) == key; });
    if (option == options.end()) throw UsageError(fmt::format("{}: not a setting of the page", key));
    const nlohmann::json& value = item.value();
    if (value.is_null()) continue;
    set_option(*option, o, {value.is_string() ? value.get<std::string>() : value.dump()}, key);
  }
  // Far less than a tab may take: a page asked for a run too large is told so in one line.
  o.max_memory = "1G";
  return o;
}

// A number for the view's JSON: null where JSON has none (NaN, ±inf).
nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

// The verdict the page shows: the one the trace holds, else the one made for the page, else none.
const CompareRecord* verdict_of(const Session& s) {
  if (s.trace.compare) return &*s.trace.compare;
  return s.verdict ? &*s.verdict : nullptr;
}

// What the page draws at once, and nothing it does not read: the steps (name, formula, shape, where
// their numbers start in `values`, which explanation a click asks for), the tokens, compare's verdict and the flash
// walk in brief.
void make_view(Session& s) {
  const Trace& t = s.trace;
  const Problem& p = *s.problem;
  nlohmann::json steps = nlohmann::json::array();
  s.values.clear();
  for (const StepRecord& r : t.steps) {
    const std::size_t offset = s.values.size();
    s.values.insert(s.values.end(), r.value.values().begin(), r.value.values().end());
    // which explanation a click on one of its numbers asks for, from the step table: a forward score step's
    // number is a weight's story (explain --query --key), a gradient's is explain --grad's
    const char* explains = is_gradient_step(r.step) ? "gradient" : is_score_step(r.step) ? "weight" : "none";
    steps.push_back({{"name", step_info(r.step).name},
                     {"formula", r.formula},
                     {"shape", r.value.shape()},
                     {"offset", offset},
                     {"explains", explains}});
  }
  nlohmann::json view = {
      {"steps", steps}, {"tokens", p.tokens}, {"context_tokens", p.context_tokens}, {"cross", p.cross}};
  if (t.flash) {
    std::size_t rescaled = 0, skipped = 0;
    for (const FlashTile& tile : t.flash->tiles) {
      if (tile.skipped) ++skipped;
      bool any = false;
      for (const double a : tile.alpha.values()) any = any || (std::isfinite(a) && a < 1);
      if (any) ++rescaled;
    }
    view["flash"] = {{"block_q", t.flash->tile_size.Br},
                     {"block_k", t.flash->tile_size.Bc},
                     {"tiles", t.flash->tiles.size()},
                     {"skipped", skipped},
                     {"rescaled", rescaled}};
  }
  if (const CompareRecord* c = verdict_of(s)) {
    nlohmann::json gradients = nlohmann::json::array();
    for (const GradientCheck& g : c->gradients)
      gradients.push_back({{"step", step_info(g.step).name}, {"pass", g.pass}});
    view["compare"] = {{"pass", passes(*c)},
                       {"output_pass", c->pass},
                       {"reference", reference_name(c->dtype)},
                       {"flash_vs_ref", {{"max_abs", finite_or_null(c->flash_vs_ref.max_abs)}}},
                       {"bound", finite_or_null(c->bound)},
                       {"gradients", gradients}};
  }
  s.view = view.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void explore(const char* input, const TraceOptions& o) {
  Session s;
  s.options = o;
  s.problem = std::make_shared<const Problem>(load_problem(input, o.file));
  s.trace = record_run(s.problem, plan_run(o, *s.problem));
  if (!s.trace.compare) {
    add_verdict(s.trace, o);
    s.verdict = std::move(s.trace.compare);
    s.trace.compare.reset();
  }
  make_view(s);
  session = std::move(s);
}

const std::string& trace_json() {
  if (!session.have_json) {
    session.trace_json = trace_to_json(session.trace, fmt::format("attn-trace {}", version));
    session.have_json = true;
  }
  return session.trace_json;
}

const std::string& report_page() {
  if (!session.have_report) {
    ReportOptions report;
    report.version = version;
    // The report shows the verdict: lent to the trace while the report is written.
    struct Lend {
      Session& s;
      explicit Lend(Session& to) : s(to) { s.trace.compare.swap(s.verdict); }
      ~Lend() { s.trace.compare.swap(s.verdict); }
      Lend(const Lend&) = delete;
      Lend& operator=(const Lend&) = delete;
    };
    std::optional<Lend> lent;
    if (session.verdict) lent.emplace(session);
    session.report = report_html(session.trace, report);
    session.have_report = true;
  }
  return session.report;
}

// What `explain` prints to a pipe: 100 columns of Unicode without colour.
RenderOptions explanation_options() {
  RenderOptions r;
  r.width = 100;
  r.color = false;
  return r;
}

}  // namespace

}  // namespace attn

// 0: the results are ready; 2: the input (or the request) was refused, and attn_result(3) says why in
// one line; 1: an internal error, said the same way.
extern "C" int attn_explore(const char* input, const char* settings) {
  try {
    attn::explore(input, attn::page_options(settings));
    return 0;
  } catch (const attn::InputError& e) {
    attn::session.error = e.what();
  } catch (const attn::UsageError& e) {
    attn::session.error = e.what();
  } catch (const std::bad_alloc&) {
    attn::session.error = "out of memory: the input is too large for this page";
  } catch (const std::exception& e) {
    attn::session.error = fmt::format("internal error: {}", e.what());
    return 1;
  }
  return 2;
}

// 0 the trace (the trace format), 1 the report page, 2 the view (make_view), 3 the error line of a
// refused input or explanation, 4 the last explanation.
extern "C" const char* attn_result(int part) {
  switch (part) {
    case 0: return attn::trace_json().c_str();
    case 1: return attn::report_page().c_str();
    case 2: return attn::session.view.c_str();
    case 4: return attn::session.explanation.c_str();
    default: return attn::session.error.c_str();
  }
}

// Every step's numbers, as attn_result(2) places them; attn_value_count of them.
extern "C" const double* attn_values() { return attn::session.values.data(); }
extern "C" unsigned attn_value_count() { return static_cast<unsigned>(attn::session.values.size()); }

namespace {

// Runs `explain` into the session's explanation: 0 done, 2 refused (attn_result(3) says why).
template <class F>
int explaining(F&& f) {
  try {
    if (!attn::session.problem) throw attn::UsageError("nothing has been computed yet");
    attn::session.explanation = f();
    return 0;
  } catch (const std::bad_alloc&) {
    attn::session.error = "out of memory: the input is too large for this page";
  } catch (const std::exception& e) {
    attn::session.error = e.what();
  }
  return 2;
}

}  // namespace

// `explain --query i --key j --head h` (and --batch b) on the last input, with its engine (naive for
// both), dtype and tiles.
extern "C" int attn_explain(unsigned batch, unsigned head, unsigned query, unsigned key) {
  return explaining([&] {
    const attn::Session& s = attn::session;
    const attn::Engine engine = s.options.engine == attn::Engine::flash ? attn::Engine::flash : attn::Engine::naive;
    attn::TraceOptions o = s.options;
    o.engine = engine;
    const attn::RunRequest request = attn::run_request(o, *s.problem, {});
    const attn::Explanation e = attn::explain_weight(s.problem, {.batch = batch,
                                                                 .head = head,
                                                                 .query = query,
                                                                 .key = key,
                                                                 .engine = engine,
                                                                 .dtype = s.options.dtype,
                                                                 .tile_size = request.tile_size});
    const std::string title =
        fmt::format("{}, {}, {} engine", s.options.file, attn::name_of(s.options.dtype), attn::name_of(engine));
    return attn::render_explanation(e, title, attn::explanation_options());
  });
}

// `explain --grad STEP --index …` on the last input: `index` the entry as the trace indexes the step,
// `count` numbers.
extern "C" int attn_explain_grad(const char* step, const unsigned* index, unsigned count) {
  return explaining([&] {
    const attn::Session& s = attn::session;
    const std::optional<attn::Step> found = attn::step_from_name(step);
    if (!found || !attn::is_gradient_step(*found)) throw attn::UsageError(fmt::format("{}: not a gradient step", step));
    std::vector<std::size_t> at(index, index + count);
    const attn::GradientExplanation e =
        attn::explain_gradient(s.problem, {.step = *found, .index = at, .dtype = s.options.dtype});
    return attn::render_gradient_explanation(
        e, fmt::format("{}, {}, naive backward", s.options.file, attn::name_of(s.options.dtype)),
        attn::explanation_options());
  });
}

// The input's optional features the page offers a control for, from the features table (io/features.hpp:
// feature_controls_json).
extern "C" const char* attn_features() {
  static const std::string list = attn::feature_controls_json();
  return list.c_str();
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
