#pragma once
// Text that came from a file, made safe to print: a token, a description or a name in an error line
// must never drive the terminal (change colours, the title, the clipboard, move the cursor).

#include <string>
#include <string_view>

namespace attn {

// `text` with every control character written out instead of sent: the C0 controls and DEL as C
// escapes (\a \b \t \n \v \f \r, \xNN for the rest, so ESC is \x1b), the C1 controls (U+0080 to
// U+009F) and the bidirectional overrides and isolates (U+202A to U+202E, U+2066 to U+2069, which
// reorder what follows on screen) as \uNNNN, and bytes that are not UTF-8 as \xNN. Everything else,
// other languages' letters included, is kept as it is.
std::string visible(std::string_view text);

}  // namespace attn
