#pragma once
// The explorer's core (cmake/explorer.cmake): the library compiled to WebAssembly, as the JavaScript file
// that holds it, embedded in the tool when it was built with Emscripten at hand.

#include <cstddef>
#include <string_view>

namespace attn::cli {

// explorer_core.js, byte for byte; empty when the tool was built without it.
std::string_view explorer_core();

}  // namespace attn::cli
