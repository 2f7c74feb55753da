#pragma once
// The options that the command line, the Python module and the explorer share, each defined once
// (docs/cli.md): its name on the command line, which is also the Python keyword and the explorer's
// setting (without "--", with "_" for "-"), what --help says of it, how its value is checked, what --help
// shows as its default, and the field of the command's options it sets. Each command's list of them is
// here too. apps/attn-trace declares every one on CLI11 (its parser and --help, and so the shell
// completion, which reads --help), placing each among the command's own; apps/python takes a command's
// list as its function's keywords, checked as the command line checks them; apps/explorer takes run's as
// the page's settings. What only one of them has (the terminal's display, --json, the module's `names`)
// stays where it is used.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "model/run.hpp"
#include "request/decoding.hpp"
#include "request/diffing.hpp"
#include "request/explaining.hpp"
#include "request/trace_options.hpp"

namespace attn {

// How an option's value is checked, beyond its type.
enum class OptionCheck {
  none,
  choice,        // one of `choices`
  range,         // a whole number from `least` to `most`
  whole_number,  // a whole number 0 … 2^64 − 1, exactly (a size or a seed)
};

// A whole number of 64 bits where it is another type than a size (WebAssembly's size_t has 32): a seed's
// field is then its own alternative below. Where the two are one type, this stands in its place, a type
// no field has.
struct NoSeparateSeed {};
using Seed = std::conditional_t<std::is_same_v<std::size_t, std::uint64_t>, NoSeparateSeed, std::uint64_t>;

// The field of a command's options `Target` that an option sets.
template <class Target, class Value>
using OptionField = std::function<Value&(Target&)>;

// By the field's type: a flag, a choice (an engine, a dtype: set from its name), a number, a whole number,
// a text or a list.
template <class Target>
using OptionMember =
    std::variant<OptionField<Target, bool>, OptionField<Target, Engine>, OptionField<Target, DType>,
                 OptionField<Target, std::optional<std::size_t>>, OptionField<Target, std::optional<Seed>>,
                 OptionField<Target, std::optional<double>>, OptionField<Target, std::size_t>,
                 OptionField<Target, Seed>, OptionField<Target, std::string>,
                 OptionField<Target, std::optional<std::string>>, OptionField<Target, std::vector<std::string>>,
                 OptionField<Target, std::vector<std::size_t>>>;

template <class Target>
struct OptionDef {
  std::string_view name;  // "--block-q"
  std::string help;       // what --help says of it
  std::string type_name;  // its value in --help ("N", "STEP"); empty: CLI11's own for the field's type
  OptionCheck check = OptionCheck::none;
  std::vector<std::string> choices;  // OptionCheck::choice
  long long least = 0, most = 0;     // OptionCheck::range
  // What --help shows as its default; empty: nothing. Left out, an option leaves its field as the
  // command's options start it, which is the Python keyword's default too.
  std::string shown_default;
  OptionMember<Target> field;
  bool comma_list = false;  // a list given comma-separated (--steps q,k)
};

// The name without "--", "-" as "_": the Python keyword and the explorer's setting ("block_q").
std::string keyword_of(std::string_view name);

// `option` of TraceOptions as an option of a command whose options hold a TraceOptions `trace`.
template <class Command>
OptionDef<Command> of_trace(const OptionDef<TraceOptions>& option) {
  OptionDef<Command> out{option.name,  option.help, option.type_name,     option.check, option.choices,
                         option.least, option.most, option.shown_default, {},           option.comma_list};
  out.field = std::visit(
      [](const auto& field) -> OptionMember<Command> {
        using Value = std::remove_reference_t<decltype(field(std::declval<TraceOptions&>()))>;
        return OptionField<Command, Value>([field](Command& c) -> Value& { return field(c.trace); });
      },
      option.field);
  return out;
}

// The options of the trace a command asks for, each the one definition of its name: --engine (with both
// when `both`; `help`, its text), run's --engine, --dtype (with float16 and bfloat16 when `half`; `what`
// opens its help: "the arithmetic"), --block-q and --block-k, --steps, --head, --max-memory, --backward
// (`help`, its text), run's --backward, --grad-seed (`help`, its text), --dropout and --dropout-seed.
OptionDef<TraceOptions> engine_option(bool both, std::string help);
OptionDef<TraceOptions> run_engine_option();
OptionDef<TraceOptions> dtype_option(bool half, const std::string& what);
std::vector<OptionDef<TraceOptions>> tile_options();
OptionDef<TraceOptions> steps_option();
OptionDef<TraceOptions> head_option();
OptionDef<TraceOptions> memory_option();
OptionDef<TraceOptions> backward_option(std::string help);
OptionDef<TraceOptions> run_backward_option();
OptionDef<TraceOptions> grad_seed_option(std::string help);
std::vector<OptionDef<TraceOptions>> dropout_options();

// Each command's shared options, in no particular order (the command line places them).
std::vector<OptionDef<TraceOptions>> run_options();      // and report's, but --steps, --head and dropout's
std::vector<OptionDef<TraceOptions>> compare_options();  // run's but --engine
std::vector<OptionDef<ExplainOptions>> explain_options();
std::vector<OptionDef<DecodeOptions>> decode_options();
std::vector<OptionDef<DiffOptions>> diff_options();
// The explorer's settings: engine, dtype, block_q, block_k, backward.
std::vector<OptionDef<TraceOptions>> explorer_options();

// The option of `options` called `name` ("--engine"): a std::logic_error when there is none, a mistake
// of the program.
template <class Target>
const OptionDef<Target>& option_named(const std::vector<OptionDef<Target>>& options, std::string_view name) {
  for (const OptionDef<Target>& o : options)
    if (o.name == name) return o;
  throw std::logic_error("no shared option " + std::string(name));
}

// Sets the field `option` sets in `target` from `value` as text (a flag: "true" or "false"; a list: its
// items, `items`), checked as the command line checks it: a UsageError naming `as` (the option as the
// caller wrote it: "--engine", "engine") otherwise.
template <class Target>
void set_option(const OptionDef<Target>& option, Target& target, const std::vector<std::string>& items,
                std::string_view as);

}  // namespace attn
