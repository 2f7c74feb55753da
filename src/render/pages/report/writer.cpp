#include "render/pages/report/writer.hpp"

#include <algorithm>

#include "render/draw/escape.hpp"
#include "text/visible.hpp"

namespace attn::report_detail {

std::string page_text(std::string_view text) { return html_escape(visible(text)); }
std::string data_text(std::string_view text) { return json_string(visible(text)); }

void put_number(std::string& out, double x) {
  if (std::isnan(x)) out += "\"nan\"";
  else if (std::isinf(x)) out += x < 0 ? "\"-inf\"" : "\"inf\"";
  else fmt::format_to(std::back_inserter(out), "{:.7g}", x);
}

void put_texts(std::string& out, const std::vector<std::string>& items) {
  out += '[';
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (k > 0) out += ',';
    out += data_text(items[k]);
  }
  out += ']';
}

std::string_view scale_name(ColorScale s) { return s == ColorScale::sequential ? "sequential" : "diverging"; }

void put_range(std::string& out, const ColorRange& r) {
  fmt::format_to(std::back_inserter(out), "\"scale\":\"{}\",\"weights\":\"{}\",\"range\":[", scale_name(r.scale),
                 weight_scale_name(r.weights));
  put_number(out, r.lo);
  out += ',';
  put_number(out, r.hi);
  out += ']';
}

void put_panel(std::string& out, const Panel& p, bool embed, std::size_t budget) {
  fmt::format_to(std::back_inserter(out), "{{\"batch\":{},\"head\":{},\"kv\":{},\"caption\":{},\"rows\":{},\"cols\":{}",
                 p.batch, p.head ? std::to_string(*p.head) : "null", p.kv ? "true" : "false", data_text(p.caption),
                 p.rows, p.cols);
  if (embed) {
    out += ",\"row_labels\":";
    put_texts(out, p.row_labels);
    out += ",\"col_labels\":";
    put_texts(out, p.col_labels);
    out += ",\"values\":";
    put_numbers(out, p.values);
    if (std::any_of(p.removed.begin(), p.removed.end(), [](unsigned char r) { return r != 0; })) {
      out += ",\"removed\":\"";
      for (const unsigned char r : p.removed) out += r != 0 ? '1' : '0';
      out += '"';
    }
    std::vector<std::size_t> empty;
    for (std::size_t r = 0; r < p.empty_row.size(); ++r)
      if (p.empty_row[r]) empty.push_back(r);
    if (!empty.empty()) fmt::format_to(std::back_inserter(out), ",\"empty_rows\":[{}]", fmt::join(empty, ","));
  } else {
    // Why it is not here: larger than any page holds, or the budget went to the heatmaps before it.
    fmt::format_to(std::back_inserter(out), ",\"values\":null,\"left_out\":\"{}\"",
                   cells(p) > budget ? "too large" : "budget");
  }
  out += '}';
}

std::string fill_template(std::string_view page, const std::map<std::string_view, std::string>& parts) {
  std::string out;
  std::size_t size = page.size();
  for (const auto& [name, text] : parts) size += text.size();
  out.reserve(size);
  for (std::size_t at = 0; at < page.size();) {
    const std::size_t open = page.find("{{", at);
    const std::size_t close = open == std::string_view::npos ? open : page.find("}}", open);
    if (close == std::string_view::npos) {
      out.append(page.substr(at));
      break;
    }
    out.append(page.substr(at, open - at));
    const auto found = parts.find(page.substr(open + 2, close - open - 2));
    out += found != parts.end() ? found->second : std::string(page.substr(open, close + 2 - open));
    at = close + 2;
  }
  return out;
}

}  // namespace attn::report_detail
