#pragma once
// The trace's JSON writer (io/trace_write.cpp, io/decode_write.cpp): objects one key a line, lists of numbers
// on one line, every number in its shortest form. Only src/io includes this.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tensor/tensor.hpp"
#include "trace/trace.hpp"

namespace attn {

// x as the trace writes it, appended to `out`: shortest text that reads back to it (in float32 when
// `float32`), -inf, inf and nan as strings, -0 as -0.0.
void append_trace_number(std::string& out, double x, bool float32);

// JSON text for people and programs alike: objects one key a line, lists of numbers on one line.
class TextWriter {
 public:
  std::string take() && { return std::move(out_); }

  void value(const nlohmann::ordered_json& j, int indent) {
    if (j.is_object()) {
      if (j.empty()) return append("{}");
      append("{");
      bool first = true;
      for (const auto& [key, item] : j.items()) {
        append(first ? "\n" : ",\n");
        first = false;
        pad(indent + 2);
        append(nlohmann::ordered_json(key).dump());
        append(": ");
        value(item, indent + 2);
      }
      append("\n");
      pad(indent);
      append("}");
    } else if (j.is_array() && !j.empty() && (j[0].is_array() || j[0].is_object())) {
      append("[");
      for (std::size_t i = 0; i < j.size(); ++i) {
        append(i == 0 ? "\n" : ",\n");
        pad(indent + 2);
        value(j[i], indent + 2);
      }
      append("\n");
      pad(indent);
      append("]");
    } else if (j.is_array()) {
      append("[");
      for (std::size_t i = 0; i < j.size(); ++i) {
        if (i > 0) append(", ");
        append(j[i].dump());
      }
      append("]");
    } else {
      append(j.dump());
    }
  }

  // A tensor's values as nested lists, the innermost on one line.
  void data(const Tensor<double>& t, bool float32, int indent) {
    if (t.rank() == 0 || t.size() == 0) return append(t.rank() == 0 ? "[]" : nested_empty(t.shape(), 0));
    std::size_t at = 0;
    data_axis(t, 0, at, float32, indent);
  }

  void key(std::string_view name, int indent, bool first) {
    append(first ? "\n" : ",\n");
    pad(indent);
    append(nlohmann::ordered_json(std::string(name)).dump());
    append(": ");
  }

  void append(std::string_view s) { out_.append(s); }
  void pad(int n) { out_.append(static_cast<std::size_t>(n), ' '); }

 private:
  std::string nested_empty(const Shape& shape, std::size_t axis) {
    if (axis == shape.size() || shape[axis] == 0) return "[]";
    std::vector<std::string> items(shape[axis], nested_empty(shape, axis + 1));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }

  void data_axis(const Tensor<double>& t, std::size_t axis, std::size_t& at, bool float32, int indent) {
    const std::size_t count = t.shape()[axis];
    append("[");
    if (axis + 1 == t.rank()) {
      for (std::size_t i = 0; i < count; ++i) {
        if (i > 0) append(", ");
        append_trace_number(out_, t.values()[at++], float32);
      }
      append("]");
      return;
    }
    for (std::size_t i = 0; i < count; ++i) {
      append(i == 0 ? "\n" : ",\n");
      pad(indent + 2);
      data_axis(t, axis + 1, at, float32, indent + 2);
    }
    append("\n");
    pad(indent);
    append("]");
  }

  std::string out_;
};

// One step object of a trace's `steps` (docs/trace-format.md), its braces at `indent`; named `name` in place of
// its own (k_cache) when that is not empty.
void write_step(TextWriter& w, const StepRecord& s, const Problem& p, DType dtype, int indent,
                std::string_view name = {});
// A decode trace's `decode` object (io/decode_write.cpp), its braces at 2.
void write_decode(TextWriter& w, const Trace& t);
// A trace's steps as a list, its brackets at `indent`.
void write_steps(TextWriter& w, const Trace& t, int indent);

}  // namespace attn
