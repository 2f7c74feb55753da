#include "json/reader.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "json/pointer.hpp"
#include "text/nearest.hpp"

namespace attn {

using json = nlohmann::json;

std::string type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::string: return fmt::format("the string \"{}\"", j.get_ref<const std::string&>());
    case json::value_t::array: return j.empty() ? "an empty list" : fmt::format("a list of {}", j.size());
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return fmt::format("the number {}", j.dump());
    default: return "something else";
  }
}

void JsonReader::fail(const std::string& pointer, const std::string& message) const {
  throw InputError(file_, root_ + pointer, message);
}

void JsonReader::require_keys(const nlohmann::json& object, const std::string& pointer,
                              std::span<const char* const> allowed) const {
  for (const auto& item : object.items()) {
    const std::string& key = item.key();
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) != allowed.end())
      continue;
    fail(pointer_key(pointer, key), fmt::format("unknown key \"{}\"{}", key, did_you_mean(key, allowed)));
  }
}

double JsonReader::number(const nlohmann::json& j, const std::string& pointer) const {
  if (!j.is_number()) fail(pointer, fmt::format("expected a number, found {}", type_name(j)));
  const double x = j.get<double>();
  if (!std::isfinite(x)) fail(pointer, fmt::format("expected a finite number, found {}", j.dump()));
  return x;
}

double JsonReader::item_number(const nlohmann::json& list, std::size_t index, const std::string& list_pointer) const {
  // The item's pointer is made only for an error: formatting one for every number of a large matrix
  // took longer than parsing it.
  const json& j = list[index];
  if (j.is_number())
    if (const double x = j.get<double>(); std::isfinite(x)) return x;
  return number(j, pointer_index(list_pointer, index));  // fails, as it would have
}

std::size_t JsonReader::integer(const nlohmann::json& j, const std::string& pointer, std::size_t min,
                                std::size_t max) const {
  if (!j.is_number()) fail(pointer, fmt::format("expected a whole number, found {}", type_name(j)));
  const double x = j.get<double>();
  if (!std::isfinite(x) || std::floor(x) != x)
    fail(pointer, fmt::format("expected a whole number, found {}", j.dump()));
  if (x < static_cast<double>(min) || x > static_cast<double>(max))
    fail(pointer, fmt::format("expected a whole number from {} to {}, found {}", min, max, j.dump()));
  return static_cast<std::size_t>(x);
}

const std::string& JsonReader::string(const nlohmann::json& j, const std::string& pointer) const {
  if (!j.is_string()) fail(pointer, fmt::format("expected a string, found {}", type_name(j)));
  return j.get_ref<const std::string&>();
}

void JsonReader::require_list(const nlohmann::json& j, const std::string& pointer, std::string_view of) const {
  if (!j.is_array()) fail(pointer, fmt::format("expected a list of {}, found {}", of, type_name(j)));
  if (j.empty()) fail(pointer, fmt::format("expected a list of {}, found an empty list", of));
}

std::vector<double> JsonReader::vector(const nlohmann::json& j, const std::string& pointer) const {
  require_list(j, pointer, "numbers");
  std::vector<double> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) out.push_back(item_number(j, i, pointer));
  return out;
}

Tensor<double> JsonReader::matrix(const nlohmann::json& j, const std::string& pointer) const {
  require_list(j, pointer, "rows");
  std::vector<double> data;
  std::size_t cols = 0;
  for (std::size_t r = 0; r < j.size(); ++r) {
    const std::string row_ptr = pointer_index(pointer, r);
    if (!j[r].is_array()) fail(row_ptr, fmt::format("expected a row (a list of numbers), found {}", type_name(j[r])));
    if (r == 0) {
      cols = j[r].size();
      if (cols == 0) fail(row_ptr, "expected a row of numbers, found an empty list");
      data.reserve(j.size() * cols);
    } else if (j[r].size() != cols) {
      fail(row_ptr, fmt::format("expected {} (as row 0), found {}", plural(cols, "number", "numbers"), j[r].size()));
    }
    for (std::size_t c = 0; c < cols; ++c) data.push_back(item_number(j[r], c, row_ptr));
  }
  return Tensor<double>({j.size(), cols}, std::move(data));
}

}  // namespace attn
