#pragma once
// A tensor written as JSON nested arrays of numbers, [[1, 2], [3, 4]], with "inf", "-inf" and "nan" as
// strings the way a trace writes them. docs/diff.md, "Reading dumps", says what is refused.

#include <string>
#include <string_view>

#include "formats/dump.hpp"

namespace attn {

// The tensor in `text`, the content of `file`: its shape from the nesting (a bare number is a scalar,
// shape ()), dtype float64. Ragged arrays are refused with the JSON Pointer of the first row whose
// length or nesting differs from the first row's at the same depth; nesting is bounded at 64 levels.
DumpTensor read_json_dump(std::string_view text, const std::string& file);

}  // namespace attn
