#pragma once
// numpy's .npy files (format versions 1.0, 2.0 and 3.0): little-endian float16, float32 and float64
// in C order, and bfloat16 stored as 16-bit integers ('<u2') or raw pairs of bytes ('|V2'), which is how
// numpy, having no bfloat16, saves it. docs/diff.md, "Reading dumps", lists what is refused.

#include <string>
#include <string_view>

#include "formats/dump.hpp"
#include "io/read.hpp"

namespace attn {

// The tensor in `bytes`, the whole content of `file` (which names it in errors). '<u2' and '|V2' are
// read as bfloat16 bits when `bfloat16_from_u2`, and refused otherwise. Anything wrong is an InputError
// saying what; nothing past the end of `bytes` is read, and nothing is allocated for a shape the bytes
// cannot hold.
DumpTensor read_npy(std::string_view bytes, const std::string& file, bool bfloat16_from_u2);

// The tensor of `in`, which `file` names in errors, read in order with memory near its values' size:
// a regular file larger than `budget.left` is refused before a byte is read, a header whose values
// (8 bytes each as float64) would pass it before a byte of data is read, and the data is widened
// straight into the tensor, never held whole as bytes. From a stream (a pipe, a device) the header's
// shape is checked against the budget before the data is read, and the data against the shape as
// it arrives.
DumpTensor read_npy(ByteSource& in, const std::string& file, bool bfloat16_from_u2, const MemoryBudget& budget);

// read_npy of the file at `path` ("-": standard input), named in errors as display_name does.
DumpTensor read_npy_file(const std::string& path, bool bfloat16_from_u2, const MemoryBudget& budget);

}  // namespace attn
