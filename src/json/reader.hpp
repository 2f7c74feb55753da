#pragma once
// Reading values out of a parsed JSON document, every error an InputError with the file and the JSON
// Pointer of the value: the pieces the input format (io/load.cpp) is read with.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "json/error.hpp"
#include "tensor/tensor.hpp"
#include "text/words.hpp"

namespace attn {

// "the string \"x\"", "a list of 3", "the number 1.5": a JSON value as an error message names it.
std::string type_name(const nlohmann::json& j);

// Reads one document, keeping the file name for every error it raises.
class JsonReader {
 public:
  // `root` is the pointer of the object read within its document ("" for a whole file).
  JsonReader(std::string file, std::string root) : file_(std::move(file)), root_(std::move(root)) {}

  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const;

  // Every key of `object` is one of `allowed`; an unknown one is named with the nearest allowed key.
  void require_keys(const nlohmann::json& object, const std::string& pointer,
                    std::span<const char* const> allowed) const;
  // A finite number.
  double number(const nlohmann::json& j, const std::string& pointer) const;
  // number(list[index], its pointer), the pointer built only when it is needed for an error.
  double item_number(const nlohmann::json& list, std::size_t index, const std::string& list_pointer) const;
  // A whole number in [min, max]: 2 and 2.0 are; 1.5, true and "2" are not.
  std::size_t integer(const nlohmann::json& j, const std::string& pointer, std::size_t min, std::size_t max) const;
  const std::string& string(const nlohmann::json& j, const std::string& pointer) const;
  // A list that is not empty.
  void require_list(const nlohmann::json& j, const std::string& pointer, std::string_view of) const;
  std::vector<double> vector(const nlohmann::json& j, const std::string& pointer) const;
  // A rows × cols matrix, every row as long as the first.
  Tensor<double> matrix(const nlohmann::json& j, const std::string& pointer) const;

 private:
  std::string file_;
  std::string root_;
};

}  // namespace attn
