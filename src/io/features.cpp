#include "io/features.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "json/pointer.hpp"
#include "json/reader.hpp"
#include "text/words.hpp"

namespace attn {

namespace {

// ---------------------------------------------------------------------- reading

// One position per token: `count` whole numbers >= 0 (a batch shares one list).
std::vector<double> positions(const JsonReader& r, const nlohmann::json& j, const std::string& ptr, std::size_t count,
                              std::string_view one_per) {
  if (!j.is_array())
    r.fail(ptr, fmt::format("expected a list of {} positions (whole numbers >= 0), found {}", count, type_name(j)));
  if (j.size() != count)
    r.fail(ptr, fmt::format("expected {} ({}), found {}", plural(count, "position", "positions"), one_per, j.size()));
  std::vector<double> out;
  for (std::size_t t = 0; t < count; ++t) {
    const nlohmann::json& x = j[t];
    const std::string at = pointer_index(ptr, t);
    const double value = x.is_number() ? x.get<double>() : -1;
    if (!x.is_number() || value < 0 || value != std::floor(value))
      r.fail(at, fmt::format("expected a position: a whole number >= 0, found {}",
                             x.is_number() ? x.dump() : type_name(x)));
    // Positions stay exact in float32 up to 2^24: far beyond any context of this tool.
    if (value > 16777216.0) r.fail(at, fmt::format("expected a position up to 2^24 = 16777216, found {}", x.dump()));
    out.push_back(value);
  }
  return out;
}

std::vector<double> counting(std::size_t count, double first) {
  std::vector<double> out(count);
  for (std::size_t t = 0; t < count; ++t) out[t] = first + static_cast<double>(t);
  return out;
}

void read_rope(const JsonReader& r, const nlohmann::json& j, Problem& p) {
  const std::string ptr = "/rope";
  if (!j.is_object())
    r.fail(ptr, fmt::format("expected an object {{\"theta\": …, \"positions\": …, \"style\": …, \"dims\": …}}, "
                            "found {}",
                            type_name(j)));
  constexpr std::array keys = {"theta", "positions", "context_positions", "style", "dims"};
  r.require_keys(j, ptr, keys);
  Rope rope;
  if (j.contains("theta")) {
    rope.theta = r.number(j.at("theta"), "/rope/theta");
    if (!(rope.theta > 0)) r.fail("/rope/theta", fmt::format("expected a number > 0, found {}", j.at("theta").dump()));
  }
  if (j.contains("style")) {
    const std::string& style = r.string(j.at("style"), "/rope/style");
    if (style == "half") rope.style = RopeStyle::half;
    else if (style == "interleaved") rope.style = RopeStyle::interleaved;
    else r.fail("/rope/style", fmt::format("expected \"half\" or \"interleaved\", found \"{}\"", style));
  }
  if (j.contains("dims")) {
    rope.dims = r.integer(j.at("dims"), "/rope/dims", 2, 1u << 16);
    if (rope.dims % 2 != 0)
      r.fail("/rope/dims", fmt::format("expected an even number (features turn in pairs), found {}", rope.dims));
    if (rope.dims > p.d_k) r.fail("/rope/dims", fmt::format("expected at most d_k = {}, found {}", p.d_k, rope.dims));
  } else {
    if (p.d_k % 2 != 0)
      r.fail("/rope", fmt::format("d_k = {} is odd and features turn in pairs: give \"dims\", an even number below {}",
                                  p.d_k, p.d_k));
    rope.dims = p.d_k;
  }
  rope.positions = j.contains("positions") ? positions(r, j.at("positions"), "/rope/positions", p.n, "one per query")
                                           : counting(p.n, 0);
  if (j.contains("context_positions")) {
    if (!p.cross)
      r.fail("/rope/context_positions",
             "only for cross-attention (with a context): the keys of self-attention are the queries and take "
             "\"positions\"");
    rope.context_positions = positions(r, j.at("context_positions"), "/rope/context_positions", p.m, "one per key");
  } else {
    rope.context_positions = p.cross ? counting(p.m, 0) : rope.positions;
  }
  rope.frequencies = rope_frequencies(rope.theta, rope.dims);
  std::tie(rope.cos_q, rope.sin_q) = rope_table(rope.positions, rope.frequencies);
  std::tie(rope.cos_k, rope.sin_k) = rope_table(rope.context_positions, rope.frequencies);
  p.rope = std::move(rope);
}

void read_alibi(const JsonReader& r, const nlohmann::json& j, Problem& p) {
  const std::string ptr = "/alibi";
  Alibi a;
  if (j.is_boolean()) {
    if (!j.get<bool>()) return;
    a.slopes = alibi_slopes(p.h);
  } else if (j.is_array()) {
    if (j.size() != p.h)
      r.fail(ptr, fmt::format("expected {} (one per query head, n_heads = {}), found {}",
                              plural(p.h, "slope", "slopes"), p.h, j.size()));
    a.standard = false;
    for (std::size_t k = 0; k < j.size(); ++k) a.slopes.push_back(r.number(j[k], pointer_index(ptr, k)));
  } else {
    r.fail(ptr, fmt::format("expected true (the standard slopes) or a list of {} (one per query head), found {}",
                            plural(p.h, "slope", "slopes"), type_name(j)));
  }
  // RoPE's positions when the input has them; else the keys count from 0 and the last query sits at
  // the last key (bottom-right, as KV-cache decoding needs).
  if (p.rope) {
    a.query_positions = p.rope->positions;
    a.key_positions = p.rope->context_positions;
  } else {
    a.key_positions = counting(p.m, 0);
    a.query_positions = counting(p.n, static_cast<double>(p.m) - static_cast<double>(p.n));
  }
  p.alibi = std::move(a);
}

// Gemma 2's logit cap c: a number above 0 (its models use 50).
void read_softcap(const JsonReader& r, const nlohmann::json& j, Problem& p) {
  const double c = r.number(j, "/softcap");
  if (!(c > 0)) r.fail("/softcap", fmt::format("expected a cap above 0 (scores become c·tanh(S'/c)), found {}", c));
  p.softcap = c;
}

// One sink logit per query head: raw, not scaled or capped, as gpt-oss adds them.
void read_sinks(const JsonReader& r, const nlohmann::json& j, Problem& p) {
  if (!j.is_array() || j.size() != p.h)
    r.fail("/sinks", fmt::format("expected a list of {} (one logit per query head, n_heads = {}), found {}",
                                 plural(p.h, "number", "numbers"), p.h, type_name(j)));
  for (std::size_t k = 0; k < j.size(); ++k) p.sinks.push_back(r.item_number(j, k, "/sinks"));
}

std::uint64_t dropout_seed(const JsonReader& r, const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(j.get<std::int64_t>());
  r.fail("/dropout/seed", fmt::format("expected a whole number 0 … 18446744073709551615, found {}", type_name(j)));
}

// {"p": 0.1, "seed": 42}: p in [0, 1), the seed a whole number 0 … 2^64 − 1 (read as an integer: a
// double would round seeds past 2^53). p = 0 is no dropout at all.
void read_dropout(const JsonReader& r, const nlohmann::json& j, Problem& p) {
  if (!j.is_object())
    r.fail("/dropout", fmt::format("expected an object {{\"p\": 0.1, \"seed\": 42}}, found {}", type_name(j)));
  constexpr std::array keys = {"p", "seed"};
  r.require_keys(j, "/dropout", keys);
  if (!j.contains("p")) r.fail("/dropout/p", "missing: the probability of dropping a weight, 0 <= p < 1");
  const double probability = r.number(j.at("p"), "/dropout/p");
  if (!(probability >= 0 && probability < 1))
    r.fail("/dropout/p",
           fmt::format("expected a probability 0 <= p < 1 (p = 1 would drop every weight), found {}", probability));
  Dropout d{probability, 0};
  if (j.contains("seed")) d.seed = dropout_seed(r, j.at("seed"));
  if (probability > 0) p.dropout = d;
}

// `model`: what the input says of the whole model, for a decode's cache.
void read_model(const JsonReader& r, const nlohmann::json& j, Problem& p) {
  if (!j.is_object())
    r.fail("/model",
           fmt::format("expected an object {{\"layers\": 32, \"context_length\": 4096}}, found {}", type_name(j)));
  constexpr std::array keys = {"layers", "context_length"};
  r.require_keys(j, "/model", keys);
  constexpr std::size_t most = 1'000'000'000;
  if (j.contains("layers")) p.model.layers = r.integer(j.at("layers"), "/model/layers", 1, most);
  if (j.contains("context_length"))
    p.model.context_length = r.integer(j.at("context_length"), "/model/context_length", 1, most);
}

// ---------------------------------------------------------------------- writing

// Positions are whole numbers: written as such.
nlohmann::ordered_json whole_numbers(const std::vector<double>& v) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const double x : v) out.push_back(static_cast<long long>(x));
  return out;
}

// ---------------------------------------------------------------------- the table

struct Feature {
  std::string_view key;
  bool (*present)(const Problem&);
  void (*read)(const JsonReader&, const nlohmann::json&, Problem&);
  void (*values)(const Problem&, const FeatureValues&);  // its values a dtype must hold; nullptr: none
  nlohmann::ordered_json (*input)(const Problem&);       // as the input said it
  nlohmann::ordered_json (*config)(const Problem&);      // as the run resolved it; nullptr: not in the config
  HeaderPlace place;
  std::string (*header)(const Problem&);  // its line in the terminal's header; nullptr: none
  // Its control in the explorer, as feature_controls_json describes it (without the key); empty: none.
  std::string_view control;
};

// In the order the loader reads them (alibi takes RoPE's positions) and the trace writes them. One row per
// feature: a table of data, which readability-function-size would count as one long function.
const std::array<Feature, 6>& features() {  // NOLINT(readability-function-size)
  static const std::array<Feature, 6> table = {{
      {"rope", [](const Problem& p) { return p.rope.has_value(); }, read_rope, nullptr,
       [](const Problem& p) {
         nlohmann::ordered_json rope = {{"theta", p.rope->theta}, {"positions", whole_numbers(p.rope->positions)}};
         if (p.cross) rope["context_positions"] = whole_numbers(p.rope->context_positions);
         rope["style"] = std::string(to_string(p.rope->style));
         rope["dims"] = p.rope->dims;
         return rope;
       },
       [](const Problem& p) {
         return nlohmann::ordered_json{{"theta", p.rope->theta},
                                       {"style", std::string(to_string(p.rope->style))},
                                       {"dims", p.rope->dims},
                                       {"frequencies", p.rope->frequencies}};
       },
       HeaderPlace::positions,
       [](const Problem& p) {
         return fmt::format("theta {}, style {}, {} of d_k = {} features turn", p.rope->theta, to_string(p.rope->style),
                            p.rope->dims, p.d_k);
       },
       R"({"label": "RoPE", "kind": "toggle", "on": {}})"},
      {"alibi", [](const Problem& p) { return p.alibi.has_value(); }, read_alibi,
       [](const Problem& p, const FeatureValues& check) {
         if (p.alibi->standard) return;
         for (std::size_t k = 0; k < p.alibi->slopes.size(); ++k)
           check.value(pointer_index("/alibi", k), p.alibi->slopes[k]);
       },
       [](const Problem& p) {
         return p.alibi->standard ? nlohmann::ordered_json(true) : nlohmann::ordered_json(p.alibi->slopes);
       },
       [](const Problem& p) {
         return nlohmann::ordered_json{{"slopes", p.alibi->slopes},
                                       {"query_positions", whole_numbers(p.alibi->query_positions)},
                                       {"key_positions", whole_numbers(p.alibi->key_positions)}};
       },
       HeaderPlace::positions,
       [](const Problem& p) {
         return fmt::format("slopes {:.4g}{}", fmt::join(p.alibi->slopes, ", "),
                            p.alibi->standard ? " (the standard ones)" : "");
       },
       R"({"label": "ALiBi", "kind": "toggle", "on": true})"},
      {"softcap", [](const Problem& p) { return p.softcap.has_value(); }, read_softcap,
       // the cap stays a float32 number in a half run
       [](const Problem& p, const FeatureValues& check) { check.number("/softcap", *p.softcap); },
       [](const Problem& p) { return nlohmann::ordered_json(*p.softcap); },
       [](const Problem& p) { return nlohmann::ordered_json(*p.softcap); }, HeaderPlace::scores,
       [](const Problem& p) { return fmt::format("S_c = {0}·tanh(S'/{0}): every score within ±{0}", *p.softcap); },
       R"({"label": "softcap", "kind": "number"})"},
      {"sinks", [](const Problem& p) { return !p.sinks.empty(); }, read_sinks,
       [](const Problem& p, const FeatureValues& check) {
         for (std::size_t k = 0; k < p.sinks.size(); ++k) check.value(pointer_index("/sinks", k), p.sinks[k]);
       },
       [](const Problem& p) { return nlohmann::ordered_json(p.sinks); },
       [](const Problem& p) { return nlohmann::ordered_json(p.sinks); }, HeaderPlace::scores,
       [](const Problem& p) {
         return fmt::format("{:.4g}, one logit per head: each row's softmax gives the sink's share to nothing",
                            fmt::join(p.sinks, ", "));
       },
       // on: one seeded logit per query head (the page's setter draws them)
       R"({"label": "sinks", "kind": "toggle", "on": true})"},
      {"dropout", [](const Problem& p) { return p.dropout.has_value(); }, read_dropout, nullptr,
       [](const Problem& p) {
         return nlohmann::ordered_json{{"p", p.dropout->p}, {"seed", p.dropout->seed}};
       },
       [](const Problem& p) {
         return nlohmann::ordered_json{{"p", p.dropout->p},
                                       {"seed", p.dropout->seed},
                                       {"generator", "Philox4x32-10"},
                                       {"counter", "(key, query, head, batch)"},
                                       {"key", "(seed & 0xffffffff, seed >> 32)"},
                                       {"keep", "first word >= floor(p · 2^32)"}};
       },
       HeaderPlace::scores,
       [](const Problem& p) {
         return fmt::format(
             "p = {}, seed {}: each weight kept with probability {} and scaled by 1/(1 - p), by a "
             "Philox4x32-10 keep mask",
             p.dropout->p, p.dropout->seed, 1 - p.dropout->p);
       },
       R"({"label": "dropout", "kind": "fields", "fields": [{"name": "p", "label": "dropout p"},)"
       R"( {"name": "seed", "label": "seed", "default": 0}]})"},
      {"model", [](const Problem& p) { return p.model.layers.has_value() || p.model.context_length.has_value(); },
       read_model, nullptr,
       [](const Problem& p) {
         nlohmann::ordered_json model = nlohmann::ordered_json::object();
         if (p.model.layers) model["layers"] = *p.model.layers;
         if (p.model.context_length) model["context_length"] = *p.model.context_length;
         return model;
       },
       nullptr, HeaderPlace::scores, nullptr, ""},
  }};
  return table;
}

}  // namespace

std::vector<std::string_view> feature_keys() {
  std::vector<std::string_view> keys;
  for (const Feature& f : features()) keys.push_back(f.key);
  return keys;
}

void read_features(const JsonReader& reader, const nlohmann::json& root, Problem& p) {
  for (const Feature& f : features())
    if (root.contains(f.key)) f.read(reader, root.at(f.key), p);
}

void check_feature_values(const Problem& p, const FeatureValues& check) {
  for (const Feature& f : features())
    if (f.values != nullptr && f.present(p)) f.values(p, check);
}

void write_feature_inputs(const Problem& p,
                          const std::function<void(std::string_view key, const nlohmann::ordered_json&)>& put) {
  for (const Feature& f : features())
    if (f.present(p)) put(f.key, f.input(p));
}

void write_feature_config(const Problem& p, nlohmann::ordered_json& config) {
  for (const Feature& f : features())
    if (f.config != nullptr && f.present(p)) config[std::string(f.key)] = f.config(p);
}

std::string feature_controls_json() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Feature& f : features()) {
    if (f.control.empty()) continue;
    nlohmann::ordered_json control = {{"key", std::string(f.key)}};
    const nlohmann::ordered_json described = nlohmann::ordered_json::parse(f.control);
    for (const auto& item : described.items()) control[item.key()] = item.value();
    out.push_back(std::move(control));
  }
  return out.dump();
}

std::vector<std::pair<std::string_view, std::string>> feature_header(const Problem& p, HeaderPlace place) {
  std::vector<std::pair<std::string_view, std::string>> lines;
  for (const Feature& f : features())
    if (f.header != nullptr && f.place == place && f.present(p)) lines.emplace_back(f.key, f.header(p));
  return lines;
}

}  // namespace attn
