#include "request/command_options.hpp"

#include <cerrno>
#include <cstddef>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "observe/steps.hpp"

namespace attn {

namespace {

using TO = TraceOptions;

// A field of TraceOptions, by its member.
template <class Value>
OptionField<TO, Value> trace_field(Value TO::*member) {
  return [member](TO& o) -> Value& { return o.*member; };
}
template <class Target, class Value>
OptionField<Target, Value> field_of(Value Target::*member) {
  return [member](Target& o) -> Value& { return o.*member; };
}

std::vector<std::string> dtype_names(bool half) {
  std::vector<std::string> names = {"float32", "float64"};
  if (half) names.insert(names.end(), {"float16", "bfloat16"});
  return names;
}

}  // namespace

// ---------------------------------------------------------------------- the options of a trace

OptionDef<TO> engine_option(bool both, std::string help) {
  OptionDef<TO> o{"--engine", std::move(help), "", OptionCheck::choice};
  o.choices = both ? std::vector<std::string>{"naive", "flash", "both"} : std::vector<std::string>{"naive", "flash"};
  o.shown_default = "naive";
  o.field = trace_field(&TO::engine);
  return o;
}

OptionDef<TO> run_engine_option() {
  return engine_option(
      true, "which computation to trace: naive (every step), flash (tile by tile with an online softmax), or both");
}

OptionDef<TO> dtype_option(bool half, const std::string& what) {
  std::string help = what + ": float32 or float64";
  if (half)
    help = what +
           ": float32, float64, float16 or bfloat16; a 16-bit type rounds the inputs and every stored step to it "
           "(to nearest, ties to even) and sums in float32, as GPU kernels do (docs/precision.md)";
  OptionDef<TO> o{"--dtype", std::move(help), "", OptionCheck::choice, dtype_names(half)};
  o.shown_default = "float32";
  o.field = trace_field(&TO::dtype);
  return o;
}

std::vector<OptionDef<TO>> tile_options() {
  OptionDef<TO> q{"--block-q", "flash: query rows per tile (default about √n)", "UINT", OptionCheck::range, {}, 1,
                  1 << 20};
  q.field = trace_field(&TO::block_q);
  OptionDef<TO> k{"--block-k", "flash: keys per tile (default about √m)", "UINT", OptionCheck::range, {}, 1, 1 << 20};
  k.field = trace_field(&TO::block_k);
  return {q, k};
}

// The forward steps by name, from the step table, each run of steps that only some inputs have followed by
// what they need: "q,k,v,q_heads,k_heads,v_heads,q_rot,k_rot (with rope),scores,scaled,capped (with
// softcap),…".
std::string forward_step_names() {
  std::string out;
  const auto& steps = all_steps();
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const StepInfo& info = step_info(steps[k]);
    out += fmt::format("{}{}", k == 0 ? "" : ",", info.name);
    const bool last_of_run = k + 1 == steps.size() || needs_name(step_info(steps[k + 1])) != needs_name(info);
    if (info.needs != Needs::always && last_of_run) out += fmt::format(" (with {})", needs_name(info));
  }
  return out;
}

OptionDef<TO> steps_option() {
  OptionDef<TO> o{"--steps",
                  fmt::format("only these steps, by trace name: {}, tiles for the flash pass's tiles, and with "
                              "--backward the gradients d_output … d_sinks (attn-trace steps lists them)",
                              forward_step_names())};
  o.field = trace_field(&TO::steps);
  o.comma_list = true;
  return o;
}

OptionDef<TO> head_option() {
  OptionDef<TO> o{"--head", "only this query head (and the key/value head it reads)", "UINT", OptionCheck::range, {}, 0,
                  65535};
  o.field = trace_field(&TO::head);
  return o;
}

OptionDef<TO> memory_option() {
  OptionDef<TO> o{"--max-memory",
                  "refuse input or a run estimated to need more than this, before it is allocated (bytes, or with "
                  "K, M, G: 512M, 4G)"};
  o.shown_default = "4G";
  o.field = trace_field(&TO::max_memory);
  return o;
}

OptionDef<TO> backward_option(std::string help) {
  OptionDef<TO> o{"--backward", std::move(help)};
  o.field = trace_field(&TO::backward);
  return o;
}

OptionDef<TO> run_backward_option() {
  return backward_option(
      "also trace the backward pass: every gradient from dY = ∂L/∂Y back to X and the weights (docs/backward.md)");
}

OptionDef<TO> grad_seed_option(std::string help) {
  OptionDef<TO> o{"--grad-seed", std::move(help), "UINT", OptionCheck::whole_number};
  o.field = trace_field(&TO::grad_seed);
  return o;
}

std::vector<OptionDef<TO>> dropout_options() {
  OptionDef<TO> p{"--dropout",
                  "dropout on the attention weights with this probability P (0 <= P < 1), in place of the "
                  "input's \"dropout\" p; 0 turns it off",
                  "P"};
  p.field = trace_field(&TO::dropout);
  OptionDef<TO> seed{"--dropout-seed",
                     "the seed of dropout's keep mask (Philox4x32-10, docs/input-format.md), in place of the input's; "
                     "default 0",
                     "S", OptionCheck::whole_number};
  seed.field = trace_field(&TO::dropout_seed);
  return {p, seed};
}

namespace {

// run's and compare's: what they share.
std::vector<OptionDef<TO>> traced_options() {
  std::vector<OptionDef<TO>> out = {dtype_option(true, "the arithmetic")};
  for (OptionDef<TO>& o : tile_options()) out.push_back(std::move(o));
  out.push_back(steps_option());
  out.push_back(head_option());
  out.push_back(memory_option());
  out.push_back(run_backward_option());
  out.push_back(grad_seed_option(
      "with --backward: draw dY from a standard normal with this seed, in place of the input's dY (or of 1 "
      "everywhere)"));
  for (OptionDef<TO>& o : dropout_options()) out.push_back(std::move(o));
  return out;
}

// ---------------------------------------------------------------------- setting one from text

std::uint64_t whole(const std::string& text, std::string_view as) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    throw UsageError(
        fmt::format("{} {}: expected a whole number from 0 to 18446744073709551615, found \"{}\"", as, text, text));
  return value;
}

template <class Target>
std::size_t counted(const OptionDef<Target>& option, const std::string& text, std::string_view as) {
  const std::uint64_t value = whole(text, as);
  if (option.check == OptionCheck::range &&
      (value < static_cast<std::uint64_t>(option.least) || value > static_cast<std::uint64_t>(option.most)))
    throw UsageError(fmt::format("{} {}: expected {} to {}", as, text, option.least, option.most));
  return static_cast<std::size_t>(value);
}

double real(const std::string& text, std::string_view as) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x))
    throw UsageError(fmt::format("{} {}: expected a number", as, text));
  return x;
}

template <class Target>
const std::string& chosen(const OptionDef<Target>& option, const std::string& text, std::string_view as) {
  for (const std::string& c : option.choices)
    if (c == text) return c;
  throw UsageError(fmt::format("{} {}: expected {}", as, text, fmt::join(option.choices, ", ")));
}

}  // namespace

std::string keyword_of(std::string_view name) {
  std::string out(name.substr(name.starts_with("--") ? 2 : 0));
  for (char& c : out)
    if (c == '-') c = '_';
  return out;
}

// ---------------------------------------------------------------------- each command's

std::vector<OptionDef<TO>> run_options() {
  std::vector<OptionDef<TO>> out = {run_engine_option()};
  for (OptionDef<TO>& o : traced_options()) out.push_back(std::move(o));
  return out;
}

std::vector<OptionDef<TO>> compare_options() { return traced_options(); }

std::vector<OptionDef<ExplainOptions>> explain_options() {
  using E = ExplainOptions;
  std::vector<OptionDef<E>> out;
  const auto own = [&out](std::string_view name, std::string help, std::string type_name, auto member) {
    OptionDef<E> o{name, std::move(help), std::move(type_name)};
    o.field = field_of(member);
    out.push_back(std::move(o));
  };
  own("--query", "the query token: its name, or its index when no token has that name", "Q", &E::query);
  own("--key", "the key token (a context token in cross-attention): its name, or its index when no token has that name",
      "K", &E::key);
  own("--head", "the query head (default 0)", "H", &E::head);
  own("--batch", "the batch item (default 0)", "B", &E::batch);
  own("--output", "explain output column C of the query's row instead (Y[i][C]), from concat and W_o; without --key",
      "C", &E::output);
  own("--decode",
      "explain it as the query's decode step computes it: its one row against the cache of every key so far (a "
      "causal input; attn-trace decode)",
      "", &E::decode);
  own("--grad",
      "explain one entry of this gradient of the backward pass instead (d_weights, d_W_q, …: attn-trace steps lists "
      "them), term by term; with --index",
      "STEP", &E::grad);
  own("--index",
      "with --grad: the entry, one number per axis of the gradient in order (batch first for a batch), "
      "comma-separated",
      "I,J,…", &E::index);
  out.back().comma_list = true;
  out.push_back(of_trace<E>(engine_option(false,
                                          "naive (the softmax of the whole row), or flash (how the weight builds up "
                                          "tile by tile, with naive beside it to compare)")));
  out.push_back(of_trace<E>(grad_seed_option(
      "with --grad: draw dY from a standard normal with this seed, in place of the input's dY (or of 1 everywhere)")));
  out.push_back(of_trace<E>(dtype_option(false, "the arithmetic")));
  for (const OptionDef<TO>& o : tile_options()) out.push_back(of_trace<E>(o));
  out.push_back(of_trace<E>(memory_option()));
  return out;
}

std::vector<OptionDef<DecodeOptions>> decode_options() {
  using D = DecodeOptions;
  std::vector<OptionDef<D>> out;
  const auto own = [&out](std::string_view name, std::string help, std::string type_name, auto member) {
    OptionDef<D> o{name, std::move(help), std::move(type_name), OptionCheck::whole_number};
    o.field = field_of(member);
    out.push_back(std::move(o));
  };
  own("--prompt",
      "the first N tokens are the prompt, run as one causal pass (prefill); each later token is one decode step "
      "(default: all but the last three)",
      "N", &D::prompt);
  own("--split-kv",
      "flash-decoding: cut the cache into S chunks, each with its own softmax and log-sum-exp, merged exactly", "S",
      &D::split_kv);
  own("--page-size", "a paged cache: keys and values in pages of P tokens from one pool, through a block table", "P",
      &D::page_size);
  own("--page-seed", "the order in which the pool hands out its pages (default 0)", "SEED", &D::page_seed);
  own("--layers", "the model's layer count: the cache's size for the whole model", "N", &D::layers);
  out.push_back(of_trace<D>(dtype_option(true, "the arithmetic")));
  out.push_back(of_trace<D>(memory_option()));
  return out;
}

std::vector<OptionDef<DiffOptions>> diff_options() {
  using F = DiffOptions;
  OptionDef<F> seed{"--grad-seed",
                    "for dumped gradients: dY drawn from a standard normal with this seed, as run --backward "
                    "--grad-seed draws it, in place of the input's dY (or of the dump's d_output, or 1 everywhere)",
                    "UINT", OptionCheck::whole_number};
  seed.field = field_of(&F::grad_seed);
  OptionDef<F> dtype = of_trace<F>(dtype_option(true, "compute ours in this dtype"));
  dtype.shown_default = "the dump's: the least precise of its files";
  return {dtype, seed, of_trace<F>(memory_option())};
}

std::vector<OptionDef<TO>> explorer_options() {
  std::vector<OptionDef<TO>> out = {run_engine_option(), dtype_option(true, "the arithmetic")};
  for (OptionDef<TO>& o : tile_options()) out.push_back(std::move(o));
  out.push_back(
      backward_option("also compute the backward pass in the page: every gradient from dY back to X and the weights"));
  return out;
}

// ---------------------------------------------------------------------- set_option

template <class Target>
void set_option(const OptionDef<Target>& option, Target& target, const std::vector<std::string>& items,
                std::string_view as) {
  const auto one = [&]() -> const std::string& {
    if (items.size() != 1) throw UsageError(fmt::format("{}: expected one value, found {}", as, items.size()));
    return items.front();
  };
  std::visit(
      [&](const auto& field) {
        auto& value = field(target);
        using Value = std::remove_reference_t<decltype(value)>;
        if constexpr (std::is_same_v<Value, bool>) {
          const std::string& text = one();
          if (text != "true" && text != "false") throw UsageError(fmt::format("{}: expected true or false", as));
          value = text == "true";
        } else if constexpr (std::is_same_v<Value, Engine>) {
          value = *engine_from_name(chosen(option, one(), as));
        } else if constexpr (std::is_same_v<Value, DType>) {
          value = *dtype_from_name(chosen(option, one(), as));
        } else if constexpr (std::is_same_v<Value, std::optional<std::size_t>> || std::is_same_v<Value, std::size_t>) {
          value = counted(option, one(), as);
        } else if constexpr (std::is_same_v<Value, std::optional<NoSeparateSeed>> ||
                             std::is_same_v<Value, NoSeparateSeed>) {
          throw std::logic_error("an option of no field");
        } else if constexpr (std::is_same_v<Value, std::optional<Seed>> || std::is_same_v<Value, Seed>) {
          value = whole(one(), as);
        } else if constexpr (std::is_same_v<Value, std::optional<double>>) {
          value = real(one(), as);
        } else if constexpr (std::is_same_v<Value, std::string> || std::is_same_v<Value, std::optional<std::string>>) {
          value = one();
        } else if constexpr (std::is_same_v<Value, std::vector<std::string>>) {
          value = items;
        } else {
          static_assert(std::is_same_v<Value, std::vector<std::size_t>>, "a field of every type the variant has");
          value.clear();
          for (const std::string& item : items) value.push_back(static_cast<std::size_t>(whole(item, as)));
        }
      },
      option.field);
}

template void set_option(const OptionDef<TraceOptions>&, TraceOptions&, const std::vector<std::string>&,
                         std::string_view);
template void set_option(const OptionDef<ExplainOptions>&, ExplainOptions&, const std::vector<std::string>&,
                         std::string_view);
template void set_option(const OptionDef<DecodeOptions>&, DecodeOptions&, const std::vector<std::string>&,
                         std::string_view);
template void set_option(const OptionDef<DiffOptions>&, DiffOptions&, const std::vector<std::string>&,
                         std::string_view);

}  // namespace attn
