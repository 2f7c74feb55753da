// The report's decode section (attn-trace decode --report): the cache growing token by token, each decode
// step's row of weights against it, the split's chunks and their merge, the block table, and the check with
// compare's verdict. Plain HTML tables: it reads without scripts.

#include <string>
#include <vector>

#include <fmt/format.h>

#include "render/pages/report/html.hpp"
#include "render/pages/report/sections.hpp"
#include "render/pages/report/writer.hpp"
#include "trace/decode.hpp"

namespace attn::report_detail {

namespace {

// The panels of a step of `part` (a decode step's own problem) named `rec`, as static tables.
std::string tables_of(const Trace& part, const StepRecord& rec, std::size_t limit) {
  std::string out;
  for (const Panel& panel : panels(part, rec)) out += static_table(panel, limit);
  return out;
}

std::string split_tables(const Problem& p, const DecodeStepRecord& s, std::size_t limit) {
  const SplitRecord& sp = *s.split;
  const std::size_t S = sp.chunks.size(), d_v = p.d_v;
  std::vector<std::string> rows;
  for (const auto& [b0, b1] : sp.chunks)
    rows.push_back(b0 == b1       ? std::string("(empty)")
                   : b1 - b0 == 1 ? p.tokens[0][b0]
                                  : fmt::format("{}…{}", p.tokens[0][b0], p.tokens[0][b1 - 1]));
  std::vector<std::string> cols;
  for (std::size_t c = 0; c < d_v; ++c) cols.push_back(fmt::format("o {}", c));
  cols.emplace_back("lse");
  cols.emplace_back("share");
  std::string out;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd) {
      std::vector<double> values;
      for (std::size_t k = 0; k < S; ++k) {
        const std::size_t at = (b * p.h + hd) * S + k;
        for (std::size_t c = 0; c < d_v; ++c) values.push_back(sp.o.values()[at * d_v + c]);
        values.push_back(sp.lse.values()[at]);
        values.push_back(sp.share.values()[at]);
      }
      out += static_matrix(p.batched ? fmt::format("batch {}, head {}", b, hd) : fmt::format("head {}", hd), values, S,
                           d_v + 2, rows, cols, limit);
    }
  return out;
}

std::string page_table(const Problem& p, const DecodeStepRecord& s, const CacheCost& cost) {
  const PageRecord& pg = *s.pages;
  std::string rows;
  std::size_t b = 0;
  for (const auto& table : pg.tables) {
    std::string cells;
    for (const auto physical : table) cells += fmt::format("<td>{}</td>", physical);
    rows += fmt::format("<tr><th>{}</th>{}</tr>", p.batched ? fmt::format("batch {}", b) : "physical page", cells);
    ++b;
  }
  std::string header = "<tr><th>logical page</th>";
  std::size_t widest = 0;
  for (const auto& t : pg.tables) widest = std::max(widest, t.size());
  for (std::size_t k = 0; k < widest; ++k) header += fmt::format("<th>{}</th>", k);
  header += "</tr>";
  const std::size_t reserved = pg.pages_in_use * pg.page_size * cost.per_token;
  const std::size_t used = s.cache_length * p.B * cost.per_token;
  return fmt::format("<h4>block table</h4><table class=\"block-table\">{}{}</table>", header, rows) +
         note(fmt::format("Pages of {} tokens from a pool of {}: {} in use, {} bytes reserved, {} used, {} waiting in "
                          "the last page{}.",
                          pg.page_size, pg.pool_pages, pg.pages_in_use, thousands(reserved), thousands(used),
                          thousands(reserved - used), p.batched ? "s" : ""));
}

}  // namespace

std::string ReportSections::decode_section() const {
  if (!t_.decode) return "";
  const DecodeRecord& d = *t_.decode;
  const CacheCost cost = cache_cost(p_, t_.dtype);
  std::string out = "<section id=\"decode\" class=\"decode\"><h2>decoding with a KV cache</h2>\n";
  out += note(fmt::format(
      "The prompt ({} token{}) ran as one causal pass whose keys and values filled the cache; each later token "
      "is one decode step: its own q, k and v, its key and value appended, its one row of attention against the "
      "whole cache.{}{} The cache holds {} bytes per token and layer ({} key/value head{} of d_k = {}, {} bytes a "
      "value).",
      d.plan.prompt, d.plan.prompt == 1 ? "" : "s",
      d.plan.split > 1 ? fmt::format(" Split into {} chunks (flash-decoding): each chunk's softmax on its own, "
                                     "merged by exp(lse_s − lse).",
                                     d.plan.split)
                       : "",
      d.plan.page_size > 0 ? fmt::format(" Paged: pages of {} tokens through a block table.", d.plan.page_size) : "",
      thousands(cost.per_token), p_.g, p_.g == 1 ? "" : "s", p_.d_k, cost.value_bytes));
  if (d.layers) {
    const std::size_t per_token = cost.per_token * *d.layers;
    out += note(fmt::format(
        "The whole model, {} layers: {} bytes per token; these {} tokens{} need {} bytes{}.", *d.layers,
        thousands(per_token), p_.n, p_.batched ? fmt::format(" in each of {} sequences", p_.B) : "",
        thousands(per_token * p_.n * p_.B),
        d.context_length ? fmt::format(", and its context length of {} tokens {} bytes", thousands(*d.context_length),
                                       thousands(per_token * *d.context_length * p_.B))
                         : ""));
  }
  // the cache growing, and each row's check
  std::string rows;
  for (std::size_t i = 0; i < d.plan.prompt; ++i)
    rows +=
        fmt::format("<tr><th>{}</th><td>prefill</td><td></td><td>the same pass</td></tr>", page_text(p_.tokens[0][i]));
  for (const DecodeStepRecord& s : d.steps)
    rows += fmt::format("<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td></tr>", page_text(p_.tokens[0][s.position]),
                        s.cache_length, thousands(cost.per_token * s.cache_length * p_.B),
                        s.bit_exact ? "bit for bit" : fmt::format("max |Δ| = {}", short_number(s.max_abs)));
  out += fmt::format(
      "<table class=\"decode-steps\"><caption>the cache, token by token, and each output row against "
      "run's causal pass</caption><tr><th>token</th><th>cache length</th><th>cache bytes</th>"
      "<th>output row vs run</th></tr>{}</table>\n",
      rows);
  for (const DecodeStepRecord& s : d.steps) {
    out += fmt::format("<section class=\"decode-step\" id=\"decode-{}\"><h3>{} (position {}, cache {} → {})</h3>\n",
                       s.position, page_text(p_.tokens[0][s.position]), s.position, s.cache_length - 1, s.cache_length);
    const Step keys = p_.rope ? Step::k_rot : Step::k_heads;
    out += "<h4>k_cache: every key so far</h4>" +
           tables_of(s.attend, {keys, "K_cache", "every key so far", s.k_cache}, o_.table_size);
    if (const StepRecord* row = find_step(s.attend, Step::weights))
      out += "<h4>weights: its row against the cache</h4>" + tables_of(s.attend, *row, o_.table_size);
    if (s.split)
      out += "<h4>the chunks: each one's output o_s, lse_s and its share exp(lse_s − lse)</h4>" +
             split_tables(p_, s, o_.table_size);
    if (const StepRecord* y = find_step(s.attend, Step::output))
      out += "<h4>output: its row</h4>" + tables_of(s.attend, *y, o_.table_size);
    if (s.pages) out += page_table(p_, s, cost);
    out += "</section>\n";
  }
  const CompareRecord& c = d.check;
  out += note(fmt::format(
      "compare's rule with decode in flash's place: <b class=\"{}\">{}</b>: max |decode − ref| = {} {} 2 · max |run − "
      "ref| + noise = 2 · {} + {} = {} (ref: naive attention in {})",
      c.pass ? "pass" : "fail", c.pass ? "pass" : "fail", short_number(c.flash_vs_ref.max_abs), c.pass ? "≤" : ">",
      short_number(c.naive_vs_ref.max_abs), short_number(c.noise), short_number(c.bound), reference_name(c.dtype)));
  return out + "</section>\n";
}

}  // namespace attn::report_detail
