#include "io/load.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json/fast_parser.hpp"
#include "json/parse.hpp"
#include "json/pointer.hpp"
#include "io/features.hpp"
#include "json/reader.hpp"
#include "model/run.hpp"
#include "text/nearest.hpp"

namespace attn {

using json = nlohmann::json;

namespace {

// The input's keys: the sequence, the projections and the rest, then the optional features' (io/features.hpp).
const std::vector<const char*>& top_keys() {
  static const std::vector<const char*> keys = [] {
    std::vector<const char*> out = {"X",     "tokens", "W_q",    "W_k",     "W_v",         "W_o",
                                    "b_q",   "b_k",    "b_v",    "b_o",     "n_heads",     "n_kv_heads",
                                    "scale", "mask",   "layout", "context", "description", "dY"};
    for (const std::string_view key : feature_keys()) out.push_back(key.data());  // literals: terminated
    return out;
  }();
  return keys;
}

// The input format (docs/input-format.md), read with the pieces of JsonReader.
class Reader : public JsonReader {
 public:
  using JsonReader::JsonReader;

  // A sequence: n × d (batched == false) or B × n × d, every item of one shape.
  Tensor<double> sequence(const json& j, const std::string& pointer, bool batched) const {
    if (!batched) {
      Tensor<double> x = matrix(j, pointer);
      return Tensor<double>({1, x.dim(0), x.dim(1)}, std::vector<double>(x.values().begin(), x.values().end()));
    }
    require_list(j, pointer, "sequences (a batch)");
    std::vector<double> data;
    std::size_t n = 0, d = 0;
    for (std::size_t b = 0; b < j.size(); ++b) {
      const std::string item_ptr = pointer_index(pointer, b);
      if (!j[b].is_array() || j[b].empty() || !j[b][0].is_array()) {
        fail(item_ptr, fmt::format("expected a batch item (a list of rows), found {}", type_name(j[b])));
      }
      const Tensor<double> x = matrix(j[b], item_ptr);
      if (b == 0) {
        n = x.dim(0);
        d = x.dim(1);
      } else if (x.dim(0) != n) {
        fail(item_ptr, fmt::format("expected {} (as batch item 0), found {}", plural(n, "row", "rows"), x.dim(0)));
      } else if (x.dim(1) != d) {
        fail(pointer_index(item_ptr, 0),
             fmt::format("expected {} (as batch item 0), found {}", plural(d, "number", "numbers"), x.dim(1)));
      }
      data.insert(data.end(), x.values().begin(), x.values().end());
    }
    return Tensor<double>({j.size(), n, d}, std::move(data));
  }

  // Labels for the n rows of each batch item: n strings, or (batched) B lists of n strings. A batch
  // may also share one list. Absent: t0, t1, …
  std::vector<std::vector<std::string>> tokens(const json* j, const std::string& pointer, std::size_t B, std::size_t n,
                                               bool batched, std::string_view rows_of) const {
    const auto one_list = [&](const json& list, const std::string& ptr) {
      if (!list.is_array())
        fail(ptr, fmt::format("expected a list of {} labels (strings), found {}", n, type_name(list)));
      if (list.size() != n)
        fail(ptr, fmt::format("expected {} ({}), found {}", plural(n, "label", "labels"), rows_of, list.size()));
      std::vector<std::string> out;
      for (std::size_t i = 0; i < n; ++i) out.push_back(string(list[i], pointer_index(ptr, i)));
      return out;
    };
    if (j == nullptr) {
      std::vector<std::string> names;
      for (std::size_t i = 0; i < n; ++i) names.push_back(fmt::format("t{}", i));
      return std::vector<std::vector<std::string>>(B, names);
    }
    if (batched && j->is_array() && !j->empty() && j->at(0).is_array()) {
      if (j->size() != B)
        fail(pointer, fmt::format("expected {} (one per batch item), found {}", plural(B, "list", "lists"), j->size()));
      std::vector<std::vector<std::string>> out;
      for (std::size_t b = 0; b < B; ++b) out.push_back(one_list(j->at(b), pointer_index(pointer, b)));
      return out;
    }
    return std::vector<std::vector<std::string>>(B, one_list(*j, pointer));
  }

  // A weight matrix, returned in the in_out layout (in × out), checked against the rows it reads.
  Tensor<double> weight(const json& root, const char* key, Layout layout, std::size_t in,
                        std::string_view in_name) const {
    const std::string ptr = pointer_key("", key);
    Tensor<double> w = matrix(root.at(key), ptr);
    if (layout == Layout::in_out) {
      if (w.dim(0) != in)
        fail(ptr, fmt::format("expected {} ({}), found {}", plural(in, "row", "rows"), in_name, w.dim(0)));
      return w;
    }
    if (w.dim(1) != in)
      fail(ptr, fmt::format("expected {} ({}; layout out_in), found {}", plural(in, "column", "columns"), in_name,
                            w.dim(1)));
    Tensor<double> t({w.dim(1), w.dim(0)});  // Wᵀ: out_in is PyTorch's nn.Linear storage
    for (std::size_t r = 0; r < w.dim(0); ++r)
      for (std::size_t c = 0; c < w.dim(1); ++c) t(c, r) = w(r, c);
    return t;
  }

  // The width (outputs) of an in_out weight, checked to be a multiple of `heads`.
  std::size_t per_head(const Tensor<double>& w, const char* key, Layout layout, std::size_t heads,
                       std::string_view heads_name) const {
    const std::size_t width = w.dim(1);
    if (width % heads != 0) {
      fail(pointer_key("", key), fmt::format("{} {} do not split into {} = {} heads", width,
                                             layout == Layout::in_out ? "columns" : "rows", heads_name, heads));
    }
    return width / heads;
  }

  void check_width(const Tensor<double>& w, const char* key, Layout layout, std::size_t expected,
                   const std::string& why) const {
    if (w.dim(1) == expected) return;
    const std::string_view side = layout == Layout::in_out ? "columns" : "rows";
    fail(pointer_key("", key), fmt::format("expected {} {} ({}), found {}", expected, side, why, w.dim(1)));
  }

  std::vector<double> bias(const json& root, const char* key, std::size_t expected, const std::string& why) const {
    if (!root.contains(key)) return {};
    const std::string ptr = pointer_key("", key);
    std::vector<double> b = vector(root.at(key), ptr);
    if (b.size() != expected)
      fail(ptr, fmt::format("expected {} ({}), found {}", plural(expected, "number", "numbers"), why, b.size()));
    return b;
  }

  Align align(const json& mask, const std::string& pointer) const {
    if (!mask.contains("align")) return Align::top_left;
    const std::string ptr = pointer_key(pointer, "align");
    const std::string& a = string(mask.at("align"), ptr);
    if (a == "top_left") return Align::top_left;
    if (a == "bottom_right") return Align::bottom_right;
    fail(ptr, fmt::format("expected \"top_left\" or \"bottom_right\", found \"{}\"", a));
  }

  Mask mask(const json* j, const Problem& p) const {
    Mask mask;
    mask.n = p.n;
    mask.m = p.m;
    if (j == nullptr) return mask;
    const std::string ptr = "/mask";
    constexpr std::array kinds = {"none", "causal", "sliding_window", "padding", "custom"};
    const auto kind_of = [&](const std::string& name, const std::string& at) {
      for (std::size_t i = 0; i < kinds.size(); ++i)
        if (name == kinds[i]) return static_cast<MaskKind>(i);
      fail(at, fmt::format("unknown mask type \"{}\"{}; expected one of none, causal, sliding_window, padding, custom",
                           name, did_you_mean(name, kinds)));
    };
    if (j->is_string()) {
      mask.kind = kind_of(j->get<std::string>(), ptr);
      if (mask.kind != MaskKind::none && mask.kind != MaskKind::causal)
        fail(ptr, fmt::format("the mask \"{}\" needs its parameters: write it as an object, {{\"type\": \"{}\", …}}",
                              to_string(mask.kind), to_string(mask.kind)));
      return mask;
    }
    if (!j->is_object())
      fail(ptr, fmt::format("expected \"none\", \"causal\" or a mask object, found {}", type_name(*j)));
    if (!j->contains("type")) fail(pointer_key(ptr, "type"), "missing: a mask object needs a \"type\"");
    mask.kind = kind_of(string(j->at("type"), pointer_key(ptr, "type")), pointer_key(ptr, "type"));
    switch (mask.kind) {
      case MaskKind::none: {
        constexpr std::array keys = {"type"};
        require_keys(*j, ptr, keys);
        break;
      }
      case MaskKind::causal: {
        constexpr std::array keys = {"type", "align"};
        require_keys(*j, ptr, keys);
        mask.align = align(*j, ptr);
        break;
      }
      case MaskKind::sliding_window: {
        constexpr std::array keys = {"type", "window", "align"};
        require_keys(*j, ptr, keys);
        if (!j->contains("window"))
          fail(pointer_key(ptr, "window"), "missing: a sliding_window mask needs a \"window\" (>= 1)");
        mask.window = integer(j->at("window"), pointer_key(ptr, "window"), 1, 1u << 30);
        mask.align = align(*j, ptr);
        break;
      }
      case MaskKind::padding: {
        constexpr std::array keys = {"type", "keep"};
        require_keys(*j, ptr, keys);
        mask.keep = keep(*j, pointer_key(ptr, "keep"), p);
        break;
      }
      case MaskKind::custom: {
        constexpr std::array keys = {"type", "allow"};
        require_keys(*j, ptr, keys);
        mask.allow = allow(*j, pointer_key(ptr, "allow"), p);
        break;
      }
    }
    return mask;
  }

  // padding: m flags of 0 or 1 (one list per batch item for a batch, or one list for all) -> (B or 1, m)
  Tensor<std::uint8_t> keep(const json& mask, const std::string& ptr, const Problem& p) const {
    if (!mask.contains("keep"))
      fail(ptr, fmt::format("missing: a padding mask needs \"keep\", {} flags of 0 or 1", p.m));
    const json& k = mask.at("keep");
    const auto flags = [&](const json& list, const std::string& at, std::vector<std::uint8_t>& out) {
      if (!list.is_array())
        fail(at, fmt::format("expected a list of {} flags (0 or 1), found {}", p.m, type_name(list)));
      if (list.size() != p.m)
        fail(at, fmt::format("expected {} (one per key), found {}", plural(p.m, "flag", "flags"), list.size()));
      for (std::size_t i = 0; i < list.size(); ++i) {
        const json& f = list[i];
        if (!f.is_number() || (f.get<double>() != 0 && f.get<double>() != 1))
          fail(pointer_index(at, i), fmt::format("expected 0 or 1, found {}", type_name(f)));
        out.push_back(f.get<double>() == 1 ? 1 : 0);
      }
    };
    std::vector<std::uint8_t> data;
    if (p.batched && k.is_array() && !k.empty() && k[0].is_array()) {
      if (k.size() != p.B)
        fail(ptr, fmt::format("expected {} (one per batch item), found {}", plural(p.B, "list", "lists"), k.size()));
      for (std::size_t b = 0; b < p.B; ++b) flags(k[b], pointer_index(ptr, b), data);
      return Tensor<std::uint8_t>({p.B, p.m}, std::move(data));
    }
    flags(k, ptr, data);
    return Tensor<std::uint8_t>({1, p.m}, std::move(data));
  }

  // custom: an n × m matrix of booleans (or B of them for a batch) -> (B or 1, n, m)
  Tensor<std::uint8_t> allow(const json& mask, const std::string& ptr, const Problem& p) const {
    if (!mask.contains("allow"))
      fail(ptr, fmt::format("missing: a custom mask needs \"allow\", {} × {} booleans", p.n, p.m));
    const json& a = mask.at("allow");
    const auto matrix_of_bools = [&](const json& rows, const std::string& at, std::vector<std::uint8_t>& out) {
      if (!rows.is_array())
        fail(at, fmt::format("expected {} rows of {} booleans, found {}", p.n, p.m, type_name(rows)));
      if (rows.size() != p.n)
        fail(at, fmt::format("expected {} (one per query), found {}", plural(p.n, "row", "rows"), rows.size()));
      for (std::size_t i = 0; i < p.n; ++i) {
        const std::string row_ptr = pointer_index(at, i);
        const json& row = rows[i];
        if (!row.is_array()) fail(row_ptr, fmt::format("expected a row of {} booleans, found {}", p.m, type_name(row)));
        if (row.size() != p.m)
          fail(row_ptr,
               fmt::format("expected {} (one per key), found {}", plural(p.m, "boolean", "booleans"), row.size()));
        for (std::size_t j = 0; j < p.m; ++j) {
          if (!row[j].is_boolean())
            fail(pointer_index(row_ptr, j), fmt::format("expected true or false, found {}", type_name(row[j])));
          out.push_back(row[j].get<bool>() ? 1 : 0);
        }
      }
    };
    std::vector<std::uint8_t> data;
    const bool per_item =
        p.batched && a.is_array() && !a.empty() && a[0].is_array() && !a[0].empty() && a[0][0].is_array();
    if (per_item) {
      if (a.size() != p.B)
        fail(ptr,
             fmt::format("expected {} (one per batch item), found {}", plural(p.B, "matrix", "matrices"), a.size()));
      for (std::size_t b = 0; b < p.B; ++b) matrix_of_bools(a[b], pointer_index(ptr, b), data);
      return Tensor<std::uint8_t>({p.B, p.n, p.m}, std::move(data));
    }
    matrix_of_bools(a, ptr, data);
    return Tensor<std::uint8_t>({1, p.n, p.m}, std::move(data));
  }

  Problem problem(const json& root) const {
    // pass 1: the keys, the sequence, its context and the projections, each checked against the last
    check_top(root);
    Problem p;
    if (root.contains("description")) p.description = string(root.at("description"), "/description");
    read_sequence(root, p);
    read_context(root, p);
    read_projections(root, p);

    // pass 2: the scale, the mask and the position encodings, which need the sizes of pass 1
    p.scale_given = root.contains("scale");
    p.scale = p.scale_given ? number(root.at("scale"), "/scale") : 1.0 / std::sqrt(static_cast<double>(p.d_k));
    p.mask = mask(root.contains("mask") ? &root.at("mask") : nullptr, p);
    read_features(*this, root, p);  // rope, alibi, softcap, sinks, dropout, model: io/features.hpp
    if (root.contains("dY")) read_upstream(root.at("dY"), p);
    return p;
  }

  // The backward pass's upstream gradient dY = ∂L/∂Y: the output's shape, n × d_out (B × n × d_out for a
  // batch), d_out being W_o's width or h·d_v without it.
  void read_upstream(const json& j, Problem& p) const {
    const bool batched = j.is_array() && !j.empty() && j[0].is_array() && !j[0].empty() && j[0][0].is_array();
    if (batched != p.batched)
      fail("/dY", p.batched ? fmt::format("expected a batch of {} (as X), found a single matrix", p.B)
                            : "expected one n × d_out matrix (X is a single sequence), found a batch");
    Tensor<double> dY = sequence(j, "/dY", p.batched);
    if (dY.dim(0) != p.B || dY.dim(1) != p.n || dY.dim(2) != p.d_out)
      fail("/dY", fmt::format("expected the output's shape {} × {}{} (dY = ∂L/∂Y), found {} × {}{}", p.n, p.d_out,
                              p.batched ? fmt::format(" per batch item of {}", p.B) : "", dY.dim(1), dY.dim(2),
                              p.batched ? fmt::format(" per batch item of {}", dY.dim(0)) : ""));
    p.dY = std::move(dY);
    p.upstream = Upstream::input;
  }

  // An object of known keys, with the four that every input needs.
  void check_top(const json& root) const {
    if (!root.is_object())
      fail("", fmt::format("expected a JSON object with the keys X, W_q, W_k, W_v, …, found {}", type_name(root)));
    require_keys(root, "", top_keys());
    for (const char* key : {"X", "W_q", "W_k", "W_v"})
      if (!root.contains(key)) fail(pointer_key("", key), "missing: this key is required");
  }

  // The sequence: 2-D, or 3-D for a batch. Sets X (B, n, d_model), its sizes and its tokens.
  void read_sequence(const json& root, Problem& p) const {
    const json& jx = root.at("X");
    p.batched = jx.is_array() && !jx.empty() && jx[0].is_array() && !jx[0].empty() && jx[0][0].is_array();
    p.X = sequence(jx, "/X", p.batched);
    p.B = p.X.dim(0);
    p.n = p.X.dim(1);
    p.d_model = p.X.dim(2);
    p.tokens =
        tokens(root.contains("tokens") ? &root.at("tokens") : nullptr, "/tokens", p.B, p.n, p.batched, "rows of X");
  }

  // Where keys and values come from: the context (cross-attention) or X itself. Sets C (B, m, d_context).
  void read_context(const json& root, Problem& p) const {
    if (!root.contains("context")) {
      p.C = p.X;
      p.m = p.n;
      p.d_context = p.d_model;
      p.context_tokens = p.tokens;
      return;
    }
    const json& ctx = root.at("context");
    if (!ctx.is_object())
      fail("/context", fmt::format("expected an object {{\"X\": …, \"tokens\": …}}, found {}", type_name(ctx)));
    constexpr std::array keys = {"X", "tokens"};
    require_keys(ctx, "/context", keys);
    if (!ctx.contains("X")) fail("/context/X", "missing: a context needs its own X");
    const json& cx = ctx.at("X");
    const bool ctx_batched = cx.is_array() && !cx.empty() && cx[0].is_array() && !cx[0].empty() && cx[0][0].is_array();
    if (ctx_batched != p.batched)
      fail("/context/X", p.batched ? fmt::format("expected a batch of {} (as X), found a single sequence",
                                                 plural(p.B, "sequence", "sequences"))
                                   : "expected a single sequence (as X), found a batch");
    p.C = sequence(cx, "/context/X", p.batched);
    if (p.C.dim(0) != p.B)
      fail("/context/X",
           fmt::format("expected {} (the batch of X), found {}", plural(p.B, "batch item", "batch items"), p.C.dim(0)));
    p.cross = true;
    p.m = p.C.dim(1);
    p.d_context = p.C.dim(2);
    p.context_tokens = tokens(ctx.contains("tokens") ? &ctx.at("tokens") : nullptr, "/context/tokens", p.B, p.m,
                              p.batched, "rows of the context X");
    if (!ctx.contains("tokens")) {
      for (auto& item : p.context_tokens)
        for (std::size_t j = 0; j < item.size(); ++j) item[j] = fmt::format("c{}", j);
    }
  }

  // The heads, then the weights in the file's layout, turned into in_out, and their biases.
  void read_projections(const json& root, Problem& p) const {
    p.h = root.contains("n_heads") ? integer(root.at("n_heads"), "/n_heads", 1, 1u << 16) : 1;
    p.g = root.contains("n_kv_heads") ? integer(root.at("n_kv_heads"), "/n_kv_heads", 1, 1u << 16) : p.h;
    if (p.h % p.g != 0) fail("/n_kv_heads", fmt::format("n_heads = {} is not a multiple of n_kv_heads = {}", p.h, p.g));

    if (root.contains("layout")) {
      const std::string& layout = string(root.at("layout"), "/layout");
      if (layout == "in_out") p.layout = Layout::in_out;
      else if (layout == "out_in") p.layout = Layout::out_in;
      else fail("/layout", fmt::format("expected \"in_out\" or \"out_in\", found \"{}\"", layout));
    }
    const std::string ctx_width = p.cross ? "width of the context X" : "d_model of X";
    p.W_q = weight(root, "W_q", p.layout, p.d_model, "d_model of X");
    p.d_k = per_head(p.W_q, "W_q", p.layout, p.h, "n_heads");
    p.W_k = weight(root, "W_k", p.layout, p.d_context, ctx_width);
    check_width(p.W_k, "W_k", p.layout, p.g * p.d_k, fmt::format("n_kv_heads · d_k = {} · {}", p.g, p.d_k));
    p.W_v = weight(root, "W_v", p.layout, p.d_context, ctx_width);
    p.d_v = per_head(p.W_v, "W_v", p.layout, p.g, "n_kv_heads");
    if (root.contains("W_o")) {
      p.W_o = weight(root, "W_o", p.layout, p.h * p.d_v, fmt::format("n_heads · d_v = {} · {}", p.h, p.d_v));
      p.d_out = p.W_o.dim(1);
    } else {
      if (root.contains("b_o"))
        fail("/b_o", "b_o needs W_o: without an output projection there is nothing to add it to");
      p.d_out = p.h * p.d_v;
    }
    // A bias has one number per output of its projection: columns of an in_out weight, rows of out_in.
    const std::string_view outputs = p.layout == Layout::in_out ? "columns" : "rows";
    p.b_q = bias(root, "b_q", p.h * p.d_k, fmt::format("the {} of W_q", outputs));
    p.b_k = bias(root, "b_k", p.g * p.d_k, fmt::format("the {} of W_k", outputs));
    p.b_v = bias(root, "b_v", p.g * p.d_v, fmt::format("the {} of W_v", outputs));
    p.b_o = bias(root, "b_o", p.d_out, fmt::format("the {} of W_o", outputs));
  }
};

}  // namespace

Problem problem_from_json(const json& input, const std::string& file, const std::string& root) {
  return Reader(file, root).problem(input);
}

Problem load_problem(std::string_view text, const std::string& file) {
  json input = parse_json(text, file);
  Problem problem = problem_from_json(input, file, "");
  discard_json(std::move(input));
  return problem;
}

Problem load_problem_file(const std::string& path, const MemoryLimit& limit) {
  return load_problem(read_text(path, limit), display_name(path));
}

}  // namespace attn
