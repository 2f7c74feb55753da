#include "io/examples.hpp"

#include <nlohmann/json.hpp>

namespace attn {

const Example* find_example(std::string_view name) {
  for (const Example& e : examples())
    if (e.name == name) return &e;
  return nullptr;
}

std::string example_description(const Example& example) {
  const nlohmann::json j = nlohmann::json::parse(example.text, nullptr, false);
  if (!j.is_object() || !j.contains("description") || !j.at("description").is_string()) return "";
  return j.at("description").get<std::string>();
}

}  // namespace attn
