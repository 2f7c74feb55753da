#pragma once
// The live explorer (docs/explorer.md): one self-contained HTML page that holds the attention core
// compiled to WebAssembly, an input and its trace. Every edit of the input runs the core in the page,
// which draws the report of the new trace; the page fetches nothing.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace attn {

struct ExplorerPage {
  std::string_view core;  // explorer_core.js (cmake/explorer.cmake): the core and the code that loads it
  std::string input;      // the input's JSON text (already loaded, so known good), as the page opens with it
  std::string trace;      // its trace (the trace format), as `attn-trace run --json -` writes it
  // How the page runs it, until the learner changes it: the engine's, the dtype's and the backward
  // pass's names as the command line spells them, and the flash tiles (none: the default tiles).
  std::string engine = "both";
  std::string dtype = "float32";
  std::optional<std::size_t> block_q, block_k;
  bool backward = false;
  std::string version;  // the program's, for the page's generator line
};

// The whole page. The core's text must hold no "</script" (it is base64 and generated code); one that
// does is refused with std::invalid_argument, as a page it would break.
std::string explorer_html(const ExplorerPage& page);

}  // namespace attn
