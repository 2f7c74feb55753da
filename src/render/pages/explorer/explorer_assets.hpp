#pragma once
// The explorer's assets, src/render/pages/explorer/explorer.{html,css,js}, embedded at build time by
// cmake/embed_assets.cmake, so that the tool needs no files beside it and the page needs nothing fetched.

#include <string_view>

namespace attn {

extern const std::string_view explorer_template;  // explorer.html: the page, with {{name}} placeholders
extern const std::string_view explorer_css;       // explorer.css
extern const std::string_view explorer_js;        // explorer.js: the editors, the core's calls, the history

}  // namespace attn
