// The steps of a trace as markdown, LaTeX or CSV (render/document.hpp).

#include "render/pages/document.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "text/number.hpp"
#include "render/draw/panel.hpp"
#include "text/visible.hpp"

namespace attn {

namespace {

// ---- what every format says the same way ----

// "1 head × 3 query × 3 key", as the terminal writes a step's shape.
std::string shape_text(const StepRecord& rec, bool batched) {
  const std::vector<std::string> dims = dim_names(rec.step, batched);
  const Shape& shape = rec.value.shape();
  std::vector<std::string> parts;
  for (std::size_t a = 0; a < shape.size(); ++a) parts.push_back(fmt::format("{} {}", shape[a], dims[a]));
  return fmt::format("{}", fmt::join(parts, " × "));
}

// The notes of `options`, and what the document leaves out of this trace.
std::vector<std::string> notes_for(const Trace& trace, const DocOptions& options) {
  std::vector<std::string> notes = options.notes;
  if (trace.flash && (!trace.flash->tiles.empty() || !trace.flash->finals.empty()))
    notes.emplace_back(
        "the flash pass's tiles are not tables of steps and are left out: --format text shows them, and so does "
        "the JSON trace (--json)");
  if (trace.compare)
    notes.emplace_back(
        "the comparison of naive, flash and the reference is left out: --format text shows it, and so does the "
        "JSON trace (--json)");
  return notes;
}

// Whether a panel's caption says something: several panels to tell apart, or one head cut from many.
bool show_caption(const Trace& trace, const std::vector<Panel>& list, const Panel& panel) {
  return !panel.caption.empty() && (list.size() > 1 || trace.head.has_value());
}

bool removed_weight(const Panel& panel, std::size_t r, std::size_t c) {
  return panel.step == Step::weights && panel.is_removed(r, c);
}

bool any_removed_weight(const Panel& panel) {
  return panel.step == Step::weights && std::find(panel.removed.begin(), panel.removed.end(), 1) != panel.removed.end();
}

// ---- markdown (GitHub-flavoured) ----

// Text inside a paragraph or a table cell: control characters made visible, then every character that
// could start markup (emphasis, links, HTML, entities, math, a cell boundary) escaped with a backslash.
std::string md_inline(std::string_view raw) {
  std::string out;
  for (const char c : visible(raw)) {
    if (std::string_view("\\`*_[]<>|&~$").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// A paragraph of text: inline-escaped, and not taken for a heading, a list, a quote or a rule.
std::string md_paragraph(std::string_view raw) {
  std::string out = md_inline(raw);
  if (!out.empty() && std::string_view("#+-=>").find(out.front()) != std::string_view::npos) return "\\" + out;
  // "1." or "1)" would start a numbered list: escape the mark after the digits.
  const std::size_t digits = out.find_first_not_of("0123456789");
  if (digits > 0 && digits != std::string::npos && (out[digits] == '.' || out[digits] == ')'))
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(digits), '\\');
  return out;
}

// `raw` as a code span: fenced by one backtick more than its longest run of them, so that none ends it.
std::string md_code(std::string_view raw) {
  const std::string text = visible(raw);
  std::size_t longest = 0, run = 0;
  for (const char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  return fmt::format("{}{}{}{}{}", fence, pad ? " " : "", text, pad ? " " : "", fence);
}

std::string md_cell(const Panel& panel, std::size_t r, std::size_t c, int precision) {
  const double x = panel.values[r * panel.cols + c];
  if (removed_weight(panel, r, c)) return "·";
  if (std::isinf(x)) return x < 0 ? "−∞" : "∞";
  return format_value(x, precision);
}

void md_table(std::string& out, const Panel& panel, int precision) {
  out += "|  |";
  for (const std::string& label : panel.col_labels) out += fmt::format(" {} |", md_inline(label));
  out += "\n| --- |";
  for (std::size_t c = 0; c < panel.cols; ++c) out += " ---: |";
  out += '\n';
  for (std::size_t r = 0; r < panel.rows; ++r) {
    out += fmt::format("| {} |", md_inline(panel.row_labels[r]));
    for (std::size_t c = 0; c < panel.cols; ++c) out += fmt::format(" {} |", md_cell(panel, r, c, precision));
    out += '\n';
  }
}

std::string markdown(const Trace& trace, const DocOptions& options) {
  std::string out;
  const auto paragraph = [&out](const std::string& text) {
    if (!out.empty()) out += '\n';
    out += text;
    out += '\n';
  };
  for (const std::string& note : notes_for(trace, options)) paragraph(md_paragraph("Note: " + note));
  for (const StepRecord& rec : trace.steps) {
    paragraph(fmt::format("## {}", step_info(rec.step).name));
    paragraph(fmt::format("{} · [{}]", md_code(rec.formula), shape_text(rec, trace.problem->batched)));
    paragraph(md_paragraph(rec.description));
    const std::vector<Panel> list = panels(trace, rec);
    for (const Panel& panel : list) {
      if (show_caption(trace, list, panel)) paragraph(fmt::format("**{}**", md_inline(panel.caption)));
      out += '\n';
      md_table(out, panel, options.precision);
      if (any_removed_weight(panel)) paragraph("· the mask removed this query-key pair: its weight is exactly 0");
    }
  }
  for (const std::string& warning : trace.warnings) paragraph(md_paragraph("Warning: " + warning));
  return out;
}

// ---- LaTeX ----

// Text in a cell of a tabular: control characters made visible, then LaTeX's special characters as
// the commands that print them (and < > |, which the default font encoding draws as other glyphs).
std::string tex_text(std::string_view raw) {
  const std::string text = visible(raw);
  // A row that starts with [ or * would be read as the \\[length] or \\* of the row before it.
  std::string out = !text.empty() && (text.front() == '[' || text.front() == '*') ? "{}" : "";
  for (std::size_t at = 0; at < text.size(); ++at) {
    const char c = text[at];
    switch (c) {
      case '\\': out += "\\textbackslash{}"; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '<': out += "\\textless{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '|': out += "\\textbar{}"; break;
      case '&':
      case '%':
      case '$':
      case '#':
      case '_':
      case '{':
      case '}':
        out += '\\';
        out += c;
        break;
      case '-':  // "--" would print as a dash
        out += at + 1 < text.size() && text[at + 1] == '-' ? "-{}" : "-";
        break;
      default: out += c;
    }
  }
  return out;
}

// A comment line: nothing in it is read, so only the control characters (a newline would end it)
// need writing out.
std::string tex_comment(std::string_view raw) { return fmt::format("% {}\n", visible(raw)); }

// A number in math mode, so that its minus sign is a minus: "$-0.5000$", "$1.2346 \times 10^{6}$".
std::string tex_number(double x, int precision) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x < 0 ? "$-\\infty$" : "$\\infty$";
  const std::string text = format_value(x, precision);
  const std::size_t e = text.find('e');
  if (e == std::string::npos) return fmt::format("${}$", text);
  return fmt::format("${} \\times 10^{{{}}}$", text.substr(0, e), std::atoi(text.c_str() + e + 1));
}

void tex_table(std::string& out, const Panel& panel, int precision) {
  out += fmt::format("\\begin{{tabular}}{{l|{}}}\n", std::string(panel.cols, 'r'));
  out += " ";
  for (const std::string& label : panel.col_labels) out += fmt::format(" & {}", tex_text(label));
  out += " \\\\\n  \\hline\n";
  for (std::size_t r = 0; r < panel.rows; ++r) {
    out += fmt::format("  {}", tex_text(panel.row_labels[r]));
    for (std::size_t c = 0; c < panel.cols; ++c)
      out +=
          fmt::format(" & {}", removed_weight(panel, r, c) ? std::string("$\\cdot$")
                                                           : tex_number(panel.values[r * panel.cols + c], precision));
    out += " \\\\\n";
  }
  out += "\\end{tabular}\n";
}

std::string latex(const Trace& trace, const DocOptions& options) {
  std::string out;
  for (const std::string& note : notes_for(trace, options)) out += tex_comment("note: " + note);
  for (const StepRecord& rec : trace.steps) {
    if (!out.empty()) out += '\n';
    out += tex_comment(
        fmt::format("{}: {}   [{}]", step_info(rec.step).name, rec.formula, shape_text(rec, trace.problem->batched)));
    out += tex_comment(rec.description);
    const std::vector<Panel> list = panels(trace, rec);
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Panel& panel = list[k];
      if (k > 0) out += '\n';
      if (show_caption(trace, list, panel)) out += tex_comment(panel.caption);
      if (any_removed_weight(panel))
        out += tex_comment("$\\cdot$: the mask removed this query-key pair: its weight is exactly 0");
      tex_table(out, panel, options.precision);
    }
  }
  if (!trace.warnings.empty()) out += '\n';
  for (const std::string& warning : trace.warnings) out += tex_comment("warning: " + warning);
  return out;
}

// ---- CSV ----

// A field as RFC 4180 writes it: control characters made visible first, then quoted (with quotes
// doubled) when it holds a comma, a quote or a line break.
std::string csv_field(std::string_view raw) {
  std::string text = visible(raw);
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv(const Trace& trace) {
  std::string out = "step,batch,head,row,row_label,col,col_label,value\n";
  const bool float32 = computes_in_float32(trace.dtype);
  for (const StepRecord& rec : trace.steps) {
    const std::string_view name = step_info(rec.step).name;
    for (const Panel& panel : panels(trace, rec)) {
      const std::string head = panel.head ? fmt::format("{}", *panel.head) : "";
      for (std::size_t r = 0; r < panel.rows; ++r) {
        const std::string row_label = csv_field(panel.row_labels[r]);
        for (std::size_t c = 0; c < panel.cols; ++c)
          out += fmt::format("{},{},{},{},{},{},{},{}\n", name, panel.batch, head, r, row_label, c,
                             csv_field(panel.col_labels[c]), exact_value(panel.values[r * panel.cols + c], float32));
      }
    }
  }
  return out;
}

}  // namespace

std::optional<DocFormat> doc_format_from_name(std::string_view name) {
  if (name == "markdown") return DocFormat::markdown;
  if (name == "latex") return DocFormat::latex;
  if (name == "csv") return DocFormat::csv;
  return std::nullopt;
}

std::string_view name_of(DocFormat format) {
  switch (format) {
    case DocFormat::markdown: return "markdown";
    case DocFormat::latex: return "latex";
    case DocFormat::csv: return "csv";
  }
  return "";
}

std::string render_document(const Trace& trace, DocFormat format, const DocOptions& options) {
  switch (format) {
    case DocFormat::markdown: return markdown(trace, options);
    case DocFormat::latex: return latex(trace, options);
    case DocFormat::csv: return csv(trace);
  }
  return {};
}

}  // namespace attn
