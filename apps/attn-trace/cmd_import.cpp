// attn-trace import WEIGHTS: one attention layer of a real model (GPT-2, Llama, BERT, nn.MultiheadAttention)
// written as an input that run and every other command take (docs/models.md).

#include <cmath>
#include <cstdint>
#include <memory>
#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.hpp"
#include "formats/dump_folder.hpp"
#include "formats/import_layer.hpp"
#include "formats/npy.hpp"
#include "io/output.hpp"
#include "io/read.hpp"
#include "json/error.hpp"
#include "options.hpp"
#include "text/visible.hpp"
#include "text/nearest.hpp"

namespace attn::cli {

namespace {

struct ImportOptions {
  std::string weights;  // WEIGHTS
  std::string style;
  std::string prefix;
  std::optional<std::string> x;  // --x X.npy; empty: random
  std::uint64_t seed = 0;
  std::size_t n = 8;
  std::optional<std::size_t> heads;
  std::optional<std::size_t> kv_heads;
  std::optional<std::string> tokens;
  std::optional<std::string> mask;
  std::optional<double> rope_theta;
  std::string out;      // "" or "-": stdout
  TraceOptions limits;  // only --max-memory
};

ImportStyle style_of(const std::string& name) {
  if (const auto style = import_style_by_name(name)) return *style;
  const std::string near = nearest_word(name, import_style_names);
  throw UsageError(fmt::format("--style {}: unknown style{}; expected one of {}", name,
                               near.empty() ? std::string() : fmt::format(" (did you mean {}?)", near),
                               fmt::join(import_style_names, ", ")));
}

// The options as a request, or a UsageError for the first that cannot be used.
ImportRequest request_of(const ImportOptions& o) {
  ImportRequest r;
  r.style = style_of(o.style);
  r.prefix = o.prefix;
  if (o.heads) r.heads = at_least_one("--heads", *o.heads);
  if (o.kv_heads) r.kv_heads = at_least_one("--kv-heads", *o.kv_heads);
  if (o.rope_theta) {
    if (r.style != ImportStyle::llama && r.style != ImportStyle::gemma2)
      throw UsageError(fmt::format("--rope-theta: --style {} has no RoPE; only llama and gemma2 do", o.style));
    if (!std::isfinite(*o.rope_theta) || *o.rope_theta <= 0)
      throw UsageError(fmt::format("--rope-theta {}: expected a number above 0, as 10000", *o.rope_theta));
    r.rope_theta = o.rope_theta;
  }
  if (o.tokens) {
    r.tokens = words(*o.tokens);
    if (r.tokens.empty())
      throw UsageError("--tokens: no tokens; give words separated by spaces, as --tokens \"The cat sat\"");
  }
  if (o.mask) {
    const SimpleMask mask = parse_simple_mask(*o.mask, "import");
    r.mask = mask.kind;
    r.window = mask.window;
  }
  r.weights_name = display_name(o.weights);
  r.seed = o.seed;
  // Without --x, --tokens says how many tokens to draw, unless --n does.
  r.n = at_least_one("--n", o.n);
  return r;
}

int run(const ImportOptions& o, bool n_given) {
  ImportRequest request = request_of(o);
  if (!o.x && !n_given && !request.tokens.empty()) request.n = request.tokens.size();
  const MemoryLimit limit = memory_limit(o.limits);
  const std::vector<NamedDump> weights = read_dumps(o.weights, false, limit, DumpFiles::npy_only);
  const ModelConfig config = read_model_config(o.weights, limit);
  std::optional<DumpTensor> x;
  if (o.x) {
    request.x_name = display_name(*o.x);
    // The weights are held while X is read.
    std::size_t held = 0;
    for (const NamedDump& w : weights) held += w.tensor.values.size() * sizeof(double);
    x = read_npy_file(*o.x, false, MemoryBudget(limit.bytes - std::min(limit.bytes, held), limit));
  }
  request.max_memory = limit;
  const ImportedLayer layer = import_layer(weights, config, x ? &*x : nullptr, request);
  write_result(o.out, layer.json);
  for (const std::string& warning : layer.warnings)
    write_stderr(fmt::format("attn-trace: warning: {}\n", visible(warning)));
  return 0;
}

}  // namespace

Runner add_import(CLI::App& app) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "import", "write one attention layer of a real model (GPT-2, Llama, BERT, PyTorch) as an input");
  cmd->add_option("WEIGHTS", o->weights, "a .safetensors file, or a folder of <tensor name>.npy files")->required();
  cmd->add_option("--style", o->style, "how the model names and lays out its tensors")
      ->type_name(choices({import_style_names.begin(), import_style_names.end()}))
      ->required();
  cmd->add_option("--prefix", o->prefix,
                  "the layer's name, put before each tensor's (transformer.h.0.attn., model.layers.0.self_attn., "
                  "bert.encoder.layer.0.attention., \"\" for a bare nn.MultiheadAttention)")
      ->required();
  CLI::Option* x = cmd->add_option("--x", o->x, "the layer's input X, a .npy of (n, d_model) or (batch, n, d_model)")
                       ->default_str("random normal numbers");
  cmd->add_option("--seed", o->seed, "without --x: the same seed draws the same X on every machine")
      ->check(whole_number)
      ->default_str("0")
      ->excludes(x);
  CLI::Option* n = cmd->add_option("--n", o->n, "without --x: how many tokens X has")
                       ->check(whole_number)
                       ->default_str("8, or as many as --tokens")
                       ->excludes(x);
  cmd->add_option("--heads", o->heads, "query heads")->check(whole_number)->default_str("config.json's");
  cmd->add_option("--kv-heads", o->kv_heads, "key/value heads (checked against the shapes)")
      ->check(whole_number)
      ->default_str("config.json's, else read from the shapes");
  cmd->add_option("--tokens", o->tokens, "a label for each token, separated by spaces")->default_str("t0 t1 ...");
  cmd->add_option("--mask", o->mask, "which keys each query may see (sliding_window:W: the last W)")
      ->type_name(choices({"none", "causal", "sliding_window:W"}))
      ->default_str("causal for gpt2, llama and gemma2, none for bert and torch-mha");
  cmd->add_option("--rope-theta", o->rope_theta, "llama and gemma2: RoPE's base")
      ->default_str("config.json's, else 10000");
  cmd->add_option("-o,--output", o->out, "write the input to OUT (whole or not at all); - is stdout")
      ->default_str("stdout");
  cmd->add_option("--max-memory", o->limits.max_memory,
                  "refuse weights that would need more than this once read (bytes, or with K, M, G)")
      ->default_str("4G");
  cmd->footer(
      "config.json beside WEIGHTS (in its folder) gives the heads and rope_theta when the options do not, and for\n"
      "gemma2 the scale (query_pre_attn_scalar) and the logit cap (attn_logit_softcapping).\n"
      "Examples:\n"
      "  attn-trace import gpt2-layer0.safetensors --style gpt2 --prefix transformer.h.0.attn. -o gpt2.json\n"
      "  attn-trace import llama/ --style llama --prefix model.layers.0.self_attn. --x x.npy -o llama.json\n"
      "  attn-trace import gemma2/ --style gemma2 --prefix model.layers.1.self_attn. --x x.npy -o gemma2.json\n"
      "  attn-trace import mha.safetensors --style torch-mha --prefix \"\" --heads 4 --n 5 | attn-trace run -\n"
      "  attn-trace import bert-layer0/ --style bert --prefix bert.encoder.layer.0.attention. \\\n"
      "      --tokens \"the cat sat\" -o bert.json\n"
      "docs/models.md shows how to export one layer of a Hugging Face model.");
  return [cmd, o, n] { return cmd->parsed() ? run(*o, n->count() > 0) : -1; };
}

}  // namespace attn::cli
