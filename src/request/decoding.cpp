#include "request/decoding.hpp"

#include <utility>

#include <fmt/format.h>

#include "io/load.hpp"
#include "io/read.hpp"
#include "json/error.hpp"
#include "model/slice.hpp"
#include "request/memory.hpp"
#include "request/request.hpp"
#include "text/number.hpp"
#include "trace/decode.hpp"

namespace attn {

void check_decode_options(const DecodeOptions& o) {
  if (o.page_seed && !o.page_size)
    throw UsageError("--page-seed: the pool's order needs a paged cache; add --page-size P");
  for (const auto& [given, option] :
       {std::pair{o.split_kv, "--split-kv"}, std::pair{o.page_size, "--page-size"}, std::pair{o.layers, "--layers"}})
    if (given && *given == 0) throw UsageError(fmt::format("{}: expected at least 1, found 0", option));
}

DecodePlan decode_plan(const DecodeOptions& o, const Problem& p) {
  const std::string file = display_name(o.trace.file);
  if (const std::optional<std::string> why = decode_refusal(p)) throw InputError(file, "", *why);
  DecodePlan plan;
  plan.prompt = o.prompt.value_or(default_prompt(p.n));
  if (plan.prompt >= p.n)
    throw InputError(file, "",
                     fmt::format("--prompt {}: the input has {} tokens, so a prompt of {} leaves none to decode "
                                 "(--prompt 0 … {})",
                                 plan.prompt, p.n, plan.prompt, p.n - 1));
  plan.split = o.split_kv.value_or(0);
  plan.page_size = o.page_size.value_or(0);
  plan.page_seed = o.page_seed.value_or(0);
  return plan;
}

namespace {

// What a decode's records hold, in doubles: every decode step's cache (g · L · (d_k + d_v)) and its row's
// steps (about six score-sized rows of h · L, and the heads' widths), for L = the cache's length; the prefill
// as `run` keeps its steps; the causal pass and the reference that check it. Times the JSON's text when
// --json asks for it (about 25 characters a number).
std::uint64_t decode_bytes(const DecodeOptions& o, const Problem& p, const DecodePlan& plan) {
  const std::uint64_t B = p.B, n = p.n, N = plan.prompt;
  const std::uint64_t per_key = p.g * (p.d_k + p.d_v) + 6 * p.h;
  std::uint64_t values = 0;
  for (std::uint64_t L = N + 1; L <= n; ++L) values += B * (L * per_key + 4 * (p.d_model + p.h * p.d_k + p.d_out));
  values += B * (N * N * 6 * p.h + N * (3 * p.d_model + 2 * p.h * (p.d_k + p.d_v) + p.d_out));  // the prefill
  values += 2 * B * (n * n * 2 * p.h + n * (p.d_model + p.h * (p.d_k + p.d_v)));  // the causal pass, the reference
  const std::uint64_t bytes = values * 8;
  return o.trace.json_out.empty() ? bytes : bytes + values * 25;
}

}  // namespace

Trace decode_for(const DecodeOptions& o, const std::shared_ptr<const Problem>& problem) {
  const DecodePlan plan = decode_plan(o, *problem);
  check_range(*problem, display_name(o.trace.file), o.trace.dtype);
  const std::uint64_t need = decode_bytes(o, *problem, plan), limit = memory_limit(o.trace).bytes;
  if (need > limit)
    throw InputError(display_name(o.trace.file), "",
                     fmt::format("decoding {} tokens after a prompt of {} would keep about {} of steps, more than "
                                 "--max-memory {}: a larger --prompt decodes fewer tokens",
                                 problem->n - plan.prompt, plan.prompt, describe_bytes(need), o.trace.max_memory));
  return record_decode(problem, o.trace.dtype, plan, o.layers);
}

}  // namespace attn
