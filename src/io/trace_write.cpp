// Trace -> JSON text (docs/trace-format.md): numbers in their shortest form, keys in the documented order.

#include "io/features.hpp"
#include "io/trace_json.hpp"
#include "io/text_writer.hpp"

#include <cmath>
#include <iterator>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json/error.hpp"
#include "text/number.hpp"

namespace attn {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // keeps the keys in the order docs/trace-format.md lists them

void append_trace_number(std::string& out, double x, bool float32) {
  if (!std::isfinite(x)) out += fmt::format("\"{}\"", exact_value(x, float32));
  // fmt writes -0.0 as "-0", which JSON readers take for the integer 0: keep the sign with a point.
  else if (x == 0 && std::signbit(x)) out += "-0.0";
  else {
    char text[exact_value_chars];  // a local buffer: a trace can hold tens of millions of numbers
    out.append(text, exact_value_to(text, x, float32));
  }
}

std::string format_trace_number(double x, bool float32) {
  std::string out;
  append_trace_number(out, x, float32);
  return out;
}

namespace {

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
  ojson config = {{"n", p.n},
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
  if (t.backward) {
    const std::string_view source = p.upstream == Upstream::input    ? "input"
                                    : p.upstream == Upstream::seeded ? "grad_seed"
                                                                     : "ones";
    config["backward"] = {{"dY", source},
                          {"grad_seed", p.upstream == Upstream::seeded ? ojson(p.grad_seed) : ojson(nullptr)},
                          {"loss", "L = Σ Y ⊙ dY"}};
  }
  write_feature_config(p, config);  // rope, alibi, softcap, sinks, dropout: io/features.hpp
  return config;
}

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
  write_feature_inputs(p, [&](std::string_view name, const ojson& value) {  // io/features.hpp
    key(name);
    w.value(value, indent + 2);
  });
  if (!p.dY.empty()) {
    key("dY");
    w.data(as_written(p.dY, p.batched), false, indent + 2);
  }
  w.append("\n");
  w.pad(indent);
  w.append("}");
}

// The angle table of q_rot or k_rot: each token's position, θ_i, and cos and sin of pos·θ_i as the run
// held them (rounded to its dtype, as the engines hold inputs).
void write_rotation(TextWriter& w, const Problem& p, bool keys, DType dtype) {
  const Rope& r = *p.rope;
  const auto held = [dtype](const Tensor<double>& t) {
    Tensor<double> out = t;
    if (dtype != DType::float64)
      for (double& x : out.values()) x = static_cast<double>(stored_input<float>(dtype, x));
    return out;
  };
  const bool float32 = computes_in_float32(dtype);
  w.append("{");
  w.key("positions", 8, true);
  w.data(Tensor<double>({(keys ? r.context_positions : r.positions).size()}, keys ? r.context_positions : r.positions),
         false, 8);
  w.key("theta_i", 8, false);
  w.data(Tensor<double>({r.frequencies.size()}, r.frequencies), false, 8);
  w.key("cos", 8, false);
  w.data(held(keys ? r.cos_k : r.cos_q), float32, 8);
  w.key("sin", 8, false);
  w.data(held(keys ? r.sin_k : r.sin_q), float32, 8);
  w.append("\n      }");
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
    w.append(
        fmt::format("\"batch\": {}, \"head\": {}, \"i\": {}, \"j\": {}, \"rows\": [{}, {}], \"cols\": [{}, {}], "
                    "\"skipped\": {}",
                    t.batch, t.head, t.i, t.j, t.row_begin, t.row_end, t.col_begin, t.col_end, t.skipped));
    if (!t.skipped) {
      for (const TileField<FlashTile>& field : tile_fields())
        if (!field.dropout_only || !(t.*field.member).empty()) matrix(field.name, t.*field.member, 8);
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
  w.append(ojson(fmt::format("naive attention in {} on the same inputs rounded to {}", reference_name(c.dtype),
                             name_of(c.dtype)))
               .dump());
  stats("naive_vs_reference", c.naive_vs_ref);
  stats("flash_vs_reference", c.flash_vs_ref);
  stats("flash_vs_naive", c.flash_vs_naive);
  w.key("memory", 4, false);
  w.append(
      fmt::format("{{\"naive_peak_bytes\": {}, \"flash_peak_bytes\": {}}}", c.naive_peak_bytes, c.flash_peak_bytes));
  w.key("tolerance", 4, false);
  w.append(fmt::format(
      "{{\"rule\": \"max|flash - ref| <= 2 * max|naive - ref| + noise\", \"flash_error\": {}, "
      "\"naive_error\": {}, \"noise\": {}, \"bound\": {}, \"pass\": {}}}",
      number(c.flash_vs_ref.max_abs), number(c.naive_vs_ref.max_abs), number(c.noise), number(c.bound), c.pass));
  w.key("outputs", 4, false);
  w.append("{");
  const bool float32 = computes_in_float32(c.dtype);
  output("naive", c.naive, float32);
  output("flash", c.flash, float32);
  output("reference", c.reference, false);
  w.append("\n    }");
  if (c.backward) {
    w.key("backward", 4, false);
    w.append("{");
    w.key("rule", 6, true);
    w.append("\"per gradient: max|flash - ref| <= 2 * max|naive - ref| + noise\"");
    w.key("largest_logit", 6, false);
    w.append(number(c.largest_logit));
    w.key("pass", 6, false);
    w.append(c.gradients_pass ? "true" : "false");
    w.key("gradients", 6, false);
    w.append("[");
    for (std::size_t k = 0; k < c.gradients.size(); ++k) {
      const GradientCheck& g = c.gradients[k];
      w.append(k == 0 ? "\n        " : ",\n        ");
      w.append(
          fmt::format("{{\"step\": \"{}\", \"naive_error\": {}, \"flash_error\": {}, \"flash_vs_naive\": {}, "
                      "\"max_reference\": {}, \"noise\": {}, \"bound\": {}, \"pass\": {}}}",
                      step_info(g.step).name, number(g.naive_vs_ref.max_abs), number(g.flash_vs_ref.max_abs),
                      number(g.flash_vs_naive.max_abs), number(g.max_ref), number(g.noise), number(g.bound), g.pass));
    }
    w.append(c.gradients.empty() ? "]" : "\n      ]");
    w.append("\n    }");
  }
  w.append("\n  }");
}

// FlashAttention-2's backward: D, then every tile with P recomputed, dP, dS and the running gradients.
void write_flash_backward(TextWriter& w, const FlashBackwardRecord& f, bool float32) {
  const auto matrix = [&](std::string_view name, const Tensor<double>& t, int indent) {
    w.key(name, indent, false);
    w.data(t, float32, indent);
  };
  w.append("{");
  w.key("block_q", 4, true);
  w.append(fmt::format("{}", f.tile_size.Br));
  w.key("block_k", 4, false);
  w.append(fmt::format("{}", f.tile_size.Bc));
  matrix("D", f.D, 4);
  w.key("tiles", 4, false);
  w.append("[");
  for (std::size_t k = 0; k < f.tiles.size(); ++k) {
    const FlashBackwardTile& t = f.tiles[k];
    w.append(k == 0 ? "\n      {" : ",\n      {");
    w.append(
        fmt::format("\"batch\": {}, \"head\": {}, \"i\": {}, \"j\": {}, \"rows\": [{}, {}], \"cols\": [{}, {}], "
                    "\"skipped\": {}",
                    t.batch, t.head, t.i, t.j, t.row_begin, t.row_end, t.col_begin, t.col_end, t.skipped));
    if (!t.skipped) {
      for (const TileField<FlashBackwardTile>& field : backward_tile_fields()) matrix(field.name, t.*field.member, 8);
      w.append("\n      ");
    }
    w.append("}");
  }
  w.append(f.tiles.empty() ? "]" : "\n    ]");
  w.append("\n  }");
}

}  // namespace

void write_step(TextWriter& w, const StepRecord& s, const Problem& p, DType dtype, int indent, std::string_view name) {
  const bool float32 = computes_in_float32(dtype);
  const int in = indent + 2;
  w.append("{");
  w.key("name", in, true);
  w.append(json(std::string(name.empty() ? step_info(s.step).name : name)).dump());
  w.key("formula", in, false);
  w.append(json(s.formula).dump());
  w.key("description", in, false);
  w.append(json(s.description).dump());
  w.key("shape", in, false);
  w.value(ojson(s.value.shape()), in);
  w.key("dims", in, false);
  w.value(ojson(dim_names(s.step, p.batched, p.layout)), in);
  w.key("dtype", in, false);
  w.append(json(name_of(dtype)).dump());
  w.key("data", in, false);
  w.data(s.value, float32, in);
  if (p.rope && name.empty() && (s.step == Step::q_rot || s.step == Step::k_rot)) {
    w.key("rotation", in, false);
    write_rotation(w, p, s.step == Step::k_rot, dtype);
  }
  w.append("\n");
  w.pad(indent);
  w.append("}");
}

void write_steps(TextWriter& w, const Trace& t, int indent) {
  w.append("[");
  for (std::size_t i = 0; i < t.steps.size(); ++i) {
    w.append(i == 0 ? "\n" : ",\n");
    w.pad(indent + 2);
    write_step(w, t.steps[i], *t.problem, t.dtype, indent + 2);
  }
  if (t.steps.empty()) return w.append("]");
  w.append("\n");
  w.pad(indent);
  w.append("]");
}

std::string trace_to_json(const Trace& t, const std::string& generator) {
  const Problem& p = *t.problem;
  const bool float32 = computes_in_float32(t.dtype);
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
  write_steps(w, t, 2);
  if (t.flash) {
    w.key("flash", 2, false);
    write_flash(w, *t.flash, float32);
  }
  if (t.flash_backward) {
    w.key("flash_backward", 2, false);
    write_flash_backward(w, *t.flash_backward, float32);
  }
  if (t.compare) {
    w.key("compare", 2, false);
    write_compare(w, *t.compare, p.batched);
  }
  if (t.decode) {
    w.key("decode", 2, false);
    write_decode(w, t);
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

}  // namespace attn
