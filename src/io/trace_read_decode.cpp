// JSON -> a decode's records (docs/trace-format.md, "Decoding: decode"): the plan, the prefill, every decode
// step with its chunks and pages, and the check; the rest of a trace is trace_read.cpp's.

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "io/trace_reader.hpp"
#include "json/pointer.hpp"
#include "model/slice.hpp"

namespace attn::trace_reading {

// A part of the trace's problem (a decode's prefill, new token or row) and its steps at `ptr`.
Trace TraceReader::part_trace(const json& steps, const std::string& ptr, const Trace& whole, Problem part,
                              DecodeStepRecord* cache) const {
  Trace t;
  t.problem = std::make_shared<const Problem>(std::move(part));
  t.dtype = whole.dtype;
  t.engine = Engine::naive;
  const Problem* const trace_problem = problem_;
  problem_ = t.problem.get();
  read_steps(steps, ptr, t, cache);
  problem_ = trace_problem;
  return t;
}

// /decode (docs/trace-format.md, "Decoding: decode"): the plan, the prefill, every decode step and the check.
std::shared_ptr<const DecodeRecord> TraceReader::decode(const json& d, const Trace& t) const {
  const std::string ptr = "/decode";
  if (!d.is_object()) fail(ptr, "expected an object");
  const Problem& p = *problem_;
  if (const std::optional<std::string> why = decode_refusal(p))
    fail(ptr, "this trace's input cannot be decoded: " + *why);
  if (one_head_) fail("/config/head", "a decode trace keeps every head");
  auto out = std::make_shared<DecodeRecord>();
  out->plan.prompt = whole(d, ptr, "prompt");
  if (out->plan.prompt >= p.n)
    fail(pointer_key(ptr, "prompt"),
         fmt::format("expected a prompt of 0 to {} tokens (the input has {})", p.n - 1, p.n));
  const auto optional_whole = [&](const json& o, const std::string& at, const char* key,
                                  std::size_t least) -> std::optional<std::size_t> {
    if (!o.contains(key) || o.at(key).is_null()) return std::nullopt;
    const std::size_t x = whole(o, at, key);
    if (x < least) fail(pointer_key(at, key), fmt::format("expected null or a whole number of at least {}", least));
    return x;
  };
  out->plan.split = optional_whole(d, ptr, "split_kv", 2).value_or(0);
  out->plan.page_size = optional_whole(d, ptr, "page_size", 1).value_or(0);
  if (out->plan.page_size > 0) {
    if (!d.contains("page_seed") || !d.at("page_seed").is_number_unsigned())
      fail(pointer_key(ptr, "page_seed"), "expected the seed of the pool's order, a whole number");
    out->plan.page_seed = d.at("page_seed").get<std::uint64_t>();
  }
  const std::string cache_ptr = pointer_key(ptr, "cache");
  if (!d.contains("cache") || !d.at("cache").is_object()) fail(cache_ptr, "expected an object");
  out->layers = optional_whole(d.at("cache"), cache_ptr, "layers", 1);
  out->context_length = optional_whole(d.at("cache"), cache_ptr, "context_length", 1);

  const std::string prefill_ptr = pointer_key(ptr, "prefill");
  if (!d.contains("prefill")) fail(prefill_ptr, "missing: the prompt's causal pass, or null");
  if (out->plan.prompt > 0) {
    if (!d.at("prefill").is_object()) fail(prefill_ptr, "expected the prompt's causal pass {tokens, steps}");
    if (whole(d.at("prefill"), prefill_ptr, "tokens") != out->plan.prompt)
      fail(pointer_key(prefill_ptr, "tokens"), fmt::format("expected the prompt's {} tokens", out->plan.prompt));
    if (!d.at("prefill").contains("steps")) fail(pointer_key(prefill_ptr, "steps"), "missing");
    out->prefill = part_trace(d.at("prefill").at("steps"), pointer_key(prefill_ptr, "steps"), t,
                              slice_problem(p, 0, out->plan.prompt, 0));
  } else if (!d.at("prefill").is_null()) {
    fail(prefill_ptr, "expected null: a prompt of 0 tokens has no prefill");
  }

  const std::string steps_ptr = pointer_key(ptr, "steps");
  if (!d.contains("steps") || !d.at("steps").is_array()) fail(steps_ptr, "expected a list of decode steps");
  const json& steps = d.at("steps");
  if (steps.size() != p.n - out->plan.prompt)
    fail(steps_ptr, fmt::format("expected {} decode steps, one per token after the prompt, found {}",
                                p.n - out->plan.prompt, steps.size()));
  for (std::size_t k = 0; k < steps.size(); ++k)
    out->steps.push_back(decode_step(steps[k], pointer_index(steps_ptr, k), out->plan.prompt + k, *out, t));
  out->check = decode_check(d, ptr, t.dtype);
  return out;
}

DecodeStepRecord TraceReader::decode_step(const json& s, const std::string& at, std::size_t position,
                                          const DecodeRecord& d, const Trace& t) const {
  const Problem& p = *problem_;
  if (!s.is_object()) fail(at, "expected a decode step object");
  DecodeStepRecord r;
  r.position = whole(s, at, "position");
  if (r.position != position)
    fail(pointer_key(at, "position"), fmt::format("expected the position {}, the steps' order", position));
  r.cache_length = whole(s, at, "cache_length");
  if (r.cache_length != position + 1)
    fail(pointer_key(at, "cache_length"), fmt::format("expected {}: every key up to the token's", position + 1));
  if (!s.contains("steps")) fail(pointer_key(at, "steps"), "missing");
  const std::string steps_at = pointer_key(at, "steps");
  // The new token's own steps (q … k_rot) and the row's (scores … output), told apart by name
  json token = json::array(), row = json::array();
  if (!s.at("steps").is_array()) fail(steps_at, "expected a list of steps");
  for (const json& step : s.at("steps")) {
    const std::optional<Step> known = step.is_object() && step.contains("name") && step.at("name").is_string()
                                          ? step_from_name(step.at("name").get<std::string>())
                                          : std::nullopt;
    (known && is_decode_token_step(*known) ? token : row).push_back(step);
  }
  r.token = part_trace(token, steps_at, t, slice_problem(p, position, position + 1, position));
  r.attend = part_trace(row, steps_at, t, slice_problem(p, position, position + 1, 0), &r);
  const Shape cache_shape = traced_shape(Step::v_heads, *r.attend.problem, false);
  if (r.k_cache.size() == 0 || r.v_cache.size() == 0 || r.v_cache.shape() != cache_shape)
    fail(steps_at, "expected the steps k_cache and v_cache: every key and value so far");
  const bool float32 = computes_in_float32(t.dtype);
  if (s.contains("split") && !s.at("split").is_null()) {
    if (d.plan.split < 2) fail(pointer_key(at, "split"), "a step of an unsplit decode has no chunks");
    r.split = split(s.at("split"), pointer_key(at, "split"), d.plan.split, r.cache_length, float32);
  } else if (d.plan.split > 1) {
    fail(pointer_key(at, "split"), fmt::format("missing: the step's {} chunks", d.plan.split));
  }
  if (s.contains("pages") && !s.at("pages").is_null()) {
    if (d.plan.page_size == 0) fail(pointer_key(at, "pages"), "a contiguous cache has no pages");
    r.pages = pages(s.at("pages"), pointer_key(at, "pages"), d.plan.page_size);
  } else if (d.plan.page_size > 0) {
    fail(pointer_key(at, "pages"), "missing: the paged cache's block tables");
  }
  const std::string check_at = pointer_key(at, "check");
  if (!s.contains("check") || !s.at("check").is_object() || !s.at("check").contains("bit_exact") ||
      !s.at("check").at("bit_exact").is_boolean())
    fail(check_at, "expected {\"bit_exact\": true or false, \"max_abs\": a number}");
  r.bit_exact = s.at("check").at("bit_exact").get<bool>();
  r.max_abs = real(s.at("check"), check_at, "max_abs");
  return r;
}

// A step's chunks: S of them over its cache, each chunk's o, lse and share, and the merged lse.
SplitRecord TraceReader::split(const json& s, const std::string& at, std::size_t S, std::size_t L, bool float32) const {
  const Problem& p = *problem_;
  if (!s.is_object()) fail(at, "expected an object");
  SplitRecord out;
  const std::string chunks_at = pointer_key(at, "chunks");
  if (!s.contains("chunks") || !s.at("chunks").is_array() || s.at("chunks").size() != S)
    fail(chunks_at, fmt::format("expected {} chunks [begin, end)", S));
  for (std::size_t c = 0; c < S; ++c) {
    const auto [begin, end] = range(s.at("chunks")[c], pointer_index(chunks_at, c), chunk_of(c, S, L));
    out.chunks.emplace_back(begin, end);
  }
  Shape heads = p.batched ? Shape{p.B, p.h} : Shape{p.h};
  Shape per_chunk = heads;
  per_chunk.push_back(S);
  Shape o_shape = per_chunk;
  o_shape.push_back(p.d_v);
  out.o = shaped(s, at, "o", o_shape, float32);
  out.lse = shaped(s, at, "lse", per_chunk, float32);
  out.share = shaped(s, at, "share", per_chunk, float32);
  out.merged_lse = shaped(s, at, "lse_merged", heads, float32);
  return out;
}

// A {"shape", "data"} object at `key` whose shape must be `expected`.
Tensor<double> TraceReader::shaped(const json& object, const std::string& ptr, const char* key, const Shape& expected,
                                   bool float32) const {
  const std::string at = pointer_key(ptr, key);
  if (!object.contains(key) || !object.at(key).is_object() || !object.at(key).contains("shape"))
    fail(at, "expected {\"shape\", \"data\"}");
  const json& shape = object.at(key).at("shape");
  if (shape != json(expected))
    fail(pointer_key(at, "shape"),
         fmt::format("expected the shape {} for this input, found {}", expected, shape.dump()));
  return values(object.at(key), at, "data", expected, float32);
}

// A chunk's [begin, end): the one chunk_of gives, as the writer cut it.
std::pair<std::size_t, std::size_t> TraceReader::range(const json& j, const std::string& at,
                                                       std::pair<std::size_t, std::size_t> expected) const {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_unsigned() || !j[1].is_number_unsigned() ||
      j[0].get<std::size_t>() != expected.first || j[1].get<std::size_t>() != expected.second)
    fail(at, fmt::format("expected [{}, {}]: the cache cut as evenly as whole keys allow", expected.first,
                         expected.second));
  return expected;
}

PageRecord TraceReader::pages(const json& pg, const std::string& at, std::size_t page_size) const {
  const Problem& p = *problem_;
  if (!pg.is_object()) fail(at, "expected an object");
  PageRecord out{whole(pg, at, "page_size"), whole(pg, at, "pool_pages"), whole(pg, at, "pages_in_use"), {}};
  if (out.page_size != page_size) fail(pointer_key(at, "page_size"), fmt::format("expected {}", page_size));
  if (out.pages_in_use > out.pool_pages)
    fail(pointer_key(at, "pages_in_use"), "expected no more pages in use than the pool holds");
  const std::string tables_at = pointer_key(at, "block_tables");
  if (!pg.contains("block_tables") || !pg.at("block_tables").is_array() || pg.at("block_tables").size() != p.B)
    fail(tables_at, fmt::format("expected a block table for each of {} sequence{}", p.B, p.B == 1 ? "" : "s"));
  for (std::size_t b = 0; b < p.B; ++b) {
    const json& table = pg.at("block_tables")[b];
    const std::string table_at = pointer_index(tables_at, b);
    if (!table.is_array()) fail(table_at, "expected a list of physical pages");
    std::vector<std::size_t> physical;
    for (std::size_t k = 0; k < table.size(); ++k) {
      if (!table[k].is_number_unsigned() || table[k].get<std::size_t>() >= out.pool_pages)
        fail(pointer_index(table_at, k), fmt::format("expected a page of the pool, 0 to {}", out.pool_pages - 1));
      physical.push_back(table[k].get<std::size_t>());
    }
    out.tables.push_back(std::move(physical));
  }
  return out;
}

// /decode/check: compare's rule with the decode in flash's place.
CompareRecord TraceReader::decode_check(const json& d, const std::string& ptr, DType dtype) const {
  const std::string at = pointer_key(ptr, "check");
  if (!d.contains("check") || !d.at("check").is_object()) fail(at, "expected an object");
  const json& c = d.at("check");
  CompareRecord out;
  out.dtype = dtype;
  out.naive_vs_ref = stats(c, at, "run_vs_reference");
  out.flash_vs_ref = stats(c, at, "decode_vs_reference");
  out.flash_vs_naive = stats(c, at, "decode_vs_run");
  tolerance(c, at, out);
  return out;
}

}  // namespace attn::trace_reading
