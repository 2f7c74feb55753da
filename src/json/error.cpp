#include "json/error.hpp"

#include <utility>

#include <fmt/format.h>

namespace attn {

InputError::InputError(std::string file, std::string pointer, std::string message)
    : std::runtime_error(pointer.empty() ? fmt::format("{}: {}", file, message)
                                         : fmt::format("{}: {}: {}", file, pointer, message)),
      file_(std::move(file)),
      pointer_(std::move(pointer)),
      message_(std::move(message)) {}

}  // namespace attn
