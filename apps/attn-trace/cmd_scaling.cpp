// attn-trace scaling: why attention divides q·k by √d_k, measured the way the explainer's demo
// measures it, and what its numbers really say (docs/cli.md, "scaling").

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "io/read.hpp"
#include "io/scaling_json.hpp"
#include "lessons/scaling.hpp"
#include "options.hpp"
#include "render/pages/scaling_page.hpp"
#include "text/number.hpp"

namespace attn::cli {

namespace {

struct ScalingOptions {
  std::vector<std::string> d_k = {"1", "16", "64", "256", "1024"};
  std::int64_t samples = 1000;  // signed, so that -5 is refused rather than read as 2^64 - 5
  std::uint64_t seed = 0;
  TraceOptions common;  // --json, --max-memory, --precision
};

// --d-k's items as positive integers, or a UsageError naming the one that is not.
std::vector<std::size_t> parse_d_ks(const std::vector<std::string>& items) {
  if (items.empty()) throw UsageError("--d-k: expected a comma list of positive integers, such as 1,16,64");
  std::vector<std::size_t> d_ks;
  for (const std::string& item : items) {
    std::size_t value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (error != std::errc() || end != item.data() + item.size() || value == 0)
      throw UsageError(fmt::format("--d-k {}: expected a positive integer (a key's dimension, 1 or more)", item));
    d_ks.push_back(value);
  }
  return d_ks;
}

int run(const ScalingOptions& o) {
  const std::vector<std::size_t> d_ks = parse_d_ks(o.d_k);
  if (o.samples < 2)
    throw UsageError(
        fmt::format("--samples {}: a softmax over fewer than 2 samples always gives 1; use 2 or more", o.samples));
  // Refused before anything is allocated.
  const MemoryLimit limit = memory_limit(o.common);
  const auto samples = static_cast<std::size_t>(o.samples);
  const std::size_t need = scaling_memory(samples, d_ks);
  if (need > limit.bytes)
    throw UsageError(fmt::format("--samples {}: q and k at d_k {} need about {}, over --max-memory {}", o.samples,
                                 *std::max_element(d_ks.begin(), d_ks.end()), describe_bytes(need), limit.text));

  const ScalingResult result = scaling_experiment(d_ks, samples, o.seed);
  if (!o.common.json_out.empty()) {
    write_result(o.common.json_out, scaling_to_json(result));
    if (o.common.json_out == "-") return 0;
  }
  write_result("", render_scaling(result, render_options(o.common)));
  return 0;
}

}  // namespace

Runner add_scaling(CLI::App& app) {
  auto options = std::make_shared<ScalingOptions>();
  CLI::App* cmd = app.add_subcommand(
      "scaling", "why attention divides q·k by √d_k: score variance, softmax gradient and saturation across d_k");
  cmd->add_option("--d-k", options->d_k, "the key dimensions to try, a comma list of positive integers")
      ->type_name("LIST")
      ->delimiter(',')
      ->default_str("1,16,64,256,1024");
  cmd->add_option("--samples", options->samples, "N: how many random (q, k) pairs per d_k, 2 or more")
      ->type_name("N")
      ->default_str("1000");
  cmd->add_option("--seed", options->seed, "where the random numbers start (SplitMix64, Box-Muller)")
      ->type_name("S")
      ->check(CLI::NonNegativeNumber)
      ->default_str("0");
  cmd->add_option("--json", options->common.json_out,
                  "also write the figures as JSON to this file; - writes the JSON to stdout instead of the text")
      ->type_name("OUT");
  add_memory_option(*cmd, options->common);
  cmd->add_option("--precision", options->common.precision, "significant digits of the figures")
      ->check(CLI::Range(1, 17))
      ->default_str("4");
  cmd->footer(
      "Each d_k: N random q and k with standard normal entries, raw scores q·k and scaled q·k/√d_k, a softmax over\n"
      "the N samples (as the explainer's demo does), and per d_k the variance of the scores, the mean of s(1−s)\n"
      "and the largest weight. The same seed gives the same numbers on every machine.\n"
      "Examples:\n"
      "  attn-trace scaling\n"
      "  attn-trace scaling --d-k 2,8,32,128,512,2048 --samples 5000 --seed 7\n"
      "  attn-trace scaling --json scaling.json     also save the figures\n"
      "  attn-trace scaling --json - | python3 -m json.tool");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
