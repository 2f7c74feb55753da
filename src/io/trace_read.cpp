// JSON text -> Trace (docs/trace-format.md), checking every shape against the trace's input before it
// sizes anything by it.

#include "io/trace_json.hpp"

#include <cmath>
#include <cstdint>
#include <iterator>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/load.hpp"
#include "json/error.hpp"
#include "json/fast_parser.hpp"
#include "json/parse.hpp"
#include "json/pointer.hpp"
#include "model/slice.hpp"
#include "trace/decode.hpp"

namespace attn {

using json = nlohmann::json;

namespace {

// A dY drawn by --grad-seed is saved in the input as data; the config says where it came from.
Problem with_upstream(Problem problem, const json& config) {
  if (!config.contains("backward") || !config.at("backward").is_object()) return problem;
  const json& b = config.at("backward");
  if (b.contains("dY") && b.at("dY") == "grad_seed" && b.contains("grad_seed") &&
      b.at("grad_seed").is_number_unsigned()) {
    problem.upstream = Upstream::seeded;
    problem.grad_seed = b.at("grad_seed").get<std::uint64_t>();
  }
  return problem;
}

class TraceReader {
 public:
  explicit TraceReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw InputError(file_, pointer, message);
  }

  Trace read(const json& doc) const {
    if (!doc.is_object() || !doc.contains("format") || doc.at("format") != "attn-trace.trace") {
      const std::string found = doc.is_object() && doc.contains("format") ? doc.at("format").dump() : "nothing";
      fail("/format", fmt::format("not an attn-trace trace: expected \"attn-trace.trace\", found {}", found));
    }
    if (!doc.contains("version") || !doc.at("version").is_number_integer())
      fail("/version", "expected the trace format's version, a whole number");
    const auto version = doc.at("version").get<long long>();
    if (version > trace_format_version)
      fail("/version", fmt::format("this trace has format version {}, newer than this attn-trace reads ({}): "
                                   "upgrade attn-trace to show it",
                                   version, trace_format_version));
    if (version < 1)
      fail("/version", fmt::format("expected a version from 1 to {}, found {}", trace_format_version, version));
    for (const char* key : {"input", "config", "steps"})
      if (!doc.contains(key)) fail(pointer_key("", key), "missing: a trace has input, config and steps");

    Trace t;
    const json& config = doc.at("config");
    t.problem =
        std::make_shared<const Problem>(with_upstream(problem_from_json(doc.at("input"), file_, "/input"), config));
    problem_ = t.problem.get();
    t.dtype = dtype_at(config, "/config");
    if (config.contains("engine")) {
      const std::string engine = string_at(config, "/config", "engine");
      const std::optional<Engine> known = engine_from_name(engine);
      if (!known)
        fail("/config/engine", fmt::format("expected \"naive\", \"flash\" or \"both\", found \"{}\"", engine));
      t.engine = *known;
    }
    if (config.contains("head") && !config.at("head").is_null()) {
      if (!config.at("head").is_number_unsigned() || config.at("head").get<std::size_t>() >= t.problem->h)
        fail("/config/head",
             fmt::format("expected a head from 0 to {}, found {}", t.problem->h - 1, config.at("head").dump()));
      t.head = config.at("head").get<std::size_t>();
      one_head_ = true;
    }

    read_steps(doc.at("steps"), "/steps", t);
    if (doc.contains("decode")) t.decode = decode(doc.at("decode"), t);
    if (doc.contains("flash")) t.flash = flash(doc.at("flash"), computes_in_float32(t.dtype));
    if (config.contains("backward")) t.backward = true;
    if (doc.contains("flash_backward")) {
      t.backward = true;
      t.flash_backward = flash_backward(doc.at("flash_backward"), computes_in_float32(t.dtype));
    }
    if (doc.contains("compare")) t.compare = compare(doc.at("compare"));
    if (doc.contains("empty_rows")) {
      const json& rows = doc.at("empty_rows");
      if (!rows.is_array()) fail("/empty_rows", "expected a list of {\"batch\", \"query\"} objects");
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const json& r = rows[i];
        if (!r.is_object() || !r.contains("batch") || !r.contains("query") || !r.at("batch").is_number_unsigned() ||
            !r.at("query").is_number_unsigned())
          fail(pointer_index("/empty_rows", i), "expected {\"batch\": whole number, \"query\": whole number}");
        t.empty_rows.push_back({r.at("batch").get<std::size_t>(), r.at("query").get<std::size_t>()});
      }
    }
    if (doc.contains("warnings")) {
      const json& w = doc.at("warnings");
      if (!w.is_array()) fail("/warnings", "expected a list of strings");
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (!w[i].is_string()) fail(pointer_index("/warnings", i), "expected a string");
        t.warnings.push_back(w[i].get<std::string>());
      }
    }
    return t;
  }

 private:
  // The steps at `ptr`, of the problem being read (problem_), into t.steps; a decode step's "k_cache" and
  // "v_cache" into `cache` when it is given.
  void read_steps(const json& steps, const std::string& ptr, Trace& t, DecodeStepRecord* cache = nullptr) const {
    if (!steps.is_array()) fail(ptr, "expected a list of steps");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string at = pointer_index(ptr, i);
      const json& s = steps[i];
      if (!s.is_object()) fail(at, "expected a step object");
      const std::string name = string_at(s, at, "name");
      const std::optional<DType> step_dtype = dtype_from_name(string_at(s, at, "dtype"));
      const bool float32 = step_dtype && computes_in_float32(*step_dtype);
      if (cache && (name == "k_cache" || name == "v_cache")) {
        // the cache as the row's scores and weighted sum read it: the row's keys (turned by RoPE) or values
        const Step as = name == "v_cache" ? Step::v_heads : problem_->rope ? Step::k_rot : Step::k_heads;
        (name == "k_cache" ? cache->k_cache : cache->v_cache) = tensor_at(s, at, float32, as);
        continue;
      }
      const std::optional<Step> step = step_from_name(name);
      if (!step) continue;  // a step this version does not know: newer writers may add steps
      if (!step_applies(*step, *problem_))
        fail(pointer_key(at, "name"),
             fmt::format("the step \"{}\" belongs to an input with \"{}\", and this trace's input has none",
                         step_info(*step).name, to_string(step_info(*step).needs)));
      if (is_gradient_step(*step)) t.backward = true;
      t.steps.push_back(
          {*step, string_at(s, at, "formula"), string_at(s, at, "description"), tensor_at(s, at, float32)});
    }
  }

  // A part of the trace's problem (a decode's prefill, new token or row) and its steps at `ptr`.
  Trace part_trace(const json& steps, const std::string& ptr, const Trace& whole, Problem part,
                   DecodeStepRecord* cache = nullptr) const {
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
  std::shared_ptr<const DecodeRecord> decode(const json& d, const Trace& t) const {
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

  DecodeStepRecord decode_step(const json& s, const std::string& at, std::size_t position, const DecodeRecord& d,
                               const Trace& t) const {
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
  SplitRecord split(const json& s, const std::string& at, std::size_t S, std::size_t L, bool float32) const {
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
  Tensor<double> shaped(const json& object, const std::string& ptr, const char* key, const Shape& expected,
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
  std::pair<std::size_t, std::size_t> range(const json& j, const std::string& at,
                                            std::pair<std::size_t, std::size_t> expected) const {
    if (!j.is_array() || j.size() != 2 || !j[0].is_number_unsigned() || !j[1].is_number_unsigned() ||
        j[0].get<std::size_t>() != expected.first || j[1].get<std::size_t>() != expected.second)
      fail(at, fmt::format("expected [{}, {}]: the cache cut as evenly as whole keys allow", expected.first,
                           expected.second));
    return expected;
  }

  PageRecord pages(const json& pg, const std::string& at, std::size_t page_size) const {
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
  CompareRecord decode_check(const json& d, const std::string& ptr, DType dtype) const {
    const std::string at = pointer_key(ptr, "check");
    if (!d.contains("check") || !d.at("check").is_object()) fail(at, "expected an object");
    const json& c = d.at("check");
    CompareRecord out;
    out.dtype = dtype;
    out.naive_vs_ref = stats(c, at, "run_vs_reference");
    out.flash_vs_ref = stats(c, at, "decode_vs_reference");
    out.flash_vs_naive = stats(c, at, "decode_vs_run");
    const std::string tol = pointer_key(at, "tolerance");
    if (!c.contains("tolerance") || !c.at("tolerance").is_object()) fail(tol, "expected an object");
    out.noise = real(c.at("tolerance"), tol, "noise");
    out.bound = real(c.at("tolerance"), tol, "bound");
    if (!c.at("tolerance").contains("pass") || !c.at("tolerance").at("pass").is_boolean())
      fail(pointer_key(tol, "pass"), "expected true or false");
    out.pass = c.at("tolerance").at("pass").get<bool>();
    return out;
  }

  std::size_t whole(const json& object, const std::string& ptr, const char* key) const {
    const std::string at = pointer_key(ptr, key);
    if (!object.contains(key) || !object.at(key).is_number_unsigned()) fail(at, "expected a whole number");
    return object.at(key).get<std::size_t>();
  }

  std::pair<std::size_t, std::size_t> range(const json& object, const std::string& ptr, const char* key) const {
    const std::string at = pointer_key(ptr, key);
    if (!object.contains(key) || !object.at(key).is_array() || object.at(key).size() != 2 ||
        !object.at(key)[0].is_number_unsigned() || !object.at(key)[1].is_number_unsigned())
      fail(at, "expected [first, last]: two whole numbers");
    return {object.at(key)[0].get<std::size_t>(), object.at(key)[1].get<std::size_t>()};
  }

  // A tensor of the given shape found at `key`, its shape known from the tile.
  Tensor<double> values(const json& object, const std::string& ptr, const char* key, Shape shape, bool float32) const {
    const std::string at = pointer_key(ptr, key);
    if (!object.contains(key)) fail(at, "missing");
    std::vector<double> data;
    read_values(object.at(key), shape, 0, at, float32, data);
    return Tensor<double>(std::move(shape), std::move(data));
  }

  // A tensor whose shape is whatever its nesting says (lse, output).
  Tensor<double> nested(const json& object, const std::string& ptr, const char* key, bool float32) const {
    const std::string at = pointer_key(ptr, key);
    if (!object.contains(key)) fail(at, "missing");
    Shape shape;
    for (const json* j = &object.at(key); j->is_array(); j = &j->at(0)) {
      shape.push_back(j->size());
      if (j->empty()) break;
    }
    if (shape.empty()) fail(at, "expected a list of numbers");
    return values(object, ptr, key, std::move(shape), float32);
  }

  // One tile of /flash/tiles at `at`: where it lies and, unless skipped, its state.
  FlashTile flash_tile(const json& t, const std::string& at, bool float32) const {
    if (!t.is_object()) fail(at, "expected a tile object");
    const Problem& p = *problem_;
    FlashTile tile{whole(t, at, "batch"),
                   whole(t, at, "head"),
                   whole(t, at, "i"),
                   whole(t, at, "j"),
                   0,
                   0,
                   0,
                   0,
                   false,
                   {},
                   {},
                   {},
                   {},
                   {},
                   {},
                   {},
                   {}};
    std::tie(tile.row_begin, tile.row_end) = range(t, at, "rows");
    std::tie(tile.col_begin, tile.col_end) = range(t, at, "cols");
    if (tile.batch >= p.B || tile.head >= p.h || tile.row_begin >= tile.row_end || tile.row_end > p.n ||
        tile.col_begin >= tile.col_end || tile.col_end > p.m)
      fail(at, "the tile lies outside the input's batch, heads, queries or keys");
    if (!t.contains("skipped") || !t.at("skipped").is_boolean())
      fail(pointer_key(at, "skipped"), "expected true or false");
    tile.skipped = t.at("skipped").get<bool>();
    if (!tile.skipped) {
      const std::size_t r = tile.row_end - tile.row_begin, c = tile.col_end - tile.col_begin;
      for (const TileField<FlashTile>& field : tile_fields())
        if (has_field(field, p))
          tile.*field.member = values(t, at, std::string(field.name).c_str(),
                                      tile_field_shape(field.rows, field.cols, r, c, p), float32);
    }
    return tile;
  }

  // /flash_backward: D and every tile of FlashAttention-2's backward pass.
  FlashBackwardRecord flash_backward(const json& f, bool float32) const {
    const std::string ptr = "/flash_backward";
    if (!f.is_object()) fail(ptr, "expected an object");
    const Problem& p = *problem_;
    FlashBackwardRecord out;
    out.tile_size = {whole(f, ptr, "block_q"), whole(f, ptr, "block_k")};
    out.D = nested(f, ptr, "D", float32);
    Shape rows = traced_shape(Step::scores, p, one_head_);  // D is (h, n), like a head step's first axes
    rows.pop_back();
    if (out.D.shape() != rows)
      fail(pointer_key(ptr, "D"), fmt::format("expected the shape {} for this input, found {}", rows, out.D.shape()));
    const std::string tiles_ptr = pointer_key(ptr, "tiles");
    if (!f.contains("tiles") || !f.at("tiles").is_array()) fail(tiles_ptr, "expected a list of tiles");
    for (std::size_t k = 0; k < f.at("tiles").size(); ++k) {
      const json& t = f.at("tiles")[k];
      const std::string at = pointer_index(tiles_ptr, k);
      if (!t.is_object()) fail(at, "expected a tile object");
      FlashBackwardTile tile{
          whole(t, at, "batch"), whole(t, at, "head"), whole(t, at, "i"), whole(t, at, "j"), 0, 0, 0, 0};
      std::tie(tile.row_begin, tile.row_end) = range(t, at, "rows");
      std::tie(tile.col_begin, tile.col_end) = range(t, at, "cols");
      if (tile.batch >= p.B || tile.head >= p.h || tile.row_begin >= tile.row_end || tile.row_end > p.n ||
          tile.col_begin >= tile.col_end || tile.col_end > p.m)
        fail(at, "the tile lies outside the input's batch, heads, queries or keys");
      if (!t.contains("skipped") || !t.at("skipped").is_boolean())
        fail(pointer_key(at, "skipped"), "expected true or false");
      tile.skipped = t.at("skipped").get<bool>();
      if (!tile.skipped) {
        const std::size_t r = tile.row_end - tile.row_begin, c = tile.col_end - tile.col_begin;
        for (const TileField<FlashBackwardTile>& field : backward_tile_fields())
          tile.*field.member = values(t, at, std::string(field.name).c_str(),
                                      tile_field_shape(field.rows, field.cols, r, c, p), float32);
      }
      out.tiles.push_back(std::move(tile));
    }
    return out;
  }

  FlashRecord flash(const json& f, bool float32) const {
    const std::string ptr = "/flash";
    if (!f.is_object()) fail(ptr, "expected an object");
    const Problem& p = *problem_;
    FlashRecord out;
    out.tile_size = {whole(f, ptr, "block_q"), whole(f, ptr, "block_k")};
    const std::string tiles_ptr = pointer_key(ptr, "tiles");
    if (!f.contains("tiles") || !f.at("tiles").is_array()) fail(tiles_ptr, "expected a list of tiles");
    for (std::size_t k = 0; k < f.at("tiles").size(); ++k)
      out.tiles.push_back(flash_tile(f.at("tiles")[k], pointer_index(tiles_ptr, k), float32));
    if (f.contains("finals")) {
      const std::string finals_ptr = pointer_key(ptr, "finals");
      if (!f.at("finals").is_array()) fail(finals_ptr, "expected a list");
      for (std::size_t k = 0; k < f.at("finals").size(); ++k) {
        const json& d = f.at("finals")[k];
        const std::string at = pointer_index(finals_ptr, k);
        if (!d.is_object()) fail(at, "expected an object");
        FlashFinal done{whole(d, at, "batch"), whole(d, at, "head"), whole(d, at, "i"), 0, 0, {}, {}};
        std::tie(done.row_begin, done.row_end) = range(d, at, "rows");
        if (done.batch >= p.B || done.head >= p.h || done.row_begin >= done.row_end || done.row_end > p.n)
          fail(at, "the query tile lies outside the input's batch, heads or queries");
        const std::size_t r = done.row_end - done.row_begin;
        done.O = values(d, at, "O", {r, p.d_v}, float32);
        done.lse = values(d, at, "lse", {r}, float32);
        out.finals.push_back(std::move(done));
      }
    }
    out.lse = nested(f, ptr, "lse", float32);
    out.output = nested(f, ptr, "output", float32);
    // lse is (h, n) like a head step's first two axes; output is the output step's shape.
    Shape lse_shape = traced_shape(Step::scores, p, one_head_);
    lse_shape.pop_back();
    // Traces of version 1 written before lse was always reported hold [] when their tiles were left out.
    if (out.lse.size() == 0) out.lse = Tensor<double>();
    else if (out.lse.shape() != lse_shape)
      fail(pointer_key(ptr, "lse"),
           fmt::format("expected the shape {} for this input, found {}", lse_shape, out.lse.shape()));
    if (out.output.shape() != traced_shape(Step::output, p, one_head_))
      fail(pointer_key(ptr, "output"), fmt::format("expected the shape {} for this input, found {}",
                                                   traced_shape(Step::output, p, one_head_), out.output.shape()));
    return out;
  }

  double real(const json& object, const std::string& ptr, const char* key) const {
    const std::string at = pointer_key(ptr, key);
    if (!object.contains(key)) fail(at, "missing");
    return number(object.at(key), at, false);
  }

  ErrorStats stats(const json& c, const std::string& ptr, const char* key) const {
    const std::string at = pointer_key(ptr, key);
    if (!c.contains(key) || !c.at(key).is_object()) fail(at, "expected {max_abs, max_rel, max_ulp}");
    const json& s = c.at(key);
    return {real(s, at, "max_abs"), real(s, at, "max_rel"), whole(s, at, "max_ulp")};
  }

  CompareRecord compare(const json& c) const {
    const std::string ptr = "/compare";
    if (!c.is_object()) fail(ptr, "expected an object");
    const Problem& p = *problem_;
    CompareRecord out;
    out.dtype = dtype_at(c, ptr);
    out.tile_size = {whole(c, ptr, "block_q"), whole(c, ptr, "block_k")};
    out.naive_vs_ref = stats(c, ptr, "naive_vs_reference");
    out.flash_vs_ref = stats(c, ptr, "flash_vs_reference");
    out.flash_vs_naive = stats(c, ptr, "flash_vs_naive");
    const std::string mem = pointer_key(ptr, "memory");
    if (!c.contains("memory") || !c.at("memory").is_object()) fail(mem, "expected an object");
    out.naive_peak_bytes = whole(c.at("memory"), mem, "naive_peak_bytes");
    out.flash_peak_bytes = whole(c.at("memory"), mem, "flash_peak_bytes");
    const std::string tol = pointer_key(ptr, "tolerance");
    if (!c.contains("tolerance") || !c.at("tolerance").is_object()) fail(tol, "expected an object");
    out.noise = real(c.at("tolerance"), tol, "noise");
    out.bound = real(c.at("tolerance"), tol, "bound");
    if (!c.at("tolerance").contains("pass") || !c.at("tolerance").at("pass").is_boolean())
      fail(pointer_key(tol, "pass"), "expected true or false");
    out.pass = c.at("tolerance").at("pass").get<bool>();
    const std::string outs = pointer_key(ptr, "outputs");
    if (!c.contains("outputs") || !c.at("outputs").is_object()) fail(outs, "expected an object");
    const Shape shape = {p.B, p.n, p.d_out};
    Shape written = shape;
    if (!p.batched) written.erase(written.begin());
    const bool float32 = computes_in_float32(out.dtype);
    const auto output = [&](const char* key, bool in_float32) {
      const Tensor<double> t = values(c.at("outputs"), outs, key, written, in_float32);
      return Tensor<double>(shape, std::vector<double>(t.values().begin(), t.values().end()));  // batch axis back
    };
    out.naive = output("naive", float32);
    out.flash = output("flash", float32);
    out.reference = output("reference", false);
    return out;
  }

  DType dtype_at(const json& object, const std::string& ptr) const {
    const std::string name = string_at(object, ptr, "dtype");
    const std::optional<DType> dtype = dtype_from_name(name);
    if (!dtype)
      fail(pointer_key(ptr, "dtype"),
           fmt::format("expected \"float32\", \"float64\", \"float16\" or \"bfloat16\", found \"{}\"", name));
    return *dtype;
  }

  std::string string_at(const json& object, const std::string& ptr, const char* key) const {
    const std::string at = pointer_key(ptr, key);
    if (!object.contains(key)) fail(at, "missing");
    if (!object.at(key).is_string()) fail(at, "expected a string");
    return object.at(key).get<std::string>();
  }

  // A step's tensor, its shape that of `as` (else of its name) for the problem being read.
  Tensor<double> tensor_at(const json& step, const std::string& ptr, bool float32,
                           std::optional<Step> as = std::nullopt) const {
    const std::string shape_ptr = pointer_key(ptr, "shape");
    if (!step.contains("shape") || !step.at("shape").is_array()) fail(shape_ptr, "expected a list of extents");
    Shape shape;
    for (const json& d : step.at("shape")) {
      if (!d.is_number_unsigned()) fail(shape_ptr, "expected whole numbers");
      shape.push_back(d.get<std::size_t>());
    }
    const std::string data_ptr = pointer_key(ptr, "data");
    if (!step.contains("data")) fail(data_ptr, "missing");
    // The shape is a claim: check it against the numbers there before anything is sized by it.
    if (shape.empty() || shape.size() > max_rank)
      fail(shape_ptr, fmt::format("expected 1 to {} extents, found {}", max_rank, shape.size()));
    const std::size_t claimed = checked_count(shape), held = count_numbers(step.at("data"), shape.size());
    if (claimed != held)
      fail(shape_ptr, fmt::format("the step \"{}\" claims the shape {} ({} numbers), but its data holds {} numbers",
                                  string_at(step, ptr, "name"), shape,
                                  claimed == too_many ? "more than 2^64" : std::to_string(claimed), held));
    // The printer labels rows and columns by the input's tokens: a step must have its true shape.
    const Shape expected = traced_shape(as ? *as : *step_from_name(string_at(step, ptr, "name")), *problem_, one_head_);
    if (shape != expected)
      fail(shape_ptr, fmt::format("the step \"{}\" has the shape {} for this input, found {}",
                                  string_at(step, ptr, "name"), expected, shape));
    std::vector<double> data;
    data.reserve(held);
    read_values(step.at("data"), shape, 0, data_ptr, float32, data);
    return Tensor<double>(std::move(shape), std::move(data));
  }

  static constexpr std::size_t too_many = std::numeric_limits<std::size_t>::max();

  // The product of the extents, or too_many when it does not fit in a size_t.
  static std::size_t checked_count(const Shape& shape) {
    std::size_t count = 1;
    for (const std::size_t extent : shape)
      if (__builtin_mul_overflow(count, extent, &count)) return too_many;
    return count;
  }

  static constexpr std::size_t max_rank = 8;  // a step has at most 4 axes: batch, head, row, column

  // The values `depth` lists down in nested lists (what read_values will read as numbers).
  static std::size_t count_numbers(const json& j, std::size_t depth) {
    if (depth == 0 || !j.is_array()) return 1;
    std::size_t count = 0;
    for (const json& item : j) count += count_numbers(item, depth - 1);
    return count;
  }

  void read_values(const json& j, const Shape& shape, std::size_t axis, const std::string& ptr, bool float32,
                   std::vector<double>& out) const {
    if (!j.is_array() || j.size() != shape[axis])
      fail(ptr, fmt::format("expected a list of {} (the step's shape), found {}", shape[axis],
                            j.is_array() ? fmt::format("{} items", j.size()) : j.dump()));
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (axis + 1 < shape.size()) {
        read_values(j[i], shape, axis + 1, pointer_index(ptr, i), float32, out);
        continue;
      }
      // A number needs no pointer (it cannot fail): making one for each took longer than parsing it.
      const json& x = j[i];
      out.push_back(number(x, x.is_number() ? std::string() : pointer_index(ptr, i), float32));
    }
  }

  double number(const json& j, const std::string& ptr, bool float32) const {
    double x = 0;
    if (j.is_number()) x = j.get<double>();
    else if (j == "-inf") x = -std::numeric_limits<double>::infinity();
    else if (j == "inf") x = std::numeric_limits<double>::infinity();
    else if (j == "nan") x = std::numeric_limits<double>::quiet_NaN();
    else fail(ptr, fmt::format("expected a number, \"-inf\", \"inf\" or \"nan\", found {}", j.dump()));
    // The shortest float32 text read as a double is the nearest double to it; rounding that to
    // float gives back the float that was written.
    return float32 ? static_cast<double>(static_cast<float>(x)) : x;
  }

  std::string file_;
  mutable const Problem* problem_ = nullptr;  // the trace's problem, while reading it
  mutable bool one_head_ = false;             // the trace kept one head (config.head)
};

}  // namespace

Trace trace_from_json(std::string_view text, const std::string& file) {
  // A trace is written by a program, so its text is parsed once; a broken one is still placed.
  json doc = parse_json(text, file, false);
  Trace trace = TraceReader(file).read(doc);
  discard_json(std::move(doc));
  return trace;
}

bool looks_like_trace(std::string_view text) {
  std::size_t k = 0;
  const auto skip_space = [&] {
    while (k < text.size() && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r')) ++k;
  };
  if (text.substr(0, 3) == "\xEF\xBB\xBF") k = 3;  // a byte order mark
  skip_space();
  if (k >= text.size() || text[k] != '{') return false;
  ++k;
  skip_space();
  return text.substr(k, 8) == "\"format\"";
}

}  // namespace attn
