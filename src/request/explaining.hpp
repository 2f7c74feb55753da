#pragma once
// `attn-trace explain` as values: one attention weight, one output number or one gradient entry
// explained, every operation with its numbers (lessons/), checked against the input, and its JSON. The
// command line and the Python module ask here; each draws the result (render_explained) and writes it
// its way.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "lessons/explain_gradient.hpp"
#include "request/trace_options.hpp"

namespace attn {

struct ExplainOptions {
  TraceOptions trace;                     // the input (file), engine, dtype, tiles, max_memory, grad_seed
  std::optional<std::string> query, key;  // a token's name, or its index when no token has that name
  std::optional<std::size_t> head, batch, output;
  std::string grad;                // --grad STEP: a gradient entry instead
  std::vector<std::size_t> index;  // --index I,J,…: the entry
  // --decode: the weight or output number as the decode step of the query computes it, its one row against
  // the cache of every key so far (engine/decoder.hpp); the input must be causal self-attention.
  bool decode = false;
};

struct Explained {
  ExplainedNumber what;  // the explanation, which render/pages/explain_page.hpp draws (render_explained)
  std::string title;     // its page's title: the input, the dtype, the engine
  std::string json;      // as explain --json writes it (format attn-trace.explain)
};

// The explanation `request` asks for, of the input's text `text`, or, with none, of the file the
// request names (read within --max-memory). A request the input cannot answer is a UsageError that
// says why; a refused input an InputError.
Explained explain_for(const ExplainOptions& request, const std::optional<std::string>& text);

}  // namespace attn
