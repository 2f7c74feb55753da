#include "render/pages/explorer/explorer.hpp"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "render/draw/escape.hpp"
#include "render/pages/explorer/explorer_assets.hpp"
#include "render/pages/report/writer.hpp"

namespace attn {

namespace {

// Valid JSON text (a trace, or an input the loader took) as it can sit in <script type="application/json">
// and be written to a terminal by `-o -`: `<` (so that no `</script>` or `<!--` ends or bends the block),
// DEL and the C1 controls (U+0080 to U+009F, which some terminals obey) as \u escapes. In valid JSON
// they occur only inside strings, where the escape reads the same, so the text keeps its meaning and
// everything else byte for byte: the page's input is the file as it was written.
std::string script_json(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    const auto c = static_cast<unsigned char>(json[i]);
    const auto next = i + 1 < json.size() ? static_cast<unsigned char>(json[i + 1]) : 0u;
    if (c == '<' || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // U+0080 to U+009F in UTF-8
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += json[i];
    }
  }
  return out;
}

// The page's scripts, each a module the next ones use, explorer.js last.
std::string explorer_script() {
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}", explorer_link_js, explorer_mask_js, explorer_edits_js,
                     explorer_controls_js, explorer_structure_js, explorer_view_js, explorer_js);
}

std::string optional_number(const std::optional<std::size_t>& n) { return n ? std::to_string(*n) : "null"; }

}  // namespace

std::string explorer_html(const ExplorerPage& page) {
  if (page.core.find("</script") != std::string_view::npos)
    throw std::invalid_argument("the explorer's core holds </script, which would end its <script> early");
  const std::string generator = fmt::format("attn-trace {}", page.version);
  // What the page runs the input with, until the learner changes it (explorer.js, the request).
  const std::string options =
      fmt::format(R"({{"engine":{},"dtype":{},"block_q":{},"block_k":{},"backward":{},"generator":{}}})",
                  json_string(page.engine), json_string(page.dtype), optional_number(page.block_q),
                  optional_number(page.block_k), page.backward ? "true" : "false", json_string(generator));
  return report_detail::fill_template(explorer_template, {{"generator", report_detail::page_text(generator)},
                                                          {"css", std::string(explorer_css)},
                                                          {"options", options},
                                                          {"input", script_json(page.input)},
                                                          {"trace", script_json(page.trace)},
                                                          {"core", std::string(page.core)},
                                                          {"js", explorer_script()}});
}

}  // namespace attn
