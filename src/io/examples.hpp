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

// For an input file `path` that could not be found: when its name is a bundled example's
// (data/the_cat_sat.json, the_cat_sat.json, the-cat-sat.json), where that example is to be had —
// `attn-trace example NAME`, and the installed copy when there is one — else "".
std::string missing_example_hint(std::string_view path);

// Its "description", or "" when it has none.
std::string example_description(const Example& example);

}  // namespace attn
