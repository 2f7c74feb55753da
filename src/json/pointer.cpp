#include "json/pointer.hpp"

#include <fmt/format.h>

namespace attn {

std::string pointer_key(const std::string& parent, std::string_view key) {
  std::string out = parent + "/";
  for (const char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string pointer_index(const std::string& parent, std::size_t index) { return fmt::format("{}/{}", parent, index); }

}  // namespace attn
