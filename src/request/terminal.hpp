#pragma once
// What the terminal can show, asked of the environment once: its width, its colours, its characters.

#include "render/pages/trace/terminal.hpp"
#include "request/trace_options.hpp"

namespace attn {

// How the terminal trace should look: the options, and what the terminal can show — its width
// (COLUMNS, else the terminal's, else 100), colours (--color; 24-bit when COLORTERM says truecolor or
// 24bit, else 256) and characters (UTF-8 when the locale says so, else ASCII only).
RenderOptions render_options(const TraceOptions& options);

// Whether the locale (LC_ALL, else LC_CTYPE, else LANG) is UTF-8: the terminal then shows more than ASCII.
bool utf8_terminal();

}  // namespace attn
