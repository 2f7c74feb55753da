// The documents of `--format markdown|latex|csv` (render/document.hpp), on the worked example whose
// weights are known by hand, on a causal mask, and on tokens chosen to break each format's syntax.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "io/load.hpp"
#include "render/pages/document.hpp"
#include "trace/record.hpp"

using namespace attn;

namespace {

Problem example(const std::string& name) { return load_problem_file(std::string(ATTN_SOURCE_DIR) + "/data/" + name); }

Trace trace_of(Problem problem, std::vector<Step> only = {}, Engine engine = Engine::naive) {
  RunRequest request;
  request.engine = engine;
  request.filter.only = std::move(only);
  return record_run(std::make_shared<const Problem>(std::move(problem)), request);
}

std::string document(const Trace& trace, DocFormat format) { return render_document(trace, format, DocOptions{}); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', from)) {
    out.push_back(text.substr(from, at - from));
    from = at + 1;
  }
  if (from < text.size()) out.push_back(text.substr(from));
  return out;
}

// The worked example's weights by hand (data/the_cat_sat.json, docs/walkthrough.md): Q = X·W_q gives
// The [2, 0], cat [0, 2], sat [1, 1]; K = X·W_k gives The [0, 2], cat [2, 0], sat [1, 1]. So the
// scores S = Q·Kᵀ are The [0, 4, 2], cat [4, 0, 2], sat [2, 2, 2], scaled by 1/√2 (d_k = 2) and
// put through a softmax: "cat" gets e^{2√2} / (e^{2√2} + e^0 + e^{√2}) = 16.92 / 22.03 = 0.7679 on
// "The", 1 / 22.03 = 0.0454 on itself and 4.113 / 22.03 = 0.1867 on "sat"; "sat" 1/3 on each.
std::vector<std::vector<double>> hand_weights() {
  const std::vector<std::vector<double>> scores = {{0, 4, 2}, {4, 0, 2}, {2, 2, 2}};
  std::vector<std::vector<double>> weights;
  for (const std::vector<double>& row : scores) {
    double sum = 0;
    for (const double s : row) sum += std::exp(s / std::sqrt(2.0));
    std::vector<double> w;
    for (const double s : row) w.push_back(std::exp(s / std::sqrt(2.0)) / sum);
    weights.push_back(w);
  }
  return weights;
}

const std::vector<std::string> cat_sat = {"The", "cat", "sat"};

// A tiny RFC 4180 reader: fields split at commas, quoted fields with "" for a quote, records at
// line breaks outside quotes (CRLF or LF).
std::vector<std::vector<std::string>> read_csv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, was_quoted = false;
  for (std::size_t at = 0; at < text.size(); ++at) {
    const char c = text[at];
    if (quoted) {
      if (c != '"') field += c;
      else if (at + 1 < text.size() && text[at + 1] == '"') {
        field += '"';
        ++at;
      } else quoted = false;
      continue;
    }
    if (c == '"') {
      if (!field.empty() || was_quoted) throw std::runtime_error("a quote inside an unquoted field");
      quoted = was_quoted = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
      was_quoted = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && at + 1 < text.size() && text[at + 1] == '\n') ++at;
      record.push_back(std::move(field));
      records.push_back(std::move(record));
      record.clear();
      field.clear();
      was_quoted = false;
    } else {
      if (was_quoted) throw std::runtime_error("text after a closing quote");
      field += c;
    }
  }
  if (quoted) throw std::runtime_error("an unclosed quote");
  if (!field.empty() || !record.empty()) {
    record.push_back(std::move(field));
    records.push_back(std::move(record));
  }
  return records;
}

// The cells of a markdown table row, split at the pipes a backslash does not escape (as GitHub's
// table parser does: a backslash takes the character after it).
std::vector<std::string> md_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t at = 0; at < line.size(); ++at) {
    if (line[at] == '\\' && at + 1 < line.size()) {
      cell += line.substr(at, 2);
      ++at;
    } else if (line[at] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else cell += line[at];
  }
  cells.push_back(cell);
  return cells;
}

// LaTeX's structure, as far as a compiler would first trip on it: outside comments, braces balance
// (\{ and \} are characters, not braces), math shifts pair up on each line, every \begin{X} meets its
// \end{X}, and each row of a tabular has one & fewer than its columns. Returns "" when sound, else
// what is wrong and where.
std::string latex_problem(const std::string& tex) {
  int depth = 0;
  std::vector<std::string> environments;
  std::size_t columns = 0;
  std::size_t number = 0;
  for (const std::string& line : lines_of(tex)) {
    ++number;
    std::size_t ampersands = 0, dollars = 0;
    std::string code;  // the line without its comment
    for (std::size_t at = 0; at < line.size(); ++at) {
      const char c = line[at];
      if (c == '%') break;
      if (c == '\\' && at + 1 < line.size()) {
        const char next = line[at + 1];
        if (std::isalpha(static_cast<unsigned char>(next)) == 0) {  // a control symbol: \{ \& \\ ...
          code += line.substr(at, 2);
          ++at;
          continue;
        }
      }
      if (c == '{') ++depth;
      if (c == '}' && --depth < 0) return fmt::format("line {}: a }} closes nothing: {}", number, line);
      if (c == '&') ++ampersands;
      if (c == '$') ++dollars;
      code += c;
    }
    if (dollars % 2 != 0) return fmt::format("line {}: an unpaired $: {}", number, line);
    for (std::size_t at = code.find("\\begin{"); at != std::string::npos; at = code.find("\\begin{", at + 1)) {
      const std::size_t end = code.find('}', at);
      environments.push_back(code.substr(at + 7, end - at - 7));
      if (environments.back() == "tabular") {
        const std::size_t spec = code.find('{', end);
        const std::string cols = code.substr(spec + 1, code.find('}', spec) - spec - 1);
        columns = static_cast<std::size_t>(std::count_if(cols.begin(), cols.end(), [](char k) { return k != '|'; }));
      }
    }
    for (std::size_t at = code.find("\\end{"); at != std::string::npos; at = code.find("\\end{", at + 1)) {
      const std::string name = code.substr(at + 5, code.find('}', at) - at - 5);
      if (environments.empty() || environments.back() != name)
        return fmt::format("line {}: \\end{{{}}} without its \\begin", number, name);
      environments.pop_back();
    }
    const bool row = code.size() >= 2 && code.compare(code.size() - 2, 2, "\\\\") == 0;
    if (row && ampersands + 1 != columns)
      return fmt::format("line {}: {} cells in a tabular of {} columns: {}", number, ampersands + 1, columns, line);
  }
  if (depth != 0) return fmt::format("{} braces left open", depth);
  if (!environments.empty()) return fmt::format("\\begin{{{}}} never ends", environments.back());
  return "";
}

std::string standalone(const std::string& body) {
  return "\\documentclass{article}\n\\begin{document}\n" + body + "\\end{document}\n";
}

}  // namespace

TEST_CASE("Markdown shows the worked example's weights, computed by hand, in a pipe table with token labels",
          "[document][markdown]") {
  const std::string md = document(trace_of(example("the_cat_sat.json"), {Step::weights}), DocFormat::markdown);
  INFO(md);
  CHECK(contains(md, "## weights\n"));
  CHECK(contains(md, "`A = softmax(S'') along each row` · [1 head × 3 query × 3 key]"));
  CHECK(contains(md, "|  | The | cat | sat |\n| --- | ---: | ---: | ---: |\n"));
  const std::vector<std::vector<double>> w = hand_weights();
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(contains(md, fmt::format("| {} | {:.4f} | {:.4f} | {:.4f} |\n", cat_sat[i], w[i][0], w[i][1], w[i][2])));
  CHECK(contains(md, "| cat | 0.7679 | 0.0454 | 0.1867 |\n"));  // the numbers above, written out
  CHECK_FALSE(contains(md, "**head 0**"));                      // one head: nothing to tell apart
  CHECK_FALSE(contains(md, "\x1b"));
}

TEST_CASE("Markdown writes values with the precision asked and every step in trace order", "[document][markdown]") {
  const Trace trace = trace_of(example("the_cat_sat.json"));
  const std::string md = render_document(trace, DocFormat::markdown, DocOptions{2, {}});
  CHECK(contains(md, "| cat | 0.77 | 0.05 | 0.19 |\n"));
  std::vector<std::string> headings;
  for (const std::string& line : lines_of(md))
    if (line.rfind("## ", 0) == 0) headings.push_back(line.substr(3));
  std::vector<std::string> expected;
  for (const StepRecord& rec : trace.steps) expected.emplace_back(step_info(rec.step).name);
  CHECK(headings == expected);
}

TEST_CASE("LaTeX writes the worked example's weights as a tabular with token labels that stands in a document",
          "[document][latex]") {
  const std::string tex = document(trace_of(example("the_cat_sat.json"), {Step::weights}), DocFormat::latex);
  INFO(tex);
  CHECK(contains(tex, "\\begin{tabular}{l|rrr}\n"));
  CHECK(contains(tex, "  & The & cat & sat \\\\\n  \\hline\n"));
  const std::vector<std::vector<double>> w = hand_weights();
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(contains(tex,
                   fmt::format("  {} & ${:.4f}$ & ${:.4f}$ & ${:.4f}$ \\\\\n", cat_sat[i], w[i][0], w[i][1], w[i][2])));
  CHECK(contains(tex, "% weights: A = softmax(S'') along each row"));
  CHECK_FALSE(contains(tex, "documentclass"));
  CHECK(latex_problem(standalone(tex)).empty());
}

TEST_CASE("Every step of every bundled example in LaTeX keeps its braces, math and environments balanced",
          "[document][latex]") {
  for (const std::string name : {"the_cat_sat.json", "gpt_causal.json", "padded_batch.json", "gqa.json",
                                 "cross_attention.json", "sliding_window.json"}) {
    const std::string problem = latex_problem(standalone(document(trace_of(example(name)), DocFormat::latex)));
    INFO(name << ": " << problem);
    CHECK(problem.empty());
  }
}

TEST_CASE("CSV holds the worked example's weights as 9 rows that read back to the values computed by hand",
          "[document][csv]") {
  const Trace trace = trace_of(example("the_cat_sat.json"), {Step::weights});
  const std::vector<std::vector<std::string>> records = read_csv(document(trace, DocFormat::csv));
  REQUIRE(records.size() == 1 + 3 * 3);
  CHECK(records[0] ==
        std::vector<std::string>{"step", "batch", "head", "row", "row_label", "col", "col_label", "value"});
  const std::vector<std::vector<double>> w = hand_weights();
  for (std::size_t k = 1; k < records.size(); ++k) {
    const std::vector<std::string>& r = records[k];
    REQUIRE(r.size() == 8);
    const std::size_t i = (k - 1) / 3, j = (k - 1) % 3;
    INFO(fmt::format("record {}: {}", k, fmt::join(r, ",")));
    CHECK(r[0] == "weights");
    CHECK(r[1] == "0");
    CHECK(r[2] == "0");
    CHECK(r[3] == std::to_string(i));
    CHECK(r[4] == cat_sat[i]);
    CHECK(r[5] == std::to_string(j));
    CHECK(r[6] == cat_sat[j]);
    // float32 arithmetic: within a few units of its last place (about 6e-8 near 1) of the exact value.
    CHECK(std::stod(r[7]) == Approx(w[i][j]).margin(1e-6));
    // Exact: the text reads back to the very float the trace holds.
    CHECK(static_cast<float>(std::stod(r[7])) == static_cast<float>(trace.steps[0].value.values()[(k - 1)]));
  }
}

TEST_CASE("CSV leaves the head empty for steps without a head axis and names the batch item", "[document][csv]") {
  const std::vector<std::vector<std::string>> q =
      read_csv(document(trace_of(example("the_cat_sat.json"), {Step::q}), DocFormat::csv));
  REQUIRE(q.size() == 1 + 3 * 2);                                                    // Q is 3 tokens × d_k 2
  CHECK(q[1] == std::vector<std::string>{"q", "0", "", "0", "The", "0", "0", "2"});  // The [1,0,1,0]·W_q = [2, 0]
  const std::vector<std::vector<std::string>> padded =
      read_csv(document(trace_of(example("padded_batch.json"), {Step::weights}), DocFormat::csv));
  bool batch_1 = false;
  for (const auto& r : padded) batch_1 = batch_1 || r[1] == "1";
  CHECK(batch_1);
}

TEST_CASE("A causal mask shows as minus infinity in the masked scores and as a dot in the weights",
          "[document][mask]") {
  // gpt_causal.json: "The" sees only itself, so 3 of its 4 keys are masked: -inf, then weight 0.
  const Trace trace = trace_of(example("gpt_causal.json"), {Step::masked, Step::weights});
  const std::string md = document(trace, DocFormat::markdown);
  INFO(md);
  CHECK(contains(md, "| The | 0.0000 | −∞ | −∞ | −∞ |"));
  CHECK(contains(md, "| The | 1.0000 | · | · | · |"));
  CHECK(contains(md, "**head 1**"));
  CHECK(contains(md, "the mask removed this query-key pair"));

  const std::string tex = document(trace, DocFormat::latex);
  CHECK(contains(tex, "  The & $0.0000$ & $-\\infty$ & $-\\infty$ & $-\\infty$ \\\\"));
  CHECK(contains(tex, "  The & $1.0000$ & $\\cdot$ & $\\cdot$ & $\\cdot$ \\\\"));
  CHECK(latex_problem(standalone(tex)).empty());

  const auto records = read_csv(document(trace, DocFormat::csv));
  CHECK(records.size() == 1 + 2 * 2 * 4 * 4);  // masked and weights, 2 heads, 4 × 4
  CHECK(records[2] == std::vector<std::string>{"masked", "0", "0", "0", "The", "1", "cat", "-inf"});
  CHECK(records[1 + 2 * 16 + 1] == std::vector<std::string>{"weights", "0", "0", "0", "The", "1", "cat", "0"});
}

TEST_CASE("Hostile tokens are made visible and escaped in markdown, LaTeX and CSV", "[document][escape]") {
  const std::vector<std::string> hostile = {"a|b\\c", "x_1 & 50%", "c,\"d\"\x1b[31m"};
  Problem p = example("the_cat_sat.json");
  p.tokens[0] = p.context_tokens[0] = hostile;
  const Trace trace = trace_of(std::move(p), {Step::weights});

  SECTION("markdown") {
    const std::string md = document(trace, DocFormat::markdown);
    INFO(md);
    CHECK_FALSE(contains(md, "\x1b"));
    CHECK(contains(md, "| a\\|b\\\\c |"));
    CHECK(contains(md, "| x\\_1 \\& 50% |"));
    CHECK(contains(md, "| c,\"d\"\\\\x1b\\[31m |"));
    // Every row of the table still has 1 + 3 cells between its outer pipes.
    std::size_t rows = 0;
    for (const std::string& line : lines_of(md)) {
      if (line.rfind("|", 0) != 0) continue;
      ++rows;
      CHECK(md_cells(line).size() == 1 + 3 + 2);
    }
    CHECK(rows == 2 + 3);
  }
  SECTION("latex") {
    const std::string tex = document(trace, DocFormat::latex);
    INFO(tex);
    CHECK_FALSE(contains(tex, "\x1b"));
    CHECK(
        contains(tex, "  & a\\textbar{}b\\textbackslash{}c & x\\_1 \\& 50\\% & c,\"d\"\\textbackslash{}x1b[31m \\\\"));
    CHECK(latex_problem(standalone(tex)).empty());
  }
  SECTION("csv") {
    const std::string text = document(trace, DocFormat::csv);
    CHECK_FALSE(contains(text, "\x1b"));
    CHECK(contains(text, ",\"c,\"\"d\"\"\\x1b[31m\","));
    const auto records = read_csv(text);
    REQUIRE(records.size() == 1 + 9);
    for (const auto& r : records) CHECK(r.size() == 8);
    CHECK(records[1][4] == "a|b\\c");
    CHECK(records[2][6] == "x_1 & 50%");
    CHECK(records[3][6] == "c,\"d\"\\x1b[31m");
  }
}

TEST_CASE("LaTeX escapes every special character and keeps a label from being read as a row's option",
          "[document][escape][latex]") {
  Problem p = example("the_cat_sat.json");
  p.tokens[0] = p.context_tokens[0] = {"$#{}", "~^<>", "[x]--*"};
  const std::string tex = document(trace_of(std::move(p), {Step::weights}), DocFormat::latex);
  INFO(tex);
  CHECK(contains(tex, "\\$\\#\\{\\}"));
  CHECK(contains(tex, "\\textasciitilde{}\\textasciicircum{}\\textless{}\\textgreater{}"));
  CHECK(contains(tex, "\\\\\n  {}[x]-{}-*"));  // not "\\ [x]": \\[length] would swallow the label
  CHECK(latex_problem(standalone(tex)).empty());
}

TEST_CASE("Markdown keeps a formula with backticks in one code span and a description from starting a list",
          "[document][escape][markdown]") {
  Trace trace = trace_of(example("the_cat_sat.json"), {Step::weights});
  trace.steps[0].formula = "a `b` c";
  trace.steps[0].description = "1. # not a list\x07";
  const std::string md = document(trace, DocFormat::markdown);
  INFO(md);
  CHECK(contains(md, "``a `b` c`` · ["));
  CHECK(contains(md, "\n1\\. # not a list\\\\a\n"));
}

TEST_CASE("The flash pass's tiles are left out of documents with a note, and CSV holds only rows",
          "[document][flash]") {
  const Trace trace = trace_of(example("the_cat_sat.json"), {Step::weights}, Engine::both);
  REQUIRE(trace.flash.has_value());
  const std::string md = document(trace, DocFormat::markdown);
  CHECK(contains(md, "Note: the flash pass's tiles are not tables of steps"));
  CHECK(contains(md, "| cat | 0.7679 | 0.0454 | 0.1867 |"));
  CHECK(contains(document(trace, DocFormat::latex), "% note: the flash pass's tiles are not tables of steps"));
  CHECK(read_csv(document(trace, DocFormat::csv)).size() == 1 + 9);
}

TEST_CASE("Format names are exactly markdown, latex and csv", "[document]") {
  CHECK(doc_format_from_name("markdown") == DocFormat::markdown);
  CHECK(doc_format_from_name("latex") == DocFormat::latex);
  CHECK(doc_format_from_name("csv") == DocFormat::csv);
  CHECK_FALSE(doc_format_from_name("text").has_value());
  CHECK_FALSE(doc_format_from_name("md").has_value());
  for (const DocFormat f : {DocFormat::markdown, DocFormat::latex, DocFormat::csv})
    CHECK(doc_format_from_name(name_of(f)) == f);
}
