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
#include "io/trace_reader.hpp"
#include "json/error.hpp"
#include "json/fast_parser.hpp"
#include "json/parse.hpp"
#include "json/pointer.hpp"
#include "trace/decode.hpp"

namespace attn {

namespace trace_reading {

namespace {

// A dY drawn by --grad-seed is saved in the input as data; the config says where it came from.
Problem with_saved_upstream(Problem problem, const json& config) {
  if (!config.contains("backward") || !config.at("backward").is_object()) return problem;
  const json& b = config.at("backward");
  if (b.contains("dY") && b.at("dY") == "grad_seed" && b.contains("grad_seed") &&
      b.at("grad_seed").is_number_unsigned()) {
    problem.upstream = Upstream::seeded;
    problem.grad_seed = b.at("grad_seed").get<std::uint64_t>();
  }
  return problem;
}

}  // namespace

Trace TraceReader::read(const json& doc) const {
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
      std::make_shared<const Problem>(with_saved_upstream(problem_from_json(doc.at("input"), file_, "/input"), config));
  problem_ = t.problem.get();
  t.dtype = dtype_at(config, "/config");
  if (config.contains("engine")) {
    const std::string engine = string_at(config, "/config", "engine");
    const std::optional<Engine> known = engine_from_name(engine);
    if (!known) fail("/config/engine", fmt::format("expected \"naive\", \"flash\" or \"both\", found \"{}\"", engine));
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

// The steps at `ptr`, of the problem being read (problem_), into t.steps; a decode step's "k_cache" and
// "v_cache" into `cache` when it is given.
void TraceReader::read_steps(const json& steps, const std::string& ptr, Trace& t, DecodeStepRecord* cache) const {
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
                       step_info(*step).name, needs_name(step_info(*step))));
    if (is_gradient_step(*step)) t.backward = true;
    t.steps.push_back({*step, string_at(s, at, "formula"), string_at(s, at, "description"), tensor_at(s, at, float32)});
  }
}

std::size_t TraceReader::whole(const json& object, const std::string& ptr, const char* key) const {
  const std::string at = pointer_key(ptr, key);
  if (!object.contains(key) || !object.at(key).is_number_unsigned()) fail(at, "expected a whole number");
  return object.at(key).get<std::size_t>();
}

std::pair<std::size_t, std::size_t> TraceReader::range(const json& object, const std::string& ptr,
                                                       const char* key) const {
  const std::string at = pointer_key(ptr, key);
  if (!object.contains(key) || !object.at(key).is_array() || object.at(key).size() != 2 ||
      !object.at(key)[0].is_number_unsigned() || !object.at(key)[1].is_number_unsigned())
    fail(at, "expected [first, last]: two whole numbers");
  return {object.at(key)[0].get<std::size_t>(), object.at(key)[1].get<std::size_t>()};
}

// A tensor of the given shape found at `key`, its shape known from the tile.
Tensor<double> TraceReader::values(const json& object, const std::string& ptr, const char* key, Shape shape,
                                   bool float32) const {
  const std::string at = pointer_key(ptr, key);
  if (!object.contains(key)) fail(at, "missing");
  std::vector<double> data;
  read_values(object.at(key), shape, 0, at, float32, data);
  return Tensor<double>(std::move(shape), std::move(data));
}

// A tensor whose shape is whatever its nesting says (lse, output).
Tensor<double> TraceReader::nested(const json& object, const std::string& ptr, const char* key, bool float32) const {
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
FlashTile TraceReader::flash_tile(const json& t, const std::string& at, bool float32) const {
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
  place_tile(t, at, tile);
  if (!tile.skipped) {
    const std::size_t r = tile.row_end - tile.row_begin, c = tile.col_end - tile.col_begin;
    for (const TileField<FlashTile>& field : tile_fields())
      if (has_field(field, p))
        tile.*field.member =
            values(t, at, std::string(field.name).c_str(), tile_field_shape(field.rows, field.cols, r, c, p), float32);
  }
  return tile;
}

// /compare/tolerance and /decode/check/tolerance at ptr: the rule's noise, its bound and its verdict.
void TraceReader::tolerance(const json& c, const std::string& ptr, CompareRecord& out) const {
  const std::string tol = pointer_key(ptr, "tolerance");
  if (!c.contains("tolerance") || !c.at("tolerance").is_object()) fail(tol, "expected an object");
  out.noise = real(c.at("tolerance"), tol, "noise");
  out.bound = real(c.at("tolerance"), tol, "bound");
  if (!c.at("tolerance").contains("pass") || !c.at("tolerance").at("pass").is_boolean())
    fail(pointer_key(tol, "pass"), "expected true or false");
  out.pass = c.at("tolerance").at("pass").get<bool>();
}

// /flash_backward: D and every tile of FlashAttention-2's backward pass.
FlashBackwardRecord TraceReader::flash_backward(const json& f, bool float32) const {
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
    place_tile(t, at, tile);
    if (!tile.skipped) {
      const std::size_t r = tile.row_end - tile.row_begin, c = tile.col_end - tile.col_begin;
      for (const TileField<FlashBackwardTile>& field : backward_tile_fields())
        tile.*field.member =
            values(t, at, std::string(field.name).c_str(), tile_field_shape(field.rows, field.cols, r, c, p), float32);
    }
    out.tiles.push_back(std::move(tile));
  }
  return out;
}

FlashRecord TraceReader::flash(const json& f, bool float32) const {
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

double TraceReader::real(const json& object, const std::string& ptr, const char* key) const {
  const std::string at = pointer_key(ptr, key);
  if (!object.contains(key)) fail(at, "missing");
  return number(object.at(key), at, false);
}

ErrorStats TraceReader::stats(const json& c, const std::string& ptr, const char* key) const {
  const std::string at = pointer_key(ptr, key);
  if (!c.contains(key) || !c.at(key).is_object()) fail(at, "expected {max_abs, max_rel, max_ulp}");
  const json& s = c.at(key);
  return {real(s, at, "max_abs"), real(s, at, "max_rel"), whole(s, at, "max_ulp")};
}

CompareRecord TraceReader::compare(const json& c) const {
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
  tolerance(c, ptr, out);
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

DType TraceReader::dtype_at(const json& object, const std::string& ptr) const {
  const std::string name = string_at(object, ptr, "dtype");
  const std::optional<DType> dtype = dtype_from_name(name);
  if (!dtype)
    fail(pointer_key(ptr, "dtype"),
         fmt::format("expected \"float32\", \"float64\", \"float16\" or \"bfloat16\", found \"{}\"", name));
  return *dtype;
}

std::string TraceReader::string_at(const json& object, const std::string& ptr, const char* key) const {
  const std::string at = pointer_key(ptr, key);
  if (!object.contains(key)) fail(at, "missing");
  if (!object.at(key).is_string()) fail(at, "expected a string");
  return object.at(key).get<std::string>();
}

// A step's tensor, its shape that of `as` (else of its name) for the problem being read.
Tensor<double> TraceReader::tensor_at(const json& step, const std::string& ptr, bool float32,
                                      std::optional<Step> as) const {
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

// The product of the extents, or too_many when it does not fit in a size_t.
std::size_t TraceReader::checked_count(const Shape& shape) {
  std::size_t count = 1;
  for (const std::size_t extent : shape)
    if (__builtin_mul_overflow(count, extent, &count)) return too_many;
  return count;
}

// The values `depth` lists down in nested lists (what read_values will read as numbers).
std::size_t TraceReader::count_numbers(const json& j, std::size_t depth) {
  if (depth == 0 || !j.is_array()) return 1;
  std::size_t count = 0;
  for (const json& item : j) count += count_numbers(item, depth - 1);
  return count;
}

void TraceReader::read_values(const json& j, const Shape& shape, std::size_t axis, const std::string& ptr, bool float32,
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

double TraceReader::number(const json& j, const std::string& ptr, bool float32) const {
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

}  // namespace trace_reading

Trace trace_from_json(std::string_view text, const std::string& file) {
  // A trace is written by a program, so its text is parsed once; a broken one is still placed.
  nlohmann::json doc = parse_json(text, file, false);
  Trace trace = trace_reading::TraceReader(file).read(doc);
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
