// `attn-trace import`: a model's attention tensors, found by name, checked against the shapes their
// style stores, and written as an input with one matrix row per line.

#include "formats/import_layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "formats/dump_bytes.hpp"
#include "io/new_input.hpp"
#include "json/error.hpp"
#include "json/parse.hpp"
#include "json/pointer.hpp"
#include "json/quoted.hpp"
#include "json/reader.hpp"
#include "ops/random.hpp"
#include "text/nearest.hpp"
#include "text/number.hpp"
#include "text/words.hpp"

namespace attn {

using dump_detail::shape_text;

namespace {

// A matrix as the file stores it, rows × cols, row-major.
struct Matrix {
  std::string name;  // the tensor's full name, for messages
  std::size_t rows = 0, cols = 0;
  std::vector<double> values;  // (rows, cols)
};

struct Vector {
  std::string name;
  std::vector<double> values;  // empty: the model has none
};

// The four projections as the style stores them, before the heads are known.
struct Layer {
  bool out_in = false;  // nn.Linear's out × in; else in × out
  Matrix W_q, W_k, W_v, W_o;
  Vector b_q, b_k, b_v, b_o;

  // A projection's widths, whichever way it is stored.
  std::size_t in(const Matrix& w) const { return out_in ? w.cols : w.rows; }
  std::size_t out(const Matrix& w) const { return out_in ? w.rows : w.cols; }
};

// The layer's tensors by their full names, each found or refused with the nearest name the file has.
class Tensors {
 public:
  Tensors(const std::vector<NamedDump>& all, const ImportRequest& r) : all_(all), r_(r) {}

  std::string full(std::string_view suffix) const { return r_.prefix + std::string(suffix); }
  const std::string& file() const { return r_.weights_name; }

  const DumpTensor* find(std::string_view suffix) const {
    const std::string name = full(suffix);
    const auto it = std::find_if(all_.begin(), all_.end(), [&](const NamedDump& d) { return d.name == name; });
    return it == all_.end() ? nullptr : &it->tensor;
  }

  [[noreturn]] void missing(std::string_view suffix) const {
    const std::string name = full(suffix);
    // A name that ends as wanted means the prefix is off: the nearest of those; else the nearest of all.
    const NamedDump* best = nullptr;
    bool best_ends = false;
    std::size_t best_distance = std::numeric_limits<std::size_t>::max();
    for (const NamedDump& d : all_) {
      const bool ends = d.name.ends_with(suffix);
      const std::size_t distance = edit_distance(name, d.name);
      if ((ends && !best_ends) || (ends == best_ends && distance < best_distance)) {
        best = &d;
        best_ends = ends;
        best_distance = distance;
      }
    }
    std::string hint;
    if (best != nullptr && best_ends)
      hint = fmt::format(" (the nearest is {}: --prefix \"{}\"?)", best->name,
                         best->name.substr(0, best->name.size() - suffix.size()));
    else if (best != nullptr) hint = fmt::format(" (the nearest is {})", best->name);
    throw InputError(r_.weights_name, "",
                     fmt::format("no tensor {} for --style {}{}", name, import_style_name(r_.style), hint));
  }

  const DumpTensor& need(std::string_view suffix) const {
    const DumpTensor* t = find(suffix);
    if (t == nullptr) missing(suffix);
    return *t;
  }

  [[noreturn]] void wrong_shape(std::string_view suffix, const Shape& shape, const std::string& expected) const {
    throw InputError(r_.weights_name, "",
                     fmt::format("{} has shape {}, but --style {} stores it as {}", full(suffix), shape_text(shape),
                                 import_style_name(r_.style), expected));
  }

  // A matrix, rank 2, with `expected` (as "(out, in)") for the message when it is not.
  Matrix matrix(std::string_view suffix, const std::string& expected) const {
    const DumpTensor& t = need(suffix);
    if (t.shape.size() != 2 || t.shape[0] == 0 || t.shape[1] == 0) wrong_shape(suffix, t.shape, expected);
    finite(suffix, t);
    return {full(suffix), t.shape[0], t.shape[1], t.values};
  }

  // A bias of `length`, or an empty one when the model has none.
  Vector bias(std::string_view suffix, std::size_t length, const std::string& expected) const {
    const DumpTensor* t = find(suffix);
    if (t == nullptr) return {full(suffix), {}};
    if (t->shape != Shape{length}) wrong_shape(suffix, t->shape, expected);
    finite(suffix, *t);
    return {full(suffix), t->values};
  }

  void finite(std::string_view suffix, const DumpTensor& t) const {
    for (std::size_t i = 0; i < t.values.size(); ++i)
      if (!std::isfinite(t.values[i]))
        throw InputError(r_.weights_name, "",
                         fmt::format("{} holds {} at [{}]: an input takes finite numbers only", full(suffix),
                                     t.values[i], fmt::join(unravel_index(i, t.shape), ", ")));
  }

 private:
  const std::vector<NamedDump>& all_;
  const ImportRequest& r_;
};

// Rows [begin, end) of a matrix (torch-mha's in_proj_weight, q k v stacked).
Matrix rows_of(const Matrix& m, std::size_t begin, std::size_t end, std::string name) {
  return {std::move(name), end - begin, m.cols,
          std::vector<double>(m.values.begin() + static_cast<std::ptrdiff_t>(begin * m.cols),
                              m.values.begin() + static_cast<std::ptrdiff_t>(end * m.cols))};
}

// Columns [begin, end) of a matrix (GPT-2's c_attn, q k v side by side).
Matrix cols_of(const Matrix& m, std::size_t begin, std::size_t end, std::string name) {
  Matrix out{std::move(name), m.rows, end - begin, {}};
  out.values.reserve(out.rows * out.cols);
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = begin; c < end; ++c) out.values.push_back(m.values[r * m.cols + c]);
  return out;
}

Vector slice(const Vector& v, std::size_t begin, std::size_t end, std::string name) {
  if (v.values.empty()) return {std::move(name), {}};
  return {std::move(name), std::vector<double>(v.values.begin() + static_cast<std::ptrdiff_t>(begin),
                                               v.values.begin() + static_cast<std::ptrdiff_t>(end))};
}

// GPT-2's Conv1D: c_attn (d, 3d) in × out, its columns q | k | v; c_proj (d, d) in × out.
Layer gpt2_layer(const Tensors& t) {
  Layer l;
  const Matrix qkv = t.matrix("c_attn.weight", "(d_model, 3·d_model), in × out");
  const std::size_t d = qkv.rows;
  if (qkv.cols != 3 * d)
    t.wrong_shape("c_attn.weight", {qkv.rows, qkv.cols}, fmt::format("(d_model, 3·d_model) = ({}, {})", d, 3 * d));
  const Vector b = t.bias("c_attn.bias", 3 * d, fmt::format("(3·d_model,) = ({},)", 3 * d));
  const std::string of = t.full("c_attn.weight");
  l.W_q = cols_of(qkv, 0, d, of + " (columns 0 to d)");
  l.W_k = cols_of(qkv, d, 2 * d, of + " (columns d to 2d)");
  l.W_v = cols_of(qkv, 2 * d, 3 * d, of + " (columns 2d to 3d)");
  l.b_q = slice(b, 0, d, b.name);
  l.b_k = slice(b, d, 2 * d, b.name);
  l.b_v = slice(b, 2 * d, 3 * d, b.name);
  l.W_o = t.matrix("c_proj.weight", fmt::format("(d_model, d_model) = ({}, {}), in × out", d, d));
  l.b_o = t.bias("c_proj.bias", l.W_o.cols, fmt::format("({},)", l.W_o.cols));
  return l;
}

// nn.Linear out × in, one tensor each: `names` holds q, k, v, o's module names.
Layer linear_layer(const Tensors& t, const std::array<std::string_view, 4>& names) {
  Layer l;
  l.out_in = true;
  const auto weight = [&](std::string_view module) {
    return t.matrix(fmt::format("{}.weight", module), "(out, in), as nn.Linear stores it");
  };
  const auto bias = [&](std::string_view module, const Matrix& w) {
    return t.bias(fmt::format("{}.bias", module), w.rows, fmt::format("({},), one per row of {}", w.rows, w.name));
  };
  l.W_q = weight(names[0]), l.W_k = weight(names[1]), l.W_v = weight(names[2]), l.W_o = weight(names[3]);
  l.b_q = bias(names[0], l.W_q), l.b_k = bias(names[1], l.W_k), l.b_v = bias(names[2], l.W_v);
  l.b_o = bias(names[3], l.W_o);
  return l;
}

// nn.MultiheadAttention's state_dict: in_proj_weight (3d, d) out × in, its rows q | k | v (or
// q_proj_weight, k_proj_weight, v_proj_weight when kdim or vdim differ); out_proj, an nn.Linear.
Layer torch_mha_layer(const Tensors& t) {
  for (const std::string_view extra : {"bias_k", "bias_v"})
    if (t.find(extra) != nullptr)
      throw InputError(t.file(), "",
                       t.full(extra) +
                           ": nn.MultiheadAttention(add_bias_kv=True) appends a learned key and value to the sequence, "
                           "which an input cannot hold");
  Layer l;
  l.out_in = true;
  const std::string expected = "(3·d_model, d_model), out × in";
  if (t.find("in_proj_weight") == nullptr && t.find("q_proj_weight") != nullptr) {
    l.W_q = t.matrix("q_proj_weight", "(d_model, d_model), out × in");
    l.W_k = t.matrix("k_proj_weight", "(d_model, kdim), out × in");
    l.W_v = t.matrix("v_proj_weight", "(d_model, vdim), out × in");
  } else {
    const Matrix qkv = t.matrix("in_proj_weight", expected);
    const std::size_t d = qkv.cols;
    if (qkv.rows != 3 * d)
      t.wrong_shape("in_proj_weight", {qkv.rows, qkv.cols}, fmt::format("(3·d_model, d_model) = ({}, {})", 3 * d, d));
    l.W_q = rows_of(qkv, 0, d, qkv.name + " (rows 0 to d)");
    l.W_k = rows_of(qkv, d, 2 * d, qkv.name + " (rows d to 2d)");
    l.W_v = rows_of(qkv, 2 * d, 3 * d, qkv.name + " (rows 2d to 3d)");
  }
  const std::size_t q = l.W_q.rows, k = l.W_k.rows, v = l.W_v.rows;
  const Vector b = t.bias("in_proj_bias", q + k + v, fmt::format("(3·d_model,) = ({},)", q + k + v));
  l.b_q = slice(b, 0, q, b.name);
  l.b_k = slice(b, q, q + k, b.name);
  l.b_v = slice(b, q + k, q + k + v, b.name);
  l.W_o = t.matrix("out_proj.weight", "(d_model, d_model), out × in");
  l.b_o = t.bias("out_proj.bias", l.W_o.rows, fmt::format("({},)", l.W_o.rows));
  return l;
}

Layer read_layer(const Tensors& t, ImportStyle style) {
  switch (style) {
    case ImportStyle::gpt2: return gpt2_layer(t);
    case ImportStyle::llama: return linear_layer(t, {"q_proj", "k_proj", "v_proj", "o_proj"});
    case ImportStyle::bert: return linear_layer(t, {"self.query", "self.key", "self.value", "output.dense"});
    case ImportStyle::torch_mha: return torch_mha_layer(t);
    case ImportStyle::gemma2: return linear_layer(t, {"q_proj", "k_proj", "v_proj", "o_proj"});
  }
  return {};
}

// The heads, resolved from the options, the config and the shapes, every one checked against them.
struct Heads {
  std::size_t h = 1, g = 1, d_k = 0, d_v = 0;
};

[[noreturn]] void refuse(const ImportRequest& r, const std::string& message) {
  throw InputError(r.weights_name, "", message);
}

Heads resolve_heads(const Layer& l, const ModelConfig& config, const ImportRequest& r) {
  const auto fail = [&](const std::string& message) { refuse(r, message); };
  const bool config_counts = r.style != ImportStyle::torch_mha;  // PyTorch keeps no config
  std::string h_from = "--heads", g_from = "--kv-heads";
  std::optional<std::size_t> h = r.heads, g_asked = r.kv_heads;
  if (!h && config_counts && config.heads) {
    h = config.heads;
    h_from = fmt::format("{}'s head count", config.file);
  }
  if (!g_asked && config_counts && config.kv_heads) {
    g_asked = config.kv_heads;
    g_from = fmt::format("{}'s num_key_value_heads", config.file);
  }
  if (!h) {
    if (!config_counts) refuse(r, "nn.MultiheadAttention's state_dict keeps no head count: give --heads H");
    refuse(r, fmt::format("how many heads? give --heads H ({})",
                          config.file.empty() ? "there is no config.json beside WEIGHTS"
                                              : fmt::format("{} has no n_head or num_attention_heads", config.file)));
  }
  Heads out;
  out.h = *h;
  const std::size_t q = l.out(l.W_q), k = l.out(l.W_k), v = l.out(l.W_v);
  if (q % out.h != 0)
    fail(fmt::format("{} {} does not divide the queries' width {} ({})", h_from, out.h, q, l.W_q.name));
  out.d_k = q / out.h;
  if (k % out.d_k != 0)
    fail(
        fmt::format("the keys' width {} ({}) is not a whole number of heads of d_k {} (the queries' width {} / {} "
                    "heads)",
                    k, l.W_k.name, out.d_k, q, out.h));
  out.g = k / out.d_k;
  if (g_asked && *g_asked != out.g)
    fail(fmt::format("{} {} does not fit {}: it holds {} key heads of d_k {}", g_from, *g_asked, l.W_k.name, out.g,
                     out.d_k));
  if (out.h % out.g != 0)
    fail(fmt::format("{} query heads cannot share {} key/value heads evenly ({})", out.h, out.g, l.W_k.name));
  if (v % out.g != 0)
    fail(fmt::format("the values' width {} ({}) does not split into {} key/value heads", v, l.W_v.name, out.g));
  out.d_v = v / out.g;
  if (l.in(l.W_o) != out.h * out.d_v)
    fail(fmt::format("{} has shape ({}, {}), but its {} must be heads · d_v = {} · {} = {}", l.W_o.name, l.W_o.rows,
                     l.W_o.cols, l.out_in ? "columns" : "rows", out.h, out.d_v, out.h * out.d_v));
  if (config.head_dim && r.style != ImportStyle::torch_mha && *config.head_dim != out.d_k)
    fail(fmt::format("{}'s head_dim {} does not fit the shapes: the queries' width {} / {} heads is {}", config.file,
                     *config.head_dim, q, out.h, out.d_k));
  if ((r.style == ImportStyle::llama || r.style == ImportStyle::gemma2) && out.d_k % 2 != 0)
    fail(fmt::format("RoPE turns pairs of columns, so d_k must be even; the queries' width {} / {} heads is {}", q,
                     out.h, out.d_k));
  return out;
}

// The widths of the key and value projections' inputs are the queries': one X feeds them all.
void check_inputs(const Layer& l, const ImportRequest& r) {
  const std::size_t d = l.in(l.W_q);
  for (const Matrix* w : {&l.W_k, &l.W_v})
    if (l.in(*w) != d)
      throw InputError(r.weights_name, "",
                       fmt::format("{} has shape ({}, {}): its {} must be d_model = {}, as {}'s", w->name, w->rows,
                                   w->cols, l.out_in ? "columns" : "rows", d, l.W_q.name));
}

std::vector<std::string> texts_of(const std::vector<double>& values) {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (const double v : values)
    out.push_back(exact_value(v, false));  // float32 and the half types widened: bit for bit
  return out;
}

// X as the input holds it: (n, d) rows, or a batch of them.
struct Tokens {
  std::size_t B = 1, n = 0, d = 0;
  bool batched = false;
  std::vector<std::string> texts;  // (B, n, d)
};

// Hundredths as a decimal with two places: -35 -> "-0.35".
std::string hundredths(long long h) {
  return fmt::format("{}{}.{:02}", h < 0 ? "-" : "", std::llabs(h) / 100, std::llabs(h) % 100);
}

Tokens tokens_of(const DumpTensor* x, std::size_t d_model, const ImportRequest& r) {
  Tokens t;
  t.d = d_model;
  if (x == nullptr) {
    // Standard normal, to two places: the same text on every machine, whatever its libm's last bit.
    // Each number's text with its string (32 bytes), twice over: the matrix's text and the whole text.
    constexpr long double bytes_per_value = 2 * (32 + 8);
    if (static_cast<long double>(r.n) * d_model * bytes_per_value > static_cast<long double>(r.max_memory.bytes))
      throw InputError(r.weights_name, "",
                       fmt::format("--n {} tokens of d_model {} would take more than --max-memory {}", r.n, d_model,
                                   r.max_memory.text));
    t.n = r.n;
    NormalSampler normal(r.seed);
    for (std::size_t i = 0; i < r.n * d_model; ++i) t.texts.push_back(hundredths(std::llround(normal.next() * 100.0)));
    return t;
  }
  const Shape& s = x->shape;
  if ((s.size() != 2 && s.size() != 3) || s.back() != d_model || element_count(s) == 0)
    throw InputError(r.x_name, "",
                     fmt::format("X has shape {}, but the layer takes (n, d_model) or (batch, n, d_model) with "
                                 "d_model = {}",
                                 shape_text(s), d_model));
  for (std::size_t i = 0; i < x->values.size(); ++i)
    if (!std::isfinite(x->values[i]))
      throw InputError(r.x_name, "",
                       fmt::format("X holds {} at [{}]: an input takes finite numbers only", x->values[i],
                                   fmt::join(unravel_index(i, s), ", ")));
  t.batched = s.size() == 3;
  t.B = t.batched ? s[0] : 1;
  t.n = s[s.size() - 2];
  t.texts = texts_of(x->values);
  return t;
}

std::string x_text(const Tokens& t) {
  if (!t.batched) return matrix_text("  \"X\":   ", t.n, t.d, t.texts);
  std::string out = "  \"X\": [\n";
  for (std::size_t b = 0; b < t.B; ++b) {
    const auto begin = t.texts.begin() + static_cast<std::ptrdiff_t>(b * t.n * t.d);
    const std::vector<std::string> item(begin, begin + static_cast<std::ptrdiff_t>(t.n * t.d));
    out += matrix_text("    ", t.n, t.d, item);
    out += b + 1 < t.B ? ",\n" : "\n";
  }
  return out + "  ]";
}

MaskKind default_mask(ImportStyle style) {
  const bool decoder = style == ImportStyle::gpt2 || style == ImportStyle::llama || style == ImportStyle::gemma2;
  return decoder ? MaskKind::causal : MaskKind::none;
}

std::string mask_text(MaskKind kind, std::size_t window) {
  if (kind == MaskKind::sliding_window) return fmt::format(R"({{"type": "sliding_window", "window": {}}})", window);
  return attn::quoted(std::string(to_string(kind)));
}

// Where the input came from, in one sentence.
std::string description(const ImportRequest& r, const Layer& l, const Heads& heads, const Tokens& x, MaskKind mask,
                        std::size_t window, std::string_view dtype, const std::optional<std::string>& rope) {
  std::vector<std::string> parts;
  parts.push_back(fmt::format("{} of d_k {}", plural(heads.h, "head", "heads"), heads.d_k));
  if (heads.g != heads.h)
    parts.push_back(fmt::format("sharing {}", plural(heads.g, "key/value head", "key/value heads")));
  if (mask == MaskKind::sliding_window) parts.push_back(fmt::format("sliding_window mask of {}", window));
  else parts.emplace_back(mask == MaskKind::causal ? "causal mask" : "no mask");
  if (rope) parts.push_back(*rope);
  parts.emplace_back(l.out_in ? "weights out × in as stored" : "weights in × out as stored");
  if (r.x_name.empty())
    parts.push_back(fmt::format("X: {} of standard normal numbers, seed {}", plural(x.n, "token", "tokens"), r.seed));
  else parts.push_back(fmt::format("X from {}", r.x_name));
  const std::string layer = r.prefix.empty() ? std::string() : fmt::format(" {}", r.prefix);
  return fmt::format("imported by attn-trace import: the {} attention layer{} of {} ({}), {}",
                     import_style_name(r.style), layer, r.weights_name, dtype, fmt::join(parts, ", "));
}

// Gemma 2 scales the scores by query_pre_attn_scalar^-1/2, which need not be 1/√d_k, and caps them at
// attn_logit_softcapping before the mask (arXiv:2408.00118); its local layers' sliding window depends on
// the layer, which the file does not say, so it is left to --mask.
struct GemmaSettings {
  std::optional<double> scale, softcap;
  std::optional<std::string> words;  // for the description
};

GemmaSettings gemma_settings(const ModelConfig& config, const Heads& heads, ImportedLayer& out) {
  GemmaSettings g;
  std::vector<std::string> words;
  const std::string from = config.file.empty() ? std::string("no config.json") : config.file;
  if (config.query_pre_attn_scalar) {
    g.scale = 1 / std::sqrt(*config.query_pre_attn_scalar);
    words.push_back(
        fmt::format("scale {}^-1/2 (query_pre_attn_scalar)", exact_value(*config.query_pre_attn_scalar, false)));
  } else {
    out.warnings.push_back(
        fmt::format("{} has no query_pre_attn_scalar: the scale is 1/√d_k = 1/√{}", from, heads.d_k));
  }
  if (config.attn_logit_softcapping) {
    g.softcap = *config.attn_logit_softcapping;
    words.push_back(fmt::format("logits capped at {} (attn_logit_softcapping)", exact_value(*g.softcap, false)));
  } else {
    out.warnings.push_back(fmt::format("{} has no attn_logit_softcapping: the scores are not capped", from));
  }
  if (config.sliding_window)
    out.warnings.push_back(fmt::format(
        "{} sets sliding_window {}, which Gemma 2 applies to every other layer only: import such a layer with "
        "--mask sliding_window:{}",
        from, *config.sliding_window, *config.sliding_window));
  if (!words.empty()) g.words = fmt::format("{}", fmt::join(words, ", "));
  return g;
}

}  // namespace

std::optional<ImportStyle> import_style_by_name(std::string_view name) {
  for (std::size_t i = 0; i < import_style_names.size(); ++i)
    if (import_style_names[i] == name) return static_cast<ImportStyle>(i);
  return std::nullopt;
}

std::string_view import_style_name(ImportStyle style) { return import_style_names[static_cast<std::size_t>(style)]; }

ModelConfig read_model_config(const std::string& weights, const MemoryLimit& limit) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path folder = fs::is_directory(weights, error) ? fs::path(weights) : fs::path(weights).parent_path();
  const fs::path path = folder / "config.json";
  ModelConfig config;
  if (!fs::exists(path, error)) return config;
  config.file = display_name(path.string());
  const nlohmann::json j = parse_json(read_text(path.string(), limit), config.file);
  const JsonReader reader(config.file, "");
  if (!j.is_object()) reader.fail("", fmt::format("expected an object, found {}", type_name(j)));
  constexpr std::size_t most = 1'000'000;
  for (const char* key : {"n_head", "num_attention_heads"})
    if (!config.heads && j.contains(key) && !j[key].is_null())
      config.heads = reader.integer(j[key], pointer_key("", key), 1, most);
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null())
    config.kv_heads = reader.integer(j["num_key_value_heads"], "/num_key_value_heads", 1, most);
  if (j.contains("rope_theta") && !j["rope_theta"].is_null()) {
    const double theta = reader.number(j["rope_theta"], "/rope_theta");
    if (theta <= 0) reader.fail("/rope_theta", fmt::format("expected a number above 0, found {}", theta));
    config.rope_theta = theta;
  }
  const auto positive = [&](const char* key) -> std::optional<double> {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    const double x = reader.number(j[key], pointer_key("", key));
    if (!(x > 0)) reader.fail(pointer_key("", key), fmt::format("expected a number above 0, found {}", x));
    return x;
  };
  config.query_pre_attn_scalar = positive("query_pre_attn_scalar");
  config.attn_logit_softcapping = positive("attn_logit_softcapping");
  if (j.contains("head_dim") && !j["head_dim"].is_null())
    config.head_dim = reader.integer(j["head_dim"], "/head_dim", 1, most);
  if (j.contains("sliding_window") && !j["sliding_window"].is_null())
    config.sliding_window = reader.integer(j["sliding_window"], "/sliding_window", 1, most);
  // the whole model, which one layer's input keeps for a decode's cache (`model`)
  const auto first_whole = [&](std::initializer_list<const char*> keys) -> std::optional<std::size_t> {
    for (const char* key : keys)
      if (j.contains(key) && !j[key].is_null()) return reader.integer(j[key], pointer_key("", key), 1, most);
    return std::nullopt;
  };
  config.layers = first_whole({"n_layer", "num_hidden_layers"});
  config.context_length = first_whole({"n_positions", "n_ctx", "max_position_embeddings"});
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const nlohmann::json& s = j["rope_scaling"];
    const char* key = s.contains("rope_type") ? "rope_type" : "type";
    config.rope_scaling = s.is_object() && s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : "set";
  }
  return config;
}

ImportedLayer import_layer(const std::vector<NamedDump>& weights, const ModelConfig& config, const DumpTensor* x,
                           const ImportRequest& r) {
  // pass 1: the style's tensors, found by name and checked against its shapes
  const Tensors tensors(weights, r);
  const Layer l = read_layer(tensors, r.style);
  check_inputs(l, r);
  const Heads heads = resolve_heads(l, config, r);

  // pass 2: X, given or drawn, as wide as the layer's input, and its labels
  const Tokens x_rows = tokens_of(x, l.in(l.W_q), r);
  if (!r.tokens.empty() && r.tokens.size() != x_rows.n)
    throw InputError(r.x_name.empty() ? r.weights_name : r.x_name, "",
                     fmt::format("--tokens gives {}, but X has {}", plural(r.tokens.size(), "label", "labels"),
                                 plural(x_rows.n, "token", "tokens")));
  std::vector<std::string> labels = r.tokens;
  for (std::size_t i = labels.size(); i < x_rows.n; ++i) labels.push_back(fmt::format("t{}", i));

  // pass 3: what the input cannot say about the model, and the position encoding
  ImportedLayer out;
  const MaskKind mask = r.mask.value_or(default_mask(r.style));
  std::optional<std::string> rope_json, rope_words;
  if (r.style == ImportStyle::llama || r.style == ImportStyle::gemma2) {
    const double theta = r.rope_theta ? *r.rope_theta : config.rope_theta.value_or(10000.0);
    const std::string from = r.rope_theta ? "--rope-theta" : config.rope_theta ? config.file : "the default";
    rope_json = fmt::format(R"({{"theta": {}, "style": "half"}})", exact_value(theta, false));
    rope_words = fmt::format("RoPE (rotate-half) with theta {} from {}", exact_value(theta, false), from);
    if (config.rope_scaling)
      out.warnings.push_back(
          fmt::format("{} sets rope_scaling ({}), which the input leaves out: its angles are "
                      "plain RoPE's with theta {}",
                      config.file, *config.rope_scaling, exact_value(theta, false)));
  }

  // Gemma 2's own settings: its scale and its logit cap from config.json, each said where it came from
  const GemmaSettings gemma = r.style == ImportStyle::gemma2 ? gemma_settings(config, heads, out) : GemmaSettings{};
  if (gemma.words) rope_words = rope_words ? *rope_words + ", " + *gemma.words : *gemma.words;

  // pass 4: the text, the model's numbers as it stores them
  const std::string dtype(
      dump_dtype_name(tensors
                          .need(r.style == ImportStyle::gpt2                                      ? "c_attn.weight"
                                : r.style == ImportStyle::llama || r.style == ImportStyle::gemma2 ? "q_proj.weight"
                                : r.style == ImportStyle::bert                                    ? "self.query.weight"
                                                                                                  : "out_proj.weight")
                          .dtype));
  std::vector<std::string> quoted_labels;
  quoted_labels.reserve(labels.size());
  for (const std::string& label : labels) quoted_labels.push_back(attn::quoted(label));
  std::string text = "{\n";
  text += fmt::format("  \"description\": {},\n",
                      attn::quoted(description(r, l, heads, x_rows, mask, r.window, dtype, rope_words)));
  text += fmt::format("  \"tokens\": [{}],\n", fmt::join(quoted_labels, ", "));
  text += fmt::format("  \"n_heads\": {},\n  \"n_kv_heads\": {},\n", heads.h, heads.g);
  text += fmt::format("  \"mask\": {},\n", mask_text(mask, r.window));
  if (rope_json) text += fmt::format("  \"rope\": {},\n", *rope_json);
  if (gemma.scale) text += fmt::format("  \"scale\": {},\n", exact_value(*gemma.scale, false));
  if (gemma.softcap) text += fmt::format("  \"softcap\": {},\n", exact_value(*gemma.softcap, false));
  if (config.layers || config.context_length) {
    std::vector<std::string> facts;
    if (config.layers) facts.push_back(fmt::format("\"layers\": {}", *config.layers));
    if (config.context_length) facts.push_back(fmt::format("\"context_length\": {}", *config.context_length));
    text += fmt::format("  \"model\": {{{}}},\n", fmt::join(facts, ", "));
  }
  text += fmt::format("  \"layout\": \"{}\",\n", l.out_in ? "out_in" : "in_out");
  text += x_text(x_rows);
  const auto weight = [&](const char* key, const Matrix& w) {
    text += ",\n" + matrix_text(fmt::format("  \"{}\": ", key), w.rows, w.cols, texts_of(w.values));
  };
  const auto bias = [&](const char* key, const Vector& b) {
    if (!b.values.empty()) text += fmt::format(",\n  \"{}\": [{}]", key, fmt::join(texts_of(b.values), ", "));
  };
  weight("W_q", l.W_q), weight("W_k", l.W_k), weight("W_v", l.W_v), weight("W_o", l.W_o);
  bias("b_q", l.b_q), bias("b_k", l.b_k), bias("b_v", l.b_v), bias("b_o", l.b_o);
  out.json = text + "\n}\n";
  return out;
}

}  // namespace attn
