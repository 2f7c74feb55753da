#include "io/explain_json.hpp"

#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "json/json_number.hpp"

namespace attn {

namespace {

using ojson = nlohmann::ordered_json;  // keeps the keys in the order the header lists them

ojson numbers(std::span<const double> xs) {
  ojson out = ojson::array();
  for (const double x : xs) out.push_back(json_number(x));
  return out;
}

ojson sum(const ProductSum& s) {
  return {{"a", numbers(s.a)},
          {"b", numbers(s.b)},
          {"terms", numbers(s.terms)},
          {"bias", s.bias ? json_number(*s.bias) : ojson(nullptr)},
          {"value", json_number(s.value)}};
}

ojson sums(const std::vector<ProductSum>& list) {
  ojson out = ojson::array();
  for (const ProductSum& s : list) out.push_back(sum(s));
  return out;
}

ojson header(const std::string& generator, const char* kind, DType dtype, Engine engine) {
  return {{"format", "attn-trace.explain"},
          {"version", explain_format_version},
          {"generator", generator},
          {"kind", kind},
          {"dtype", std::string(name_of(dtype))},
          {"engine", std::string(name_of(engine))}};
}

ojson flash_json(const FlashExplanation& f) {
  ojson tiles = ojson::array();
  for (const FlashTileStep& t : f.steps)
    tiles.push_back({{"j", t.tile},
                     {"col_begin", t.col_begin},
                     {"col_end", t.col_end},
                     {"skipped", t.skipped},
                     {"m_prev", json_number(t.m_prev)},
                     {"m_new", json_number(t.m_new)},
                     {"alpha", json_number(t.alpha)},
                     {"l_prev", json_number(t.l_prev)},
                     {"l_new", json_number(t.l_new)},
                     {"s", numbers(t.s)},
                     {"p", numbers(t.p)},
                     {"share", json_number(t.share)}});
  return {{"block_q", f.tile_size.Br},
          {"block_k", f.tile_size.Bc},
          {"query_tile", f.query_tile},
          {"row_begin", f.row_begin},
          {"row_end", f.row_end},
          {"key_tile", f.key_tile},
          {"tiles", std::move(tiles)},
          {"s", json_number(f.s)},
          {"p", json_number(f.p)},
          {"later_alphas", numbers(f.later_alphas)},
          {"alpha_product", json_number(f.alpha_product)},
          {"l", json_number(f.l)},
          {"weight", json_number(f.weight)},
          {"naive_weight", json_number(f.naive_weight)},
          {"tolerance", json_number(f.tolerance)},
          {"within", f.within}};
}

}  // namespace

std::string explanation_to_json(const Explanation& e, const std::string& generator) {
  ojson out = header(generator, "weight", e.dtype, e.engine);
  out["batch"] = e.batch;
  out["head"] = e.head;
  out["kv_head"] = e.kv_head;
  out["query"] = e.query;
  out["key"] = e.key;
  out["query_token"] = e.query_token;
  out["key_token"] = e.key_tokens.at(e.key);
  out["inputs"] = {{"x", numbers(e.x)}, {"c", numbers(e.c)}};
  out["q"] = sums(e.q);
  out["k"] = sums(e.k);
  out["score"] = sum(e.dot);
  out["scale"] = json_number(e.scale);
  out["scaled"] = json_number(e.scaled);
  if (!e.q_rot.empty())
    out["rope"] = {{"position_query", e.pos_q},
                   {"position_key", e.pos_k},
                   {"theta_i", numbers(e.theta)},
                   {"q_rot", numbers(e.q_rot)},
                   {"k_rot", numbers(e.k_rot)}};
  // each stage between the scale and the mask: the cap and ALiBi with their own numbers, any other by its
  // step's name with the score after it
  for (const StageValue& s : e.stages) {
    if (s.stage == Stage::softcap && e.softcap)
      out["softcap"] = {{"cap", json_number(*e.softcap)}, {"capped", json_number(s.value)}};
    else if (s.stage == Stage::alibi && e.alibi)
      out["alibi"] = {{"slope", json_number(e.slope)},
                      {"position_query", e.alibi_pos_q},
                      {"position_key", e.alibi_pos_k},
                      {"bias", json_number(*e.alibi)},
                      {"biased", json_number(s.value)}};
    else out[std::string(s.step)] = {{"value", json_number(s.value)}};
  }
  out["mask"] = {{"kind", e.mask}, {"allowed", e.allowed}, {"reason", e.mask_reason}, {"empty_row", e.empty_row}};
  ojson keys = ojson::array();
  for (std::size_t k = 0; k < e.row.size(); ++k) {
    const SoftmaxEntry& x = e.row[k];
    keys.push_back({{"key", k},
                    {"token", e.key_tokens.at(k)},
                    {"allowed", x.allowed},
                    {"scaled", json_number(x.scaled)},
                    {"shifted", json_number(x.shifted)},
                    {"exp", json_number(x.exp)},
                    {"weight", json_number(x.weight)}});
  }
  out["softmax"] = {{"keys", std::move(keys)},
                    {"max", json_number(e.row_max)},
                    {"argmax", e.argmax},
                    {"sum", json_number(e.row_sum)},
                    {"weight", json_number(e.weight)}};
  out["flash"] = e.flash ? flash_json(*e.flash) : ojson(nullptr);
  out["output"] = {{"v", numbers(e.v)}, {"o", sums(e.o)}};
  return out.dump(2) + "\n";
}

std::string output_explanation_to_json(const OutputExplanation& e, const std::string& generator) {
  ojson out = header(generator, "output", e.dtype, e.engine);
  out["batch"] = e.batch;
  out["query"] = e.query;
  out["column"] = e.column;
  out["query_token"] = e.query_token;
  out["output_projection"] = e.output_projection;
  out["y"] = sum(e.y);
  out["head_sums"] = numbers(e.head_sums);
  out["top"] = e.top;
  out["head"] = e.output_projection ? ojson(nullptr) : ojson(e.head);
  out["feature"] = e.output_projection ? ojson(nullptr) : ojson(e.feature);
  return out.dump(2) + "\n";
}

}  // namespace attn

namespace attn {

std::string gradient_explanation_to_json(const GradientExplanation& e, const std::string& generator) {
  ojson j = header(generator, "gradient", e.dtype, Engine::naive);
  ojson terms = ojson::array();
  for (const GradientTerm& t : e.terms)
    terms.push_back({{"a_name", t.a_name},
                     {"a", json_number(t.a)},
                     {"b_name", t.b_name},
                     {"b", json_number(t.b)},
                     {"product", json_number(t.product)}});
  const std::string_view upstream = e.upstream == Upstream::input    ? "input"
                                    : e.upstream == Upstream::seeded ? "grad_seed"
                                                                     : "ones";
  j["step"] = std::string(step_info(e.step).name);
  j["index"] = e.index;
  j["where"] = e.where;
  j["dY"] = std::string(upstream);
  j["grad_seed"] = e.upstream == Upstream::seeded ? ojson(e.grad_seed) : ojson(nullptr);
  j["formula"] = e.formula;
  j["sum"] = e.sum;
  j["terms"] = std::move(terms);
  j["finish"] = e.finish;
  j["recomputed"] = json_number(e.recomputed);
  j["value"] = json_number(e.value);
  j["notes"] = e.notes;
  return j.dump(2) + "\n";
}

}  // namespace attn
