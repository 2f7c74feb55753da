#pragma once
// One tensor read from a model dump (.npy, .safetensors, JSON nested arrays), for `attn-trace diff`:
// its shape, its values widened exactly to double, and the type it was stored in.

#include <string_view>
#include <vector>

#include "tensor/tensor.hpp"

namespace attn {

enum class DumpDType { float16, bfloat16, float32, float64 };

// "float16", "bfloat16", "float32", "float64".
constexpr std::string_view dump_dtype_name(DumpDType dtype) {
  switch (dtype) {
    case DumpDType::float16: return "float16";
    case DumpDType::bfloat16: return "bfloat16";
    case DumpDType::float32: return "float32";
    case DumpDType::float64: return "float64";
  }
  return "?";
}

struct DumpTensor {
  Shape shape;                 // () for a scalar
  std::vector<double> values;  // (element_count(shape)), row-major
  DumpDType dtype = DumpDType::float64;
};

}  // namespace attn
