#pragma once
// `attn-trace decode` as values: the plan that --prompt, --split-kv and --page-size ask for, checked against
// the input, and the recorded decode (trace/decode.hpp). The command line and the Python module ask here.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "model/decode_plan.hpp"
#include "model/problem.hpp"
#include "request/trace_options.hpp"
#include "trace/trace.hpp"

namespace attn {

struct DecodeOptions {
  TraceOptions trace;                      // FILE, --dtype, --json, --max-memory and the display
  std::optional<std::size_t> prompt;       // --prompt N; default: all but the last three tokens
  std::optional<std::size_t> split_kv;     // --split-kv S; unsplit without it
  std::optional<std::size_t> page_size;    // --page-size P; contiguous without it
  std::optional<std::uint64_t> page_seed;  // --page-seed; 0 without it
  std::optional<std::size_t> layers;       // --layers N
};

// The options checked on their own, before the input is read: a UsageError for --split-kv, --page-size or
// --layers 0, or --page-seed without --page-size.
void check_decode_options(const DecodeOptions& options);

// The plan for `problem`, or an InputError naming FILE when the input cannot be decoded (not causal
// self-attention, dropout) or --prompt leaves nothing to decode.
DecodePlan decode_plan(const DecodeOptions& options, const Problem& problem);

// The decode of `problem` as the options ask, refused (exit 2) when an input value is beyond the dtype's range
// or its records would need more than --max-memory.
Trace decode_for(const DecodeOptions& options, const std::shared_ptr<const Problem>& problem);

}  // namespace attn
