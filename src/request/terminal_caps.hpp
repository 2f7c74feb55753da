#pragma once
// What the terminal can show, asked of the environment once: its width, its colours, its characters.

#include "render/draw/options.hpp"
#include "request/trace_options.hpp"

namespace attn {

// How the terminal trace should look: the options, and what the terminal can show — its width
// (terminal_width), colours (--color; 24-bit when COLORTERM says truecolor or 24bit, else 256) and
// characters (UTF-8 when the locale says so, else ASCII only). --max-cols left out is columns_that_fit.
RenderOptions render_options(const TraceOptions& options);

// The one width of everything the tool prints for people (help, tables, heatmaps, lists): COLUMNS
// when it is a positive number, else the width of the terminal on standard output, else that of the
// controlling terminal (/dev/tty: output piped into a pager or a file is still read on that
// terminal), else 80.
std::size_t terminal_width();

// How many columns of numbers with `precision` digits after the point a table `width` wide holds
// beside its row labels: the default of --max-cols (at least 1).
std::size_t columns_that_fit(std::size_t width, int precision);

// Whether the locale (LC_ALL, else LC_CTYPE, else LANG) is UTF-8: the terminal then shows more than ASCII.
bool utf8_terminal();

}  // namespace attn
