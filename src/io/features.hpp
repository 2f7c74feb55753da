#pragma once
// The input's optional features, one row each (docs/input-format.md): rope, alibi, softcap, sinks,
// dropout, model. For each, in io/features.cpp and nowhere else: its key in the input, how the loader reads
// it (once the sizes, the scale and the mask are known), which of its values a run's dtype must hold, how
// the trace writes it in its `input` (as the input said it) and in its `config` (as the run resolved it),
// and its line in the terminal's header. The loader (io/load.cpp), the range check (io/load_range.cpp),
// the trace writer (io/trace_write.cpp) and the terminal's header (render/pages/trace/terminal.cpp) ask
// here, in the table's order. (How a run rounds a feature's values is the model's: the score chain's, for
// the features it reads.)

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/problem.hpp"

namespace attn {

class JsonReader;

// The features' keys, in the table's order.
std::vector<std::string_view> feature_keys();

// Reads every feature that `root` (the input's object) has into `p`, in the table's order (alibi takes
// RoPE's positions): an InputError with the JSON Pointer of what is wrong.
void read_features(const JsonReader& reader, const nlohmann::json& root, Problem& p);

// Each value of a feature that a run's dtype must hold, with its JSON Pointer: `value(pointer, x)` for one
// held as an input (rounded to the dtype), `number(pointer, x)` for one held as a float32 number in every
// run (the cap).
struct FeatureValues {
  std::function<void(const std::string& pointer, double x)> value;
  std::function<void(const std::string& pointer, double x)> number;
};
void check_feature_values(const Problem& p, const FeatureValues& check);

// Each feature `p` has as the trace's `input` writes it: `put(key, value)`, in the table's order.
void write_feature_inputs(const Problem& p,
                          const std::function<void(std::string_view key, const nlohmann::ordered_json&)>& put);
// Each feature `p` has as the trace's `config` resolves it (RoPE's frequencies, ALiBi's slopes and
// positions, dropout's generator), into `config`.
void write_feature_config(const Problem& p, nlohmann::ordered_json& config);

// How the explorer offers each feature, as JSON in the table's order (the page's script draws one control
// of each kind: render/pages/explorer/explorer_structure.js): [{"key", "label", "kind", …}], kind "toggle"
// (a box that writes "on" when ticked and removes the key when not), "number" (a field whose number is
// the feature's value, removed when blank) or "fields" (an object of numbers, "fields" [{"name",
// "label", "default"}], the first turning it on). A feature without a control (model) is left out.
std::string feature_controls_json();

// Where a feature's line goes in the terminal's header: with the scores (after the scale), or with the
// positions (after the mask).
enum class HeaderPlace { scores, positions };
// The header's lines of the features `p` has at `place`: (its key, what it says).
std::vector<std::pair<std::string_view, std::string>> feature_header(const Problem& p, HeaderPlace place);

}  // namespace attn
