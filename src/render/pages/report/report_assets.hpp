#pragma once
// The HTML report's assets, src/render/pages/report/report.{html,css,js}, report_walk.js and report_backward.{css,js},
// embedded at build time by cmake/embed_assets.cmake, so the tool needs no files beside it and the page needs nothing
// fetched.

#include <string_view>

namespace attn {

extern const std::string_view report_template;  // report.html: the page, with {{name}} placeholders
extern const std::string_view report_css;       // report.css
extern const std::string_view report_js;        // report.js: draws the page from its JSON
extern const std::string_view report_walk_js;   // report_walk.js: report.js's closure goes on with the tile
                                                // walk and the theme, and ends there (page_script)
// report --backward only: the backward walk's style, and its script, which runs inside report.js's
// closure (report.cpp, page_script), so that it draws with report.js's helpers.
extern const std::string_view report_backward_css;
extern const std::string_view report_backward_js;

}  // namespace attn
