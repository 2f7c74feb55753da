#pragma once
// A string as JSON writes it, for the documents that are written as text rather than built as JSON
// (attn-trace new's and import's inputs).

#include <string>

namespace attn {

// `text` as a JSON string, quotes and escapes included; bytes that are not UTF-8 become U+FFFD
// instead of failing the dump.
std::string quoted(const std::string& text);

}  // namespace attn
