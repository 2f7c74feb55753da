// A decode's `decode` object of the trace (docs/trace-format.md, "Decoding: decode").

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/text_writer.hpp"
#include "trace/decode.hpp"

namespace attn {

namespace {

using ojson = nlohmann::ordered_json;

std::string number(double x) {
  std::string out;
  append_trace_number(out, x, false);
  return out;
}

void write_tensor(TextWriter& w, std::string_view name, const Tensor<double>& t, bool float32, int indent,
                  bool first = false) {
  w.key(name, indent, first);
  w.append("{");
  w.key("shape", indent + 2, true);
  w.value(ojson(t.shape()), indent + 2);
  w.key("data", indent + 2, false);
  w.data(t, float32, indent + 2);
  w.append("\n");
  w.pad(indent);
  w.append("}");
}

void write_split(TextWriter& w, const SplitRecord& s, bool float32) {
  w.key("split", 8, false);
  w.append("{");
  w.key("chunks", 10, true);
  ojson chunks = ojson::array();
  for (const auto& [begin, end] : s.chunks) chunks.push_back({begin, end});
  w.value(chunks, 10);
  write_tensor(w, "o", s.o, float32, 10);
  write_tensor(w, "lse", s.lse, float32, 10);
  write_tensor(w, "share", s.share, float32, 10);
  write_tensor(w, "lse_merged", s.merged_lse, float32, 10);
  w.append("\n        }");
}

void write_pages(TextWriter& w, const PageRecord& pg, const DecodeStepRecord& s, const CacheCost& cost, std::size_t B) {
  const std::size_t reserved = pg.pages_in_use * pg.page_size * cost.per_token;
  const std::size_t used = s.cache_length * B * cost.per_token;
  w.key("pages", 8, false);
  w.value(ojson{{"page_size", pg.page_size},
                {"pool_pages", pg.pool_pages},
                {"pages_in_use", pg.pages_in_use},
                {"block_tables", pg.tables},
                {"reserved_bytes", reserved},
                {"used_bytes", used}},
          8);
}

// One decode step: its token, its cache's length, its steps with k_cache and v_cache among them, its chunks,
// its pages and its row's check.
void write_decode_step(TextWriter& w, const Trace& t, const DecodeStepRecord& s, bool first_step) {
  const Problem& p = *t.problem;
  const bool float32 = computes_in_float32(t.dtype);
  const CacheCost cost = cache_cost(p, t.dtype);
  w.append(first_step ? "\n      {" : ",\n      {");
  w.key("position", 8, true);
  w.append(fmt::format("{}", s.position));
  w.key("token", 8, false);
  w.append(ojson(p.tokens[0][s.position]).dump());
  w.key("cache_length", 8, false);
  w.append(fmt::format("{}", s.cache_length));
  w.key("steps", 8, false);
  w.append("[");
  bool first = true;
  const auto step = [&](const StepRecord& rec, const Problem& of, std::string_view name = {}) {
    w.append(first ? "\n          " : ",\n          ");
    first = false;
    write_step(w, rec, of, t.dtype, 10, name);
  };
  for (const StepRecord& rec : s.token.steps) step(rec, *s.token.problem);
  const Problem& row = *s.attend.problem;
  step({p.rope ? Step::k_rot : Step::k_heads, "K_cache = [K_cache; k]", "every key so far", s.k_cache}, row, "k_cache");
  step({Step::v_heads, "V_cache = [V_cache; v]", "every value so far", s.v_cache}, row, "v_cache");
  for (const StepRecord& rec : s.attend.steps) step(rec, row);
  w.append("\n        ]");
  if (s.split) write_split(w, *s.split, float32);
  if (s.pages) write_pages(w, *s.pages, s, cost, p.B);
  w.key("check", 8, false);
  w.append(fmt::format("{{\"bit_exact\": {}, \"max_abs\": {}}}", s.bit_exact, number(s.max_abs)));
  w.append("\n      }");
}

// The whole output's check: errors against the reference and compare's rule with decode in flash's place.
void write_decode_check(TextWriter& w, const DecodeRecord& d) {
  const CompareRecord& c = d.check;
  const auto stats = [](const ErrorStats& s) {
    return fmt::format("{{\"max_abs\": {}, \"max_rel\": {}, \"max_ulp\": {}}}", number(s.max_abs), number(s.max_rel),
                       s.max_ulp);
  };
  w.key("check", 4, false);
  w.append("{");
  w.key("reference", 6, true);
  w.append(ojson(fmt::format("naive attention in {} on the same inputs rounded to {}", reference_name(c.dtype),
                             name_of(c.dtype)))
               .dump());
  w.key("run_vs_reference", 6, false);
  w.append(stats(c.naive_vs_ref));
  w.key("decode_vs_reference", 6, false);
  w.append(stats(c.flash_vs_ref));
  w.key("decode_vs_run", 6, false);
  w.append(stats(c.flash_vs_naive));
  w.key("tolerance", 6, false);
  w.append(fmt::format(
      "{{\"rule\": \"max|decode - ref| <= 2 * max|run - ref| + noise\", \"decode_error\": {}, "
      "\"run_error\": {}, \"noise\": {}, \"bound\": {}, \"pass\": {}}}",
      number(c.flash_vs_ref.max_abs), number(c.naive_vs_ref.max_abs), number(c.noise), number(c.bound), c.pass));
  w.key("bit_exact", 6, false);
  bool all = true;
  for (const DecodeStepRecord& s : d.steps) all = all && s.bit_exact;
  w.append(all ? "true" : "false");
  w.append("\n    }");
}

}  // namespace

void write_decode(TextWriter& w, const Trace& t) {
  const DecodeRecord& d = *t.decode;
  const Problem& p = *t.problem;
  const CacheCost cost = cache_cost(p, t.dtype);
  const auto optional = [](std::size_t x) { return x == 0 ? ojson(nullptr) : ojson(x); };
  w.append("{");
  w.key("prompt", 4, true);
  w.append(fmt::format("{}", d.plan.prompt));
  w.key("split_kv", 4, false);
  w.append(optional(d.plan.split > 1 ? d.plan.split : 0).dump());
  w.key("page_size", 4, false);
  w.append(optional(d.plan.page_size).dump());
  w.key("page_seed", 4, false);
  w.append(d.plan.page_size == 0 ? "null" : fmt::format("{}", d.plan.page_seed));
  w.key("cache", 4, false);
  w.value(ojson{{"bytes_per_value", cost.value_bytes},
                {"bytes_per_token", cost.per_token},
                {"bytes_per_token_all_heads", cost.per_token_mha},
                {"layers", d.layers ? ojson(*d.layers) : ojson(nullptr)},
                {"bytes_whole_model", d.layers ? ojson(cost.per_token * *d.layers * p.n * p.B) : ojson(nullptr)},
                {"context_length", d.context_length ? ojson(*d.context_length) : ojson(nullptr)},
                {"bytes_whole_model_at_context", d.layers && d.context_length
                                                     ? ojson(cost.per_token * *d.layers * *d.context_length * p.B)
                                                     : ojson(nullptr)}},
          4);
  w.key("prefill", 4, false);
  if (d.prefill) {
    w.append("{");
    w.key("tokens", 6, true);
    w.append(fmt::format("{}", d.plan.prompt));
    w.key("steps", 6, false);
    write_steps(w, *d.prefill, 6);
    w.append("\n    }");
  } else {
    w.append("null");
  }
  w.key("steps", 4, false);
  w.append("[");
  for (std::size_t k = 0; k < d.steps.size(); ++k) write_decode_step(w, t, d.steps[k], k == 0);
  w.append(d.steps.empty() ? "]" : "\n    ]");
  write_decode_check(w, d);
  w.append("\n  }");
}

}  // namespace attn
