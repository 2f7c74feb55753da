#pragma once
// .safetensors files: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the data. F16, BF16, F32 and F64 are read; docs/diff.md, "Reading dumps",
// lists what is refused.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/dump.hpp"
#include "io/read.hpp"

namespace attn {

// The tensors of `bytes`, the whole content of `file`, in the order the header lists them. Anything
// wrong is an InputError with the JSON Pointer of the header entry at fault; every offset is checked
// against the data before a byte is read, and nothing is allocated for a shape the data cannot hold.
std::vector<std::pair<std::string, DumpTensor>> read_safetensors(std::string_view bytes, const std::string& file);

// The tensors of `in`, which `file` names in errors, read in order with memory near their values' size:
// a regular file larger than `budget.left` is refused before a byte is read, a header whose tensors
// (8 bytes a value as float64) would pass it before a byte of data is read, and the data is widened
// straight into the tensors, never held whole as bytes.
std::vector<std::pair<std::string, DumpTensor>> read_safetensors(ByteSource& in, const std::string& file,
                                                                 const MemoryBudget& budget);

// read_safetensors of the file at `path`, named in errors as display_name does.
std::vector<std::pair<std::string, DumpTensor>> read_safetensors_file(const std::string& path,
                                                                      const MemoryBudget& budget);

}  // namespace attn
