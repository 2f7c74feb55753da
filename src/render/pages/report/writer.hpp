#pragma once
// The report's page writer: text from the trace as page text or as JSON text, the values of the page's
// JSON (numbers, lists of text, a colour range, one heatmap), and the template filled in one pass.
// Only pages/report/ and pages/explorer/ (for its template) include this.

#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "render/draw/colormap.hpp"
#include "render/draw/panel.hpp"

namespace attn::report_detail {

// A string from the trace (a token, a formula, a description) as page text: control characters written
// out (text/visible.hpp), then escaped for HTML.
std::string page_text(std::string_view text);
// The same string inside the page's JSON, where report.js only ever puts it into textContent.
std::string data_text(std::string_view text);

// A number of the page's data: 7 significant digits (the page is for looking; the trace keeps every
// digit), and -inf, inf and nan as the strings the trace format uses.
void put_number(std::string& out, double x);

template <class Values>
void put_numbers(std::string& out, const Values& values) {
  out += '[';
  bool first = true;
  for (const double x : values) {
    if (!first) out += ',';
    first = false;
    put_number(out, x);
  }
  out += ']';
}

void put_texts(std::string& out, const std::vector<std::string>& items);

std::string_view scale_name(ColorScale s);

// "scale":"…","range":[lo,hi]
void put_range(std::string& out, const ColorRange& r);

inline std::size_t cells(const Panel& p) { return p.rows * p.cols; }

// One heatmap: where it sits (batch, head), its labels and its numbers, or "values": null when the
// page's budget left it out.
void put_panel(std::string& out, const Panel& p, bool embed, std::size_t budget);

// `page` with every {{name}} of report.html replaced by parts[name], in one pass, so that nothing put in
// (a token that reads "{{js}}") is replaced again.
std::string fill_template(std::string_view page, const std::map<std::string_view, std::string>& parts);

}  // namespace attn::report_detail
