#pragma once
// DUMPS of `attn-trace diff`: a folder of `<name>.npy` and `<name>.json` files, or one `.safetensors`
// file, read into named tensors (docs/diff.md, "What diff reads").

#include <string>
#include <vector>

#include "formats/dump.hpp"
#include "io/read.hpp"

namespace attn {

struct NamedDump {
  std::string name;    // the tensor's name in the dump: the file's name without `.npy`, `.bf16.npy`, `.json`
  std::string source;  // for messages: "q.npy", "model.safetensors: attn_probs"
  DumpTensor tensor;
};

// The source of the tensor `name` of a collection of named tensors, `collection` (a .safetensors file, the
// Python module's dict): "model.safetensors: attn_probs". The one way both name a tensor, so that diff's
// JSON is the same whichever way the same tensors came.
std::string tensor_source(const std::string& collection, const std::string& name);

// Which files of a folder hold tensors: `diff` reads `.npy` and `.json` dumps; `import` reads `.npy` files
// only, since a model's folder keeps its config.json (and other JSON) beside them.
enum class DumpFiles { npy_and_json, npy_only };

// The tensors of `path`, by name in file-name order (a folder) or in the header's order (safetensors).
// In a folder, files that end in neither `.npy` nor `.json` (with `npy_only`: not in `.npy`) are passed over. `.npy`
// files of 16-bit integers are bfloat16 bits when `bfloat16` is set or the name ends in `.bf16.npy`. What they hold is
// counted against `limit` as the values it becomes (8 bytes each); past it, or a name twice, or no tensor at all, is an
// InputError.
std::vector<NamedDump> read_dumps(const std::string& path, bool bfloat16, const MemoryLimit& limit,
                                  DumpFiles files = DumpFiles::npy_and_json);

}  // namespace attn
