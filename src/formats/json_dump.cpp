#include "formats/json_dump.hpp"

#include <cstddef>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json/error.hpp"
#include "json/parse.hpp"
#include "json/pointer.hpp"

namespace attn {

using json = nlohmann::json;

namespace {

double number_at(const json& v, const std::string& file, const std::string& pointer) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  if (v.is_array()) throw InputError(file, pointer, "a list where a number belongs: the rows are ragged");
  throw InputError(file, pointer,
                   fmt::format("{} is not a number (only numbers, and \"inf\", \"-inf\", \"nan\" as strings)",
                               v.is_string() ? "this string" : std::string(v.type_name())));
}

// Appends the values of `v`, which must have shape[depth:], in row-major order.
void collect(const json& v, const Shape& shape, std::size_t depth, const std::string& pointer, const std::string& file,
             std::vector<double>& out) {
  if (depth == shape.size()) {
    out.push_back(number_at(v, file, pointer));
    return;
  }
  if (!v.is_array())
    throw InputError(file, pointer,
                     fmt::format("a {} where a list of {} belongs: the rows are ragged", v.type_name(), shape[depth]));
  if (v.size() != shape[depth])
    throw InputError(
        file, pointer,
        fmt::format("a list of {} where the first at this depth has {}: the rows are ragged", v.size(), shape[depth]));
  for (std::size_t i = 0; i < v.size(); ++i) collect(v[i], shape, depth + 1, pointer_index(pointer, i), file, out);
}

}  // namespace

DumpTensor read_json_dump(std::string_view text, const std::string& file) {
  refuse_blank(text, file, "nested lists of numbers");
  const json doc = parse_json(text, file, true);  // nesting bounded at 64 levels
  if (doc.is_object()) throw InputError(file, "", "an object where nested lists of numbers belong");

  // The shape: the length of the first list at each depth.
  Shape shape;
  for (const json* v = &doc; v->is_array(); v = &(*v)[0]) {
    shape.push_back(v->size());
    if (v->empty()) break;
  }
  std::vector<double> values;
  collect(doc, shape, 0, "", file, values);
  return DumpTensor{shape, std::move(values), DumpDType::float64};
}

}  // namespace attn
