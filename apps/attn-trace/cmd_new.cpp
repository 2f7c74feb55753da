// attn-trace new: write a valid input of the sizes asked, for a class or an experiment.

#include <cstdint>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "command.hpp"
#include "io/new_input.hpp"
#include "io/read.hpp"
#include "options.hpp"
#include "text/number.hpp"

namespace attn::cli {

namespace {

struct NewOptions {
  std::string tokens = "The cat sat";
  std::optional<std::string> context_tokens;
  std::size_t d_model = 4;
  std::size_t heads = 1;
  std::optional<std::size_t> kv_heads;  // default: heads
  std::optional<std::size_t> d_k;       // default: d_model / heads
  std::string mask = "none";
  bool output_projection = false;
  bool integers = false;
  std::uint64_t seed = 0;
  std::string out;      // "" or "-": stdout
  TraceOptions limits;  // only --max-memory
};

// The options as a request, or a UsageError for the first combination that makes no valid input.
NewInputRequest request_of(const NewOptions& o) {
  NewInputRequest r;
  r.tokens = words(o.tokens);
  if (r.tokens.empty())
    throw UsageError("--tokens: no tokens; give words separated by spaces, as --tokens \"The cat sat\"");
  if (o.context_tokens) {
    r.context_tokens = words(*o.context_tokens);
    if (r.context_tokens.empty())
      throw UsageError("--context-tokens: no tokens; give words separated by spaces, as --context-tokens \"the cat\"");
  }
  r.d_model = at_least_one("--d-model", o.d_model);
  r.heads = at_least_one("--heads", o.heads);
  r.kv_heads = at_least_one("--kv-heads", o.kv_heads.value_or(r.heads));
  if (r.heads % r.kv_heads != 0)
    throw UsageError(
        fmt::format("--kv-heads {}: does not divide --heads {} (each key/value head serves a whole "
                    "group of query heads)",
                    r.kv_heads, r.heads));
  if (o.d_k) r.d_k = at_least_one("--d-k", *o.d_k);
  else if (r.d_model % r.heads != 0)
    throw UsageError(fmt::format("--heads {}: does not divide --d-model {}; give --d-k, the width of each head",
                                 r.heads, r.d_model));
  else r.d_k = r.d_model / r.heads;
  const SimpleMask mask = parse_simple_mask(o.mask, "new");
  r.mask = mask.kind;
  r.window = mask.window;
  r.output_projection = o.output_projection;
  r.integers = o.integers;
  r.seed = o.seed;
  return r;
}

int run(const NewOptions& o) {
  const NewInputRequest request = request_of(o);
  const MemoryLimit limit = memory_limit(o.limits);
  if (const std::size_t need = new_input_bytes(request); need > limit.bytes)
    throw UsageError(
        fmt::format("new: this input would need about {}, over --max-memory {}", describe_bytes(need), limit.text));
  write_result(o.out, make_new_input(request));
  return 0;
}

}  // namespace

Runner add_new(CLI::App& app) {
  auto o = std::make_shared<NewOptions>();
  CLI::App* cmd = app.add_subcommand("new", "write a new input of the sizes asked, with seeded numbers");
  cmd->add_option("--tokens", o->tokens, "the query tokens, separated by spaces")->default_str("\"The cat sat\"");
  cmd->add_option("--context-tokens", o->context_tokens,
                  "cross-attention: keys and values come from a context of these tokens");
  cmd->add_option("--d-model", o->d_model, "the width of each token vector")->check(whole_number)->default_str("4");
  cmd->add_option("--heads", o->heads, "query heads")->check(whole_number)->default_str("1");
  cmd->add_option("--kv-heads", o->kv_heads, "key/value heads, dividing --heads (1: multi-query)")
      ->check(whole_number)
      ->default_str("--heads");
  cmd->add_option("--d-k", o->d_k, "the width of each head's queries, keys and values")
      ->check(whole_number)
      ->default_str("d_model / heads");
  cmd->add_option("--mask", o->mask, "which keys each query may see (sliding_window:W: the last W)")
      ->type_name(choices({"none", "causal", "sliding_window:W"}))
      ->default_str("none");
  cmd->add_flag("--output-projection", o->output_projection, "add W_o, which mixes the heads back to d_model");
  cmd->add_flag("--integers", o->integers,
                "whole numbers a class can multiply by hand: X in 0..1, weights in -1..1 (else decimals: X in "
                "[-1, 1], W_q and W_k in [-3, 3]/sqrt(d_model), so that scaled scores spread about 1, W_v and W_o in "
                "[-1, 1]/sqrt(d_model), to two places)");
  cmd->add_option("--seed", o->seed, "the same seed writes the same file on every machine")
      ->check(whole_number)
      ->default_str("0");
  cmd->add_option("-o,--output", o->out, "write the input to OUT (whole or not at all); - is stdout")
      ->default_str("stdout");
  cmd->add_option("--max-memory", o->limits.max_memory,
                  "refuse an input estimated to need more than this, before it is made (bytes, or with K, M, G)")
      ->default_str("4G");
  cmd->footer(
      "Examples:\n"
      "  attn-trace new > my.json                     \"The cat sat\", d_model 4, one head, decimals\n"
      "  attn-trace new --tokens \"I like green tea\" --heads 2 --integers\n"
      "  attn-trace new --heads 4 --kv-heads 1 --d-model 8 --mask causal -o mqa.json\n"
      "  attn-trace new --tokens \"le chat dort\" --context-tokens \"the cat is sleeping\"\n"
      "  attn-trace new --integers --seed 7 | attn-trace run -");
  return [cmd, o] { return cmd->parsed() ? run(*o) : -1; };
}

}  // namespace attn::cli
