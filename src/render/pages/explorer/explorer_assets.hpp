#pragma once
// The explorer's assets, src/render/pages/explorer/explorer*.{html,css,js}, embedded at build time by
// cmake/embed_assets.cmake, so that the tool needs no files beside it and the page needs nothing fetched.

#include <string_view>

namespace attn {

extern const std::string_view explorer_template;      // explorer.html: the page, with {{name}} placeholders
extern const std::string_view explorer_css;           // explorer.css
extern const std::string_view explorer_link_js;       // explorer_link.js: the link's #input= and settings
extern const std::string_view explorer_mask_js;       // explorer_mask.js: the mask's decisions and edits
extern const std::string_view explorer_edits_js;      // explorer_edits.js: structural edits of an input
extern const std::string_view explorer_controls_js;   // explorer_controls.js: the bar of settings and history
extern const std::string_view explorer_view_js;       // explorer_view.js: every step drawn at once, the explanation
extern const std::string_view explorer_structure_js;  // explorer_structure.js: tokens, sizes, mask, options
extern const std::string_view explorer_js;            // explorer.js: the editors, the core's calls, the history

}  // namespace attn
