#include "io/trace_json.hpp"

#include <cmath>
#include <iterator>
#include <tuple>

#include <fmt/compile.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/error.hpp"
#include "io/json_pointer.hpp"
#include "io/load_json.hpp"

namespace attn {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // keeps the keys in the order docs/trace-format.md lists them

namespace {

void append_trace_number(std::string& out, double x, bool float32) {
  if (std::isnan(x)) out += "\"nan\"";
  else if (std::isinf(x)) out += x < 0 ? "\"-inf\"" : "\"inf\"";
  // fmt writes -0.0 as "-0", which JSON readers take for the integer 0: keep the sign with a point.
  else if (x == 0 && std::signbit(x)) out += "-0.0";
  else {
    // fmt's "{}" is the shortest text that reads back to the same value of its type. Compiled
    // format and a local buffer: a trace can hold tens of millions of numbers.
    char text[40];
    char* end = float32 ? fmt::format_to(text, FMT_COMPILE("{}"), static_cast<float>(x))
                        : fmt::format_to(text, FMT_COMPILE("{}"), x);
    out.append(text, end);
  }
}

}  // namespace

std::string format_trace_number(double x, bool float32) {
  std::string out;
  append_trace_number(out, x, float32);
  return out;
}

namespace {

// ---- writing -------------------------------------------------------------------------------

// A mask's flags (B or 1, …) as nested lists of booleans or of 0/1. A row or matrix shared by the
// whole batch (a first axis of extent 1) is written without the batch level, as the input has it.
ojson flags_json(const Tensor<std::uint8_t>& t, bool as_bool) {
  std::size_t at = 0;
  const auto build = [&](auto&& self, std::size_t axis) -> ojson {
    ojson out = ojson::array();
    for (std::size_t i = 0; i < t.dim(axis); ++i) {
      if (axis + 1 < t.rank()) {
        out.push_back(self(self, axis + 1));
        continue;
      }
      const bool on = t.values()[at++] != 0;
      out.push_back(as_bool ? ojson(on) : ojson(on ? 1 : 0));
    }
    return out;
  };
  const ojson all = build(build, 0);
  return t.dim(0) == 1 ? all.at(0) : all;
}

ojson mask_json(const Mask& mask, bool with_offset) {
  ojson j = {{"type", std::string(to_string(mask.kind))}};
  if (mask.kind == MaskKind::causal || mask.kind == MaskKind::sliding_window) {
    if (mask.kind == MaskKind::sliding_window) j["window"] = mask.window;
    j["align"] = std::string(to_string(mask.align));
    if (with_offset) j["offset"] = mask.offset();
  }
  if (mask.kind == MaskKind::padding) j["keep"] = flags_json(mask.keep, false);
  if (mask.kind == MaskKind::custom) j["allow"] = flags_json(mask.allow, true);
  return j;
}

ojson config_json(const Trace& t) {
  const Problem& p = *t.problem;
  return {{"n", p.n},
          {"m", p.m},
          {"batch", p.batched ? ojson(p.B) : ojson(nullptr)},
          {"d_model", p.d_model},
          {"d_context", p.d_context},
          {"d_k", p.d_k},
          {"d_v", p.d_v},
          {"d_out", p.d_out},
          {"n_heads", p.h},
          {"n_kv_heads", p.g},
          {"scale", p.scale},
          {"mask", mask_json(p.mask, true)},
          {"layout", p.layout == Layout::in_out ? "in_out" : "out_in"},
          {"dtype", name_of(t.dtype)},
          {"engine", name_of(t.engine)},
          {"head", t.head ? ojson(*t.head) : ojson(nullptr)}};
}

// JSON text for people and programs alike: objects one key a line, lists of numbers on one line.
class TextWriter {
 public:
  std::string take() && { return std::move(out_); }

  void value(const ojson& j, int indent) {
    if (j.is_object()) {
      if (j.empty()) return append("{}");
      append("{");
      bool first = true;
      for (const auto& [key, item] : j.items()) {
        append(first ? "\n" : ",\n");
        first = false;
        pad(indent + 2);
        append(ojson(key).dump());
        append(": ");
        value(item, indent + 2);
      }
      append("\n");
      pad(indent);
      append("}");
    } else if (j.is_array() && !j.empty() && (j[0].is_array() || j[0].is_object())) {
      append("[");
      for (std::size_t i = 0; i < j.size(); ++i) {
        append(i == 0 ? "\n" : ",\n");
        pad(indent + 2);
        value(j[i], indent + 2);
      }
      append("\n");
      pad(indent);
      append("]");
    } else if (j.is_array()) {
      append("[");
      for (std::size_t i = 0; i < j.size(); ++i) {
        if (i > 0) append(", ");
        append(j[i].dump());
      }
      append("]");
    } else {
      append(j.dump());
    }
  }

  // A tensor's values as nested lists, the innermost on one line.
  void data(const Tensor<double>& t, bool float32, int indent) {
    if (t.rank() == 0 || t.size() == 0) return append(t.rank() == 0 ? "[]" : nested_empty(t.shape(), 0));
    std::size_t at = 0;
    data_axis(t, 0, at, float32, indent);
  }

  void key(std::string_view name, int indent, bool first) {
    append(first ? "\n" : ",\n");
    pad(indent);
    append(ojson(std::string(name)).dump());
    append(": ");
  }

  void append(std::string_view s) { out_.append(s); }
  void pad(int n) { out_.append(static_cast<std::size_t>(n), ' '); }

 private:
  std::string nested_empty(const Shape& shape, std::size_t axis) {
    if (axis == shape.size() || shape[axis] == 0) return "[]";
    std::vector<std::string> items(shape[axis], nested_empty(shape, axis + 1));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }

  void data_axis(const Tensor<double>& t, std::size_t axis, std::size_t& at, bool float32, int indent) {
    const std::size_t count = t.shape()[axis];
    append("[");
    if (axis + 1 == t.rank()) {
      for (std::size_t i = 0; i < count; ++i) {
        if (i > 0) append(", ");
        append_trace_number(out_, t.values()[at++], float32);
      }
      append("]");
      return;
    }
    for (std::size_t i = 0; i < count; ++i) {
      append(i == 0 ? "\n" : ",\n");
      pad(indent + 2);
      data_axis(t, axis + 1, at, float32, indent + 2);
    }
    append("\n");
    pad(indent);
    append("]");
  }

  std::string out_;
};

// A batch-axis tensor (B, rows, cols) as the input format writes it: without the batch axis for a
// 2-D input.
Tensor<double> as_written(const Tensor<double>& t, bool batched) {
  if (batched) return t;
  return Tensor<double>({t.dim(1), t.dim(2)}, std::vector<double>(t.values().begin(), t.values().end()));
}

// An in_out weight in the file's layout.
Tensor<double> stored_weight(const Tensor<double>& w, Layout layout) {
  if (layout == Layout::in_out) return w;
  Tensor<double> t({w.dim(1), w.dim(0)});
  for (std::size_t r = 0; r < w.dim(0); ++r)
    for (std::size_t c = 0; c < w.dim(1); ++c) t(c, r) = w(r, c);
  return t;
}

ojson tokens_json(const std::vector<std::vector<std::string>>& tokens, bool batched) {
  return batched ? ojson(tokens) : ojson(tokens.at(0));
}

// The input as loaded, in the input format (and the file's layout), so that a reader can load it
// again. Its matrices go straight to text: a trace's input can hold millions of numbers.
void write_input(TextWriter& w, const Problem& p, int indent) {
  bool first = true;
  const auto key = [&](std::string_view name) {
    w.key(name, indent + 2, first);
    first = false;
  };
  w.append("{");
  if (!p.description.empty()) {
    key("description");
    w.append(ojson(p.description).dump());
  }
  key("tokens");
  w.value(tokens_json(p.tokens, p.batched), indent + 2);
  key("X");
  w.data(as_written(p.X, p.batched), false, indent + 2);
  if (p.cross) {
    key("context");
    w.append("{");
    w.key("X", indent + 4, true);
    w.data(as_written(p.C, p.batched), false, indent + 4);
    w.key("tokens", indent + 4, false);
    w.value(tokens_json(p.context_tokens, p.batched), indent + 4);
    w.append("\n");
    w.pad(indent + 2);
    w.append("}");
  }
  const std::pair<const char*, const Tensor<double>*> weights[] = {
      {"W_q", &p.W_q}, {"W_k", &p.W_k}, {"W_v", &p.W_v}, {"W_o", &p.W_o}};
  for (const auto& [name, weight] : weights) {
    if (weight->empty()) continue;
    key(name);
    w.data(stored_weight(*weight, p.layout), false, indent + 2);
  }
  const std::pair<const char*, const std::vector<double>*> biases[] = {
      {"b_q", &p.b_q}, {"b_k", &p.b_k}, {"b_v", &p.b_v}, {"b_o", &p.b_o}};
  for (const auto& [name, bias] : biases) {
    if (bias->empty()) continue;
    key(name);
    w.data(Tensor<double>({bias->size()}, *bias), false, indent + 2);
  }
  key("n_heads");
  w.append(fmt::format("{}", p.h));
  key("n_kv_heads");
  w.append(fmt::format("{}", p.g));
  if (p.scale_given) {
    key("scale");
    w.append(format_trace_number(p.scale, false));
  }
  key("mask");
  w.value(mask_json(p.mask, false), indent + 2);
  key("layout");
  w.append(p.layout == Layout::in_out ? "\"in_out\"" : "\"out_in\"");
  w.append("\n");
  w.pad(indent);
  w.append("}");
}

// docs/trace-format.md's `flash` object: block sizes, every tile, lse and output. `finals` (O / l and lse
// of each query tile as it finished) is this program's addition, so that show can print it again.
void write_flash(TextWriter& w, const FlashRecord& f, bool float32) {
  const auto matrix = [&](std::string_view name, const Tensor<double>& t, int indent) {
    w.key(name, indent, false);
    w.data(t, float32, indent);
  };
  w.append("{");
  w.key("block_q", 4, true);
  w.append(fmt::format("{}", f.tile_size.Br));
  w.key("block_k", 4, false);
  w.append(fmt::format("{}", f.tile_size.Bc));
  w.key("tiles", 4, false);
  w.append("[");
  for (std::size_t k = 0; k < f.tiles.size(); ++k) {
    const FlashTile& t = f.tiles[k];
    w.append(k == 0 ? "\n      {" : ",\n      {");
    w.append(fmt::format("\"batch\": {}, \"head\": {}, \"i\": {}, \"j\": {}, \"rows\": [{}, {}], \"cols\": [{}, {}], "
                         "\"skipped\": {}",
                         t.batch, t.head, t.i, t.j, t.row_begin, t.row_end, t.col_begin, t.col_end, t.skipped));
    if (!t.skipped) {
      matrix("S", t.S, 8);
      matrix("m_prev", t.m_prev, 8);
      matrix("m_new", t.m_new, 8);
      matrix("alpha", t.alpha, 8);
      matrix("P", t.P, 8);
      matrix("l_prev", t.l_prev, 8);
      matrix("l_new", t.l_new, 8);
      matrix("O", t.O, 8);
      w.append("\n      ");
    }
    w.append("}");
  }
  w.append(f.tiles.empty() ? "]" : "\n    ]");
  w.key("finals", 4, false);
  w.append("[");
  for (std::size_t k = 0; k < f.finals.size(); ++k) {
    const FlashFinal& d = f.finals[k];
    w.append(k == 0 ? "\n      {" : ",\n      {");
    w.append(fmt::format("\"batch\": {}, \"head\": {}, \"i\": {}, \"rows\": [{}, {}]", d.batch, d.head, d.i,
                         d.row_begin, d.row_end));
    matrix("O", d.O, 8);
    matrix("lse", d.lse, 8);
    w.append("\n      }");
  }
  w.append(f.finals.empty() ? "]" : "\n    ]");
  matrix("lse", f.lse, 4);
  matrix("output", f.output, 4);
  w.append("\n  }");
}

// The `compare` object: the three outputs, their errors, the engines' memory and the verdict.
void write_compare(TextWriter& w, const CompareRecord& c, bool batched) {
  const auto number = [](double x) { return format_trace_number(x, false); };
  const auto stats = [&](std::string_view name, const ErrorStats& s) {
    w.key(name, 4, false);
    w.append(fmt::format("{{\"max_abs\": {}, \"max_rel\": {}, \"max_ulp\": {}}}", number(s.max_abs), number(s.max_rel),
                         s.max_ulp));
  };
  const auto output = [&](std::string_view name, const Tensor<double>& t, bool float32) {
    w.key(name, 6, name == "naive");
    w.data(as_written(t, batched), float32, 6);
  };
  w.append("{");
  w.key("dtype", 4, true);
  w.append(ojson(name_of(c.dtype)).dump());
  w.key("block_q", 4, false);
  w.append(fmt::format("{}", c.tile_size.Br));
  w.key("block_k", 4, false);
  w.append(fmt::format("{}", c.tile_size.Bc));
  w.key("reference", 4, false);
  w.append(ojson(fmt::format("naive attention in {} on the same inputs rounded to {}", reference_name(c.dtype), name_of(c.dtype))).dump());
  stats("naive_vs_reference", c.naive_vs_ref);
  stats("flash_vs_reference", c.flash_vs_ref);
  stats("flash_vs_naive", c.flash_vs_naive);
  w.key("memory", 4, false);
  w.append(fmt::format("{{\"naive_peak_bytes\": {}, \"flash_peak_bytes\": {}}}", c.naive_peak_bytes, c.flash_peak_bytes));
  w.key("tolerance", 4, false);
  w.append(fmt::format("{{\"rule\": \"max|flash - ref| <= 2 * max|naive - ref| + noise\", \"flash_error\": {}, "
                       "\"naive_error\": {}, \"noise\": {}, \"bound\": {}, \"pass\": {}}}",
                       number(c.flash_vs_ref.max_abs), number(c.naive_vs_ref.max_abs), number(c.noise), number(c.bound),
                       c.pass));
  w.key("outputs", 4, false);
  w.append("{");
  const bool float32 = c.dtype == DType::float32;
  output("naive", c.naive, float32);
  output("flash", c.flash, float32);
  output("reference", c.reference, false);
  w.append("\n    }");
  w.append("\n  }");
}

// ---- reading -------------------------------------------------------------------------------

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
                                   "upgrade attn-trace to show it", version, trace_format_version));
    if (version < 1) fail("/version", fmt::format("expected a version from 1 to {}, found {}", trace_format_version, version));
    for (const char* key : {"input", "config", "steps"})
      if (!doc.contains(key)) fail(pointer_key("", key), "missing: a trace has input, config and steps");

    Trace t;
    t.problem = std::make_shared<const Problem>(problem_from_json(doc.at("input"), file_, "/input"));
    problem_ = t.problem.get();
    const json& config = doc.at("config");
    t.dtype = dtype_at(config, "/config");
    if (config.contains("engine")) {
      const std::string engine = string_at(config, "/config", "engine");
      const std::optional<Engine> known = engine_from_name(engine);
      if (!known) fail("/config/engine", fmt::format("expected \"naive\", \"flash\" or \"both\", found \"{}\"", engine));
      t.engine = *known;
    }
    if (config.contains("head") && !config.at("head").is_null()) {
      if (!config.at("head").is_number_unsigned() || config.at("head").get<std::size_t>() >= t.problem->h)
        fail("/config/head", fmt::format("expected a head from 0 to {}, found {}", t.problem->h - 1, config.at("head").dump()));
      t.head = config.at("head").get<std::size_t>();
      one_head_ = true;
    }

    const json& steps = doc.at("steps");
    if (!steps.is_array()) fail("/steps", "expected a list of steps");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string ptr = pointer_index("/steps", i);
      const json& s = steps[i];
      if (!s.is_object()) fail(ptr, "expected a step object");
      const std::optional<Step> step = step_from_name(string_at(s, ptr, "name"));
      if (!step) continue;  // a step this version does not know: newer writers may add steps
      const bool float32 = string_at(s, ptr, "dtype") == "float32";
      t.steps.push_back({*step, string_at(s, ptr, "formula"), string_at(s, ptr, "description"),
                         tensor_at(s, ptr, float32)});
    }
    if (doc.contains("flash")) t.flash = flash(doc.at("flash"), t.dtype == DType::float32);
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

  FlashRecord flash(const json& f, bool float32) const {
    const std::string ptr = "/flash";
    if (!f.is_object()) fail(ptr, "expected an object");
    const Problem& p = *problem_;
    FlashRecord out;
    out.tile_size = {whole(f, ptr, "block_q"), whole(f, ptr, "block_k")};
    const std::string tiles_ptr = pointer_key(ptr, "tiles");
    if (!f.contains("tiles") || !f.at("tiles").is_array()) fail(tiles_ptr, "expected a list of tiles");
    for (std::size_t k = 0; k < f.at("tiles").size(); ++k) {
      const json& t = f.at("tiles")[k];
      const std::string at = pointer_index(tiles_ptr, k);
      if (!t.is_object()) fail(at, "expected a tile object");
      FlashTile tile{whole(t, at, "batch"), whole(t, at, "head"), whole(t, at, "i"), whole(t, at, "j"), 0, 0, 0, 0, false,
                     {}, {}, {}, {}, {}, {}, {}, {}};
      std::tie(tile.row_begin, tile.row_end) = range(t, at, "rows");
      std::tie(tile.col_begin, tile.col_end) = range(t, at, "cols");
      if (tile.batch >= p.B || tile.head >= p.h || tile.row_begin >= tile.row_end || tile.row_end > p.n ||
          tile.col_begin >= tile.col_end || tile.col_end > p.m)
        fail(at, "the tile lies outside the input's batch, heads, queries or keys");
      if (!t.contains("skipped") || !t.at("skipped").is_boolean()) fail(pointer_key(at, "skipped"), "expected true or false");
      tile.skipped = t.at("skipped").get<bool>();
      if (!tile.skipped) {
        const std::size_t r = tile.row_end - tile.row_begin, c = tile.col_end - tile.col_begin;
        tile.S = values(t, at, "S", {r, c}, float32);
        tile.m_prev = values(t, at, "m_prev", {r}, float32);
        tile.m_new = values(t, at, "m_new", {r}, float32);
        tile.alpha = values(t, at, "alpha", {r}, float32);
        tile.P = values(t, at, "P", {r, c}, float32);
        tile.l_prev = values(t, at, "l_prev", {r}, float32);
        tile.l_new = values(t, at, "l_new", {r}, float32);
        tile.O = values(t, at, "O", {r, p.d_v}, float32);
      }
      out.tiles.push_back(std::move(tile));
    }
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
    if (out.lse.shape() != lse_shape)
      fail(pointer_key(ptr, "lse"), fmt::format("expected the shape [{}] for this input, found [{}]",
                                                fmt::join(lse_shape, ", "), fmt::join(out.lse.shape(), ", ")));
    if (out.output.shape() != traced_shape(Step::output, p, one_head_))
      fail(pointer_key(ptr, "output"), fmt::format("expected the shape [{}] for this input, found [{}]",
                                                   fmt::join(traced_shape(Step::output, p, one_head_), ", "),
                                                   fmt::join(out.output.shape(), ", ")));
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
    const bool float32 = out.dtype == DType::float32;
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
    if (!dtype) fail(pointer_key(ptr, "dtype"), fmt::format("expected \"float32\" or \"float64\", found \"{}\"", name));
    return *dtype;
  }

  std::string string_at(const json& object, const std::string& ptr, const char* key) const {
    const std::string at = pointer_key(ptr, key);
    if (!object.contains(key)) fail(at, "missing");
    if (!object.at(key).is_string()) fail(at, "expected a string");
    return object.at(key).get<std::string>();
  }

  Tensor<double> tensor_at(const json& step, const std::string& ptr, bool float32) const {
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
      fail(shape_ptr, fmt::format("the step \"{}\" claims the shape [{}] ({} numbers), but its data holds {} numbers",
                                  string_at(step, ptr, "name"), fmt::join(shape, ", "),
                                  claimed == too_many ? "more than 2^64" : std::to_string(claimed), held));
    // The printer labels rows and columns by the input's tokens: a step must have its true shape.
    const Shape expected = traced_shape(*step_from_name(string_at(step, ptr, "name")), *problem_, one_head_);
    if (shape != expected)
      fail(shape_ptr, fmt::format("the step \"{}\" has the shape [{}] for this input, found [{}]",
                                  string_at(step, ptr, "name"), fmt::join(expected, ", "), fmt::join(shape, ", ")));
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
      fail(ptr, fmt::format("expected a list of {} (the step's shape), found {}", shape[axis], j.is_array() ? fmt::format("{} items", j.size()) : j.dump()));
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (axis + 1 < shape.size()) {
        read_values(j[i], shape, axis + 1, pointer_index(ptr, i), float32, out);
        continue;
      }
      out.push_back(number(j[i], pointer_index(ptr, i), float32));
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

std::string trace_to_json(const Trace& t, const std::string& generator) {
  const Problem& p = *t.problem;
  const bool float32 = t.dtype == DType::float32;
  TextWriter w;
  w.append("{");
  w.key("format", 2, true);
  w.append("\"attn-trace.trace\"");
  w.key("version", 2, false);
  w.append(fmt::format("{}", trace_format_version));
  w.key("generator", 2, false);
  w.append(json(generator).dump());
  w.key("input", 2, false);
  write_input(w, p, 2);
  w.key("config", 2, false);
  w.value(config_json(t), 2);
  w.key("steps", 2, false);
  w.append("[");
  for (std::size_t i = 0; i < t.steps.size(); ++i) {
    const StepRecord& s = t.steps[i];
    w.append(i == 0 ? "\n    {" : ",\n    {");
    w.key("name", 6, true);
    w.append(json(std::string(step_info(s.step).name)).dump());
    w.key("formula", 6, false);
    w.append(json(s.formula).dump());
    w.key("description", 6, false);
    w.append(json(s.description).dump());
    w.key("shape", 6, false);
    w.value(ojson(s.value.shape()), 6);
    w.key("dims", 6, false);
    w.value(ojson(dim_names(s.step, p.batched)), 6);
    w.key("dtype", 6, false);
    w.append(json(name_of(t.dtype)).dump());
    w.key("data", 6, false);
    w.data(s.value, float32, 6);
    w.append("\n    }");
  }
  w.append(t.steps.empty() ? "]" : "\n  ]");
  if (t.flash) {
    w.key("flash", 2, false);
    write_flash(w, *t.flash, float32);
  }
  if (t.compare) {
    w.key("compare", 2, false);
    write_compare(w, *t.compare, p.batched);
  }
  w.key("empty_rows", 2, false);
  ojson rows = ojson::array();
  for (const EmptyRow& r : t.empty_rows) rows.push_back({{"batch", r.batch}, {"query", r.query}});
  w.value(rows, 2);
  w.key("warnings", 2, false);
  w.value(ojson(t.warnings), 2);
  w.append("\n}\n");
  return std::move(w).take();
}

Trace trace_from_json(std::string_view text, const std::string& file) {
  // A trace is written by a program, so its text is parsed once; a broken one is still placed.
  return TraceReader(file).read(parse_json(text, file, false));
}

}  // namespace attn
