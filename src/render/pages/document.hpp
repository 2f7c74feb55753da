#pragma once
// The steps of a trace as a document for slides and notes (`--format markdown|latex|csv`): each step's
// name, formula, shape and meaning, then its matrices with token labels, every value shown. Built from
// the Trace records and their Panels (render/draw/panel.hpp) only; UTF-8 whatever the locale, no colour, no
// terminal width. The flash pass's tiles are not tables of steps and are left out, with a note.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "render/draw/options.hpp"
#include "trace/trace.hpp"

namespace attn {

struct DocOptions {
  int precision = 4;               // markdown and LaTeX: digits after the point; CSV is always exact
  std::vector<std::string> notes;  // one line each, before the steps: what the document leaves out and why
};

// "markdown", "latex", "csv": the names of --format; nothing for any other name.
std::optional<DocFormat> doc_format_from_name(std::string_view name);
std::string_view name_of(DocFormat format);

// Every step of `trace`, in trace order, one matrix per batch item and head:
// - markdown: a heading per step, its formula and shape, its meaning, a pipe table per matrix;
// - latex: a `tabular` per matrix (token labels in the first row and column), the rest as comments;
// - csv: one long table for the whole trace, `step,batch,head,row,row_label,col,col_label,value`,
//   each value exact (the shortest text that reads back to it in the trace's dtype).
// A weight the mask removed is `·` (markdown), `$\cdot$` (LaTeX) and 0 (CSV); a masked score is
// `−∞`, `$-\infty$`, `-inf`. Labels have their control characters made visible, then are escaped.
std::string render_document(const Trace& trace, DocFormat format, const DocOptions& options);

}  // namespace attn
