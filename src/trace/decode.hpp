#pragma once
// A recorded decode (attn-trace decode): the prefill's steps, each decode step's steps with its cache, its
// chunks and its pages, and the check of every output row against the plain causal pass (engine/decoder.hpp).

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "model/decode_plan.hpp"
#include "observe/records.hpp"
#include "trace/trace.hpp"

namespace attn {

// Flash-decoding's chunks of one step (docs/trace-format.md, `decode.steps[].split`). Each tensor has a
// leading batch axis for a batched input.
struct SplitRecord {
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // (S) [begin, end) of the cache
  Tensor<double> o;                                         // (h, S, d_v) each chunk's own output
  Tensor<double> lse;                                       // (h, S) its log-sum-exp, -inf when it is empty
  Tensor<double> share;                                     // (h, S) exp(lse_s - lse): its weight in the merge
  Tensor<double> merged_lse;                                // (h) log Σ_s exp(lse_s)
};

// A paged cache after one step: every sequence's block table, and the pool.
struct PageRecord {
  std::size_t page_size = 0;
  std::size_t pool_pages = 0;                    // pages in the pool that every sequence draws from
  std::size_t pages_in_use = 0;                  // of them
  std::vector<std::vector<std::size_t>> tables;  // (B) logical page k -> physical page tables[b][k]
};

struct DecodeStepRecord {
  std::size_t position = 0;      // of the new token
  std::size_t cache_length = 0;  // keys in the cache after its append: position + 1
  Trace token;                   // q … k_rot: of the new token alone
  Trace attend;                  // scores … output: its row against the cache
  Tensor<double> k_cache;        // (g, L, d_k) after the append, turned by RoPE as the scores read them
  Tensor<double> v_cache;        // (g, L, d_v)
  std::optional<SplitRecord> split;
  std::optional<PageRecord> pages;
  bool bit_exact = false;  // its output row is the causal pass's, bit for bit
  double max_abs = 0;      // max |its row - the causal pass's row|
};

struct DecodeRecord {
  DecodePlan plan;
  std::optional<Trace> prefill;         // the prompt's causal pass, when the prompt has tokens
  std::vector<DecodeStepRecord> steps;  // one per decoded token
  // The whole output beside `run`'s causal pass, judged by compare's rule with the decode in flash's place:
  // naive = the causal pass, flash = the decode.
  CompareRecord check;
  std::optional<std::size_t> layers;          // --layers, else the input's model.layers: for the cache's whole size
  std::optional<std::size_t> context_length;  // the input's model.context_length: the longest sequence
};

// What a decode's cache costs: bytes per token and layer, 2 · g · d_k · (bytes of a value) when d_v = d_k.
struct CacheCost {
  std::size_t value_bytes = 0;    // as the cache stores a value: 2 (float16, bfloat16), 4 or 8
  std::size_t per_token = 0;      // g · (d_k + d_v) · value_bytes: one layer
  std::size_t per_token_mha = 0;  // the same with h key/value heads, as multi-head attention keeps them
};
CacheCost cache_cost(const Problem& p, DType dtype);

// Decodes `problem` in `dtype` as `plan` says, and records every step; the trace's `output` step holds every
// token's output row (the prompt's from the prefill, then one per decode step), as `run`'s does.
Trace record_decode(const std::shared_ptr<const Problem>& problem, DType dtype, const DecodePlan& plan,
                    std::optional<std::size_t> layers = std::nullopt);

}  // namespace attn
