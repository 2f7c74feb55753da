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
  TraceOptions trace;                 // FILE, --dtype, --json, --max-memory and the display
  std::optional<std::size_t> prompt;  // --prompt N; default: all but the last three tokens
  std::size_t split_kv = 0;           // --split-kv S: 0 unsplit
  std::size_t page_size = 0;          // --page-size P: 0 contiguous
  std::uint64_t page_seed = 0;        // --page-seed
  std::optional<std::size_t> layers;  // --layers N
};

// The plan for `problem`, or an InputError naming FILE when the input cannot be decoded (not causal
// self-attention, dropout) or --prompt leaves nothing to decode.
DecodePlan decode_plan(const DecodeOptions& options, const Problem& problem);

// The decode of `problem` as the options ask, refused (exit 2) when an input value is beyond the dtype's range
// or its records would need more than --max-memory.
Trace decode_for(const DecodeOptions& options, const std::shared_ptr<const Problem>& problem);

}  // namespace attn
