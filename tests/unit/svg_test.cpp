// The SVG figure of `attn-trace plot` (render/pages/svg.hpp), read back: one <rect> per matrix entry whose
// data-value is the trace's value, the mask's cells grey and hatched, one panel per head with
// --all-heads, and tokens from the input written out and escaped so the document stays valid XML.

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "io/load.hpp"
#include "render/pages/svg.hpp"
#include "text/visible.hpp"
#include "trace/record.hpp"

using namespace attn;

namespace {

Trace trace_of_problem(Problem problem) {
  return record_run(std::make_shared<const Problem>(std::move(problem)), RunRequest{});
}

Trace trace_of(const std::string& example) {
  return trace_of_problem(load_problem_file(std::string(ATTN_SOURCE_DIR) + "/" + example));
}

std::string plot(const Trace& trace, Step step, std::optional<std::size_t> head = {}, bool all_heads = false,
                 std::size_t batch = 0) {
  return render_svg(trace, PlotOptions{step, head, all_heads, batch});
}

// The attributes of every element `<tag class="cls" …>` of `svg`, in order.
std::vector<std::map<std::string, std::string>> elements(const std::string& svg, const std::string& tag,
                                                         const std::string& cls) {
  std::vector<std::map<std::string, std::string>> out;
  const std::regex element("<" + tag + " class=\"" + cls + "\"([^>]*)>");
  const std::regex attribute(R"(([\w:-]+)="([^"]*)\")");
  for (auto e = std::sregex_iterator(svg.begin(), svg.end(), element); e != std::sregex_iterator(); ++e) {
    std::map<std::string, std::string> attributes;
    const std::string inside = (*e)[1];
    for (auto a = std::sregex_iterator(inside.begin(), inside.end(), attribute); a != std::sregex_iterator(); ++a)
      attributes[(*a)[1]] = (*a)[2];
    out.push_back(std::move(attributes));
  }
  return out;
}

std::vector<std::map<std::string, std::string>> cells(const std::string& svg) { return elements(svg, "rect", "cell"); }

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

// The contents of the first <g class="cls">.
std::string group(const std::string& svg, const std::string& cls) {
  const std::size_t begin = svg.find("<g class=\"" + cls + "\"");
  return begin == std::string::npos ? "" : svg.substr(begin, svg.find("</g>", begin) - begin);
}

const StepRecord& record(const Trace& trace, Step step) {
  return *std::find_if(trace.steps.begin(), trace.steps.end(), [&](const StepRecord& r) { return r.step == step; });
}

}  // namespace

TEST_CASE("The worked example's weights are nine cells whose data-value reads back to the trace's values",
          "[svg][plot]") {
  const Trace trace = trace_of("data/the_cat_sat.json");
  const std::string svg = plot(trace, Step::weights);
  const auto found = cells(svg);
  REQUIRE(found.size() == 9);
  const auto weights = record(trace, Step::weights).value.values();  // (1, 3, 3)
  for (const auto& cell : found) {
    const std::size_t r = std::stoul(cell.at("data-row")), c = std::stoul(cell.at("data-col"));
    INFO("row " << r << ", column " << c << ": data-value " << cell.at("data-value"));
    // The shortest float32 text, read as a double and rounded to float32, is the very float computed.
    CHECK(static_cast<float>(std::strtod(cell.at("data-value").c_str(), nullptr)) ==
          static_cast<float>(weights[r * 3 + c]));
    CHECK_FALSE(cell.count("data-removed"));
  }
}

TEST_CASE("The weight of \"cat\" on \"The\" is 0.768, as docs/walkthrough.md works it out by hand", "[svg][plot]") {
  const std::string svg = plot(trace_of("data/the_cat_sat.json"), Step::weights);
  const auto found = cells(svg);
  const auto the_cat = std::find_if(found.begin(), found.end(), [](const auto& cell) {
    return cell.at("data-row") == "0" && cell.at("data-col") == "1";  // query "The", key "cat"
  });
  REQUIRE(the_cat != found.end());
  CHECK(std::strtod(the_cat->at("data-value").c_str(), nullptr) == Approx(0.7679).margin(5e-5));
  // Small enough to print each value in its cell, and each row's sum beside it.
  CHECK(count_of(group(svg, "values"), ">0.768</text>") == 2);
  CHECK(count_of(group(svg, "row-sums"), ">1.000</text>") == 3);
  // The title names the step and its formula; the axes carry the tokens.
  CHECK(svg.find("<title>attn-trace: weights, head 0</title>") != std::string::npos);
  CHECK(svg.find("A = softmax(S&apos;&apos;) along each row") != std::string::npos);
  CHECK(count_of(svg, ">cat</text>") == 2);
}

TEST_CASE("Cells the mask removed are grey and hatched and carry data-removed", "[svg][plot]") {
  const Trace trace = trace_of("data/gpt_causal.json");  // 4 tokens, causal: 6 pairs removed per head
  for (const Step step : {Step::masked, Step::weights}) {
    const std::string svg = plot(trace, step);
    const auto found = cells(svg);
    REQUIRE(found.size() == 16);
    std::size_t removed = 0;
    for (const auto& cell : found) {
      const bool above_diagonal = std::stoul(cell.at("data-col")) > std::stoul(cell.at("data-row"));
      INFO(step_info(step).name << " row " << cell.at("data-row") << ", column " << cell.at("data-col"));
      CHECK(cell.count("data-removed") == (above_diagonal ? 1u : 0u));
      CHECK((cell.at("fill") == "url(#attn-removed)") == above_diagonal);
      if (above_diagonal && step == Step::masked) CHECK(cell.at("data-value") == "-inf");
      if (above_diagonal && step == Step::weights) CHECK(cell.at("data-value") == "0");
      removed += above_diagonal ? 1 : 0;
    }
    CHECK(removed == 6);
    // The hatch is defined in the document, and the legend has a swatch for it.
    CHECK(svg.find("<pattern id=\"attn-removed\"") != std::string::npos);
    CHECK(svg.find(">masked</text>") != std::string::npos);
  }
  // Without a mask there is nothing to explain.
  const std::string unmasked = plot(trace_of("data/the_cat_sat.json"), Step::weights);
  CHECK(unmasked.find("data-removed") == std::string::npos);
  CHECK(unmasked.find(">masked</text>") == std::string::npos);
}

TEST_CASE("All heads (--all-heads) are one panel each, with one colour bar for all", "[svg][plot]") {
  const Trace gpt = trace_of("data/gpt_causal.json"), gqa = trace_of("data/gqa.json");  // 2 heads; 4 heads on 2
  const auto heads_of = [](const std::string& svg) {
    std::vector<std::string> heads;
    for (const auto& panel : elements(svg, "g", "panel")) heads.push_back(panel.at("data-head"));
    return heads;
  };
  const std::string two = plot(gpt, Step::weights, {}, true);
  CHECK(heads_of(two) == std::vector<std::string>{"0", "1"});
  CHECK(cells(two).size() == 2 * 16);
  CHECK(count_of(two, "class=\"colorbar\"") == 1);
  CHECK(two.find("<title>attn-trace: weights, every head</title>") != std::string::npos);
  CHECK(heads_of(plot(gqa, Step::scores, {}, true)) == std::vector<std::string>{"0", "1", "2", "3"});
  // A key/value step has a panel per key/value head.
  const std::string kv = plot(gqa, Step::k_heads, {}, true);
  CHECK(heads_of(kv) == std::vector<std::string>{"0", "1"});
  CHECK(kv.find("kv head 1 (read by query heads 2–3)") != std::string::npos);
}

TEST_CASE("One head is head 0 unless chosen, a key/value step shows the head the query head reads", "[svg][plot]") {
  const Trace gqa = trace_of("data/gqa.json");  // query heads 2 and 3 read key/value head 1
  const auto head_of = [](const std::string& svg) {
    const auto panels = elements(svg, "g", "panel");
    REQUIRE(panels.size() == 1);
    return panels[0].at("data-head");
  };
  CHECK(head_of(plot(gqa, Step::weights)) == "0");
  CHECK(head_of(plot(gqa, Step::weights, 3)) == "3");
  CHECK(head_of(plot(gqa, Step::k_heads, 3)) == "1");
  CHECK(head_of(plot(gqa, Step::v_heads, 1)) == "0");
  // The panel's values are that head's.
  const auto values = record(gqa, Step::weights).value.values();  // (4, 4, 4)
  const auto found = cells(plot(gqa, Step::weights, 2));
  for (std::size_t k = 0; k < found.size(); ++k)
    CHECK(static_cast<float>(std::strtod(found[k].at("data-value").c_str(), nullptr)) ==
          static_cast<float>(values[2 * 16 + k]));
  // A step without heads is one panel without a head.
  CHECK(elements(plot(gqa, Step::output), "g", "panel")[0].count("data-head") == 0);
}

TEST_CASE("A batch item's panel is labelled by that item's tokens", "[svg][plot]") {
  const Trace trace = trace_of("data/padded_batch.json");  // item 1: dogs bark <pad> <pad>
  const std::string svg = plot(trace, Step::weights, {}, false, 1);
  CHECK(svg.find(">dogs</text>") != std::string::npos);
  CHECK(svg.find(">&lt;pad&gt;</text>") != std::string::npos);
  CHECK(svg.find("batch 1, head 0") != std::string::npos);
  CHECK(count_of(svg, "data-removed=\"1\"") == 8);  // the two padding keys, for each of the 4 queries
}

TEST_CASE("Weights show each row's sum, or \"empty\" for a row the mask emptied", "[svg][plot]") {
  const Trace trace = trace_of_problem(load_problem(R"({"tokens": ["a", "b"], "X": [[1, 0], [0, 1]],
    "W_q": [[1], [0]], "W_k": [[0], [1]], "W_v": [[1], [1]],
    "mask": {"type": "custom", "allow": [[false, false], [true, true]]}})",
                                                    "empty.json"));
  const std::string svg = plot(trace, Step::weights);
  CHECK(svg.find(">empty</text>") != std::string::npos);
  CHECK(count_of(svg, ">1.000</text>") == 1);
  CHECK(count_of(svg, "data-removed=\"1\"") == 2);
}

TEST_CASE("Tokens are written out and escaped: markup, control characters, bytes that are not UTF-8", "[svg][plot]") {
  Problem p = load_problem(R"({"tokens": ["<b>&\"'", "a\u001b[31mb", "\u202eevil", "d"],
    "X": [[1, 0], [0, 1], [1, 1], [0, 0]], "W_q": [[1], [0]], "W_k": [[0], [1]], "W_v": [[1], [1]]})",
                           "tokens.json");
  p.tokens[0][3] = p.context_tokens[0][3] = "bad\xff\xfe";  // the loader refuses such bytes; a trace could not
  const std::string svg = plot(trace_of_problem(std::move(p)), Step::scores);
  CHECK(count_of(svg, ">&lt;b&gt;&amp;&quot;&apos;</text>") == 2);
  CHECK(count_of(svg, ">a\\x1b[31mb</text>") == 2);
  CHECK(count_of(svg, ">\\u202eevil</text>") == 2);
  CHECK(count_of(svg, ">bad\\xff\\xfe</text>") == 2);
  CHECK(svg.find("<b>") == std::string::npos);
  // Nothing a file put there reaches the document raw: every line is valid UTF-8 without control
  // characters, so it is XML 1.0 text.
  std::size_t start = 0;
  for (std::size_t end = svg.find('\n'); end != std::string::npos; start = end + 1, end = svg.find('\n', start)) {
    const std::string line = svg.substr(start, end - start);
    INFO(line);
    CHECK(visible(line) == line);
  }
  // U+FFFE, allowed by UTF-8 but not by XML, is written out too.
  Problem q =
      load_problem(R"({"tokens": ["x\ufffey"], "X": [[1]], "W_q": [[1]], "W_k": [[1]], "W_v": [[1]]})", "q.json");
  CHECK(plot(trace_of_problem(std::move(q)), Step::weights).find(">x\\ufffey</text>") != std::string::npos);
}

TEST_CASE("A 64 × 64 matrix is 4096 cells in a figure about 1200 units wide, its numbers left to data-value",
          "[svg][plot]") {
  std::string tokens, rows;
  for (int i = 0; i < 64; ++i) {
    tokens += fmt::format("{}\"token{}\"", i == 0 ? "" : ", ", i);
    rows += fmt::format("{}[{}, {}]", i == 0 ? "" : ", ", (i % 7) * 0.25, (i % 5) * -0.5);
  }
  const Trace trace = trace_of_problem(load_problem(
      fmt::format(R"({{"tokens": [{}], "X": [{}], "W_q": [[1], [0]], "W_k": [[0], [1]], "W_v": [[1], [1]]}})", tokens,
                  rows),
      "long.json"));
  const std::string svg = plot(trace, Step::weights);
  CHECK(cells(svg).size() == 4096);
  CHECK(svg.find("class=\"values\"") == std::string::npos);
  std::smatch size;
  REQUIRE(std::regex_search(svg, size,
                            std::regex(R"re(width="([\d.]+)" height="([\d.]+)" viewBox="0 0 ([\d.]+) ([\d.]+)")re")));
  CHECK(std::stod(size[1]) <= 1240);
  CHECK(std::stod(size[2]) <= 1240);
  CHECK(size[1] == size[3]);
  CHECK(size[2] == size[4]);
}

TEST_CASE("The document stands alone: a viewBox, a title, generic fonts, no script, nothing outside it",
          "[svg][plot]") {
  for (const Step step : all_steps()) {
    if (is_position_step(step)) continue;  // data/gqa.json has neither rope nor alibi
    const std::string svg = plot(trace_of("data/gqa.json"), step);
    INFO(step_info(step).name);
    CHECK(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(svg.find("viewBox=\"0 0 ") != std::string::npos);
    CHECK(svg.find("<title>") != std::string::npos);
    CHECK(svg.find("<script") == std::string::npos);
    CHECK(svg.find("href") == std::string::npos);
    CHECK(svg.find("@import") == std::string::npos);
    CHECK(std::regex_search(svg, std::regex(R"(url\([^#])")) == false);
    CHECK(std::regex_search(svg, std::regex(R"(font-family="(?!sans-serif"|monospace")[^"]*")")) == false);
    REQUIRE(svg.size() > 7);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  }
}
