#include "json/quoted.hpp"

#include <nlohmann/json.hpp>

namespace attn {

std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace attn
