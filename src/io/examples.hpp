#pragma once
// The inputs of data/ bundled into the binary, for `attn-trace example`.

#include <string>
#include <string_view>
#include <vector>

namespace attn {

struct Example {
  std::string_view name;  // the file's stem with '-' for '_': "the-cat-sat"
  std::string_view text;  // the file, byte for byte
};

// Every bundled example, by name (generated at build time from data/*.json).
const std::vector<Example>& examples();

// The example called `name`, or nullptr.
const Example* find_example(std::string_view name);

// Its "description", or "" when it has none.
std::string example_description(const Example& example);

}  // namespace attn
