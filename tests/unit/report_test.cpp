// The HTML report's page (render/pages/report/report.hpp): what came from a file cannot break out of the page, and
// every step has its section. tests/report/browser_test.py checks the page in a real browser.

#include <cstddef>
#include <memory>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "io/load.hpp"
#include "observe/steps.hpp"
#include "render/draw/escape.hpp"
#include "render/pages/report/report.hpp"
#include "render/pages/report/budget.hpp"
#include "render/pages/report/report_assets.hpp"
#include "trace/record.hpp"

namespace attn {

namespace {

// "The cat sat" with `tokens` instead of its own words.
Trace cat_trace(const std::string& tokens_json, Engine engine = Engine::both) {
  const std::string input = fmt::format(
      R"({{"description": "the cat sat",
          "tokens": {},
          "X": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
          "W_q": [[1, 0], [0, 1], [1, 0], [0, 1]],
          "W_k": [[0, 1], [1, 0], [0, 1], [1, 0]],
          "W_v": [[1, 0], [0, 1], [0, 1], [1, 0]]}})",
      tokens_json);
  auto problem = std::make_shared<const Problem>(load_problem(input, "cat.json"));
  RunRequest request;
  request.engine = engine;
  request.tile_size = {2, 1};
  return record_run(problem, request);
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

ReportOptions options() {
  ReportOptions o;
  o.version = "test";
  return o;
}

}  // namespace

TEST_CASE("json_string writes < as \\u003c and control characters as escapes, so no </script> can end the data",
          "[report][escape]") {
  CHECK(json_string("</script><b>") == R"("\u003c/script>\u003cb>")");
  CHECK(json_string("\x1b[31m") == R"("\u001b[31m")");
  CHECK(json_string("a\"b\\c\nd") == R"("a\"b\\c\nd")");
  CHECK(html_escape("<b>\"x\" & 'y'</b>") == "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;");
}

TEST_CASE("A token </script><b> and an ESC byte stay text in the report: in the data, the tables and the title",
          "[report][escape]") {
  const Trace trace = cat_trace(R"(["</script><b>x", "\u001b[31mred", "sat"])");
  const std::string page = report_html(trace, options());
  // The page's own two scripts end once each, and nothing else does.
  CHECK(count(page, "</script>") == 2);
  CHECK(count(page, "<script") == 2);
  CHECK(page.find("<b>x") == std::string::npos);
  CHECK(page.find('\x1b') == std::string::npos);
  // The token is shown written out: as HTML text, and as JSON text that report.js puts in textContent.
  CHECK(page.find("&lt;/script&gt;&lt;b&gt;x") != std::string::npos);
  CHECK(page.find(R"("\u003c/script>\u003cb>x")") != std::string::npos);
  CHECK(page.find(R"(\\x1b[31mred)") != std::string::npos);  // in the JSON: visible()'s \x1b, its \ escaped
  CHECK(page.find("<span class=\"token\">\\x1b[31mred</span>") != std::string::npos);  // in the HTML
}

TEST_CASE("The report has a section id=step-NAME for each step of its input, and the tile walk's hooks", "[report]") {
  const std::string page = report_html(cat_trace(R"(["The", "cat", "sat"])"), options());
  for (const Step step : all_steps()) {
    INFO(step_info(step).name);
    CHECK(count(page, fmt::format("id=\"step-{}\"", step_info(step).name)) == (is_position_step(step) ? 0 : 1));
  }
  CHECK(count(page, "id=\"tile-state\"") == 1);
  CHECK(count(page, "<button type=\"button\" data-action=\"next-tile\"") == 1);
  CHECK(count(page, "<button type=\"button\" data-action=\"prev-tile\"") == 1);
  CHECK(count(page, "id=\"trace-data\"") == 1);
  CHECK(count(page, "id=\"naive-vs-flash\"") == 1);
  // Self-contained: nothing that a browser would fetch.
  CHECK(page.find(" src=") == std::string::npos);
  CHECK(page.find("href=\"http") == std::string::npos);
  CHECK(page.find("@import") == std::string::npos);
}

TEST_CASE("A flash-only report keeps a section for each score step, saying that flash never forms it", "[report]") {
  const std::string page = report_html(cat_trace(R"(["The", "cat", "sat"])", Engine::flash), options());
  for (const Step step : all_steps())
    CHECK(count(page, fmt::format("id=\"step-{}\"", step_info(step).name)) == (is_position_step(step) ? 0 : 1));
  CHECK(page.find("never forms this n × m matrix whole") != std::string::npos);
  // Its output step is flash's own: there is no naive output to take it from.
  CHECK(page.find("id=\"naive-vs-flash\"") != std::string::npos);
  CHECK(page.find("Only one engine's output is in this trace") != std::string::npos);
  CHECK(page.find("id=\"diff-maps\"") == std::string::npos);
}

TEST_CASE("Over its budget of numbers the report leaves heatmaps out and says so", "[report][budget]") {
  ReportOptions o = options();
  o.max_step_numbers = 20;  // "The cat sat" has 3 × 2 projections and 3 × 3 score matrices
  o.max_tile_numbers = 0;
  const std::string page = report_html(cat_trace(R"(["The", "cat", "sat"])"), o);
  CHECK(page.find("\"values\":null") != std::string::npos);
  CHECK(page.find("heatmaps are not in this page") != std::string::npos);
  CHECK(page.find("The tile walk holds the first 0 of the 2 query tiles") != std::string::npos);
}

TEST_CASE("The report's budget takes the first head's weights, then every step's first head, then the rest",
          "[report][budget]") {
  using report_detail::PanelSize;
  using report_detail::StepView;
  // Two steps of three heads, their panels listed last head first (the order must not matter): scores of
  // 4 cells a head, weights of 5.
  const StepRecord scores{Step::scores, "", "", {}}, weights{Step::weights, "", "", {}};
  const auto view = [](const StepRecord& rec, std::size_t cells) {
    StepView v;
    v.rec = &rec;
    for (const std::size_t head : {2, 1, 0}) v.panels.push_back(PanelSize{head, cells});
    v.embedded.assign(3, false);
    return v;
  };
  std::vector<StepView> views = {view(scores, 4), view(weights, 5)};
  // By hand: 5 (weights, head 0) + 4 (scores, head 0) = 9 fits in 12; another head's weights (5 more)
  // or scores (4 more) do not.
  report_detail::plan_heatmaps(views, 12);
  CHECK(views[1].embedded == std::vector<bool>{false, false, true});
  CHECK(views[0].embedded == std::vector<bool>{false, false, true});
  // With 19: the other heads' weights come before the other heads' scores (5 + 4 + 5 + 5 = 19).
  views = {view(scores, 4), view(weights, 5)};
  report_detail::plan_heatmaps(views, 19);
  CHECK(views[1].embedded == std::vector<bool>{true, true, true});
  CHECK(views[0].embedded == std::vector<bool>{false, false, true});
}

TEST_CASE("The embedded script and style sheet cannot end their own elements early", "[report]") {
  for (const std::string_view js : {report_js, report_walk_js, report_backward_js})
    CHECK(js.find("</script") == std::string_view::npos);
  for (const std::string_view css : {report_css, report_backward_css})
    CHECK(css.find("</style") == std::string_view::npos);
  CHECK(report_template.find("{{data}}") != std::string_view::npos);
}

}  // namespace attn
