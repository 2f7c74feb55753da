#include "io/examples.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn/version.hpp"

namespace attn {

const Example* find_example(std::string_view name) {
  for (const Example& e : examples())
    if (e.name == name) return &e;
  return nullptr;
}

std::string missing_example_hint(std::string_view path) {
  const std::filesystem::path file{std::string(path)};
  if (file.extension() != ".json") return "";
  std::string name = file.stem().string();
  std::replace(name.begin(), name.end(), '_', '-');
  const Example* example = find_example(name);
  if (example == nullptr) return "";
  std::string stem = name;
  std::replace(stem.begin(), stem.end(), '-', '_');
  std::string hint =
      fmt::format("{} is a bundled example: 'attn-trace example {} > {}.json' writes it here", name, name, stem);
  std::error_code error;
  const std::filesystem::path installed = std::filesystem::path(installed_examples) / (stem + ".json");
  if (std::filesystem::is_regular_file(installed, error))
    hint += fmt::format(", and {} is the installed copy", installed.string());
  return hint;
}

std::string example_description(const Example& example) {
  const nlohmann::json j = nlohmann::json::parse(example.text, nullptr, false);
  if (!j.is_object() || !j.contains("description") || !j.at("description").is_string()) return "";
  return j.at("description").get<std::string>();
}

}  // namespace attn
