#pragma once
// Files that appear whole or not at all.

#include <string>
#include <string_view>

namespace attn {

// Writes `content` to a temporary file beside `path`, then renames it into place. On any failure the
// temporary file is removed, an existing `path` is left as it was, and an InputError says why.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace attn
