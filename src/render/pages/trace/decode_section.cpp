// decode in the terminal: the prefill's steps, each decode step's (with its cache, its chunks and its pages),
// what the cache costs, and the check of every row against the causal pass with compare's verdict.

#include "render/pages/trace/renderer.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "text/visible.hpp"
#include "text/number.hpp"
#include "trace/decode.hpp"

namespace attn::render_detail {

namespace {

std::string plural(std::size_t count, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", count, count == 1 ? one : many);
}

}  // namespace

std::string Renderer::steps_only(std::string_view heading_name) {
  if (!heading_name.empty()) {
    line("");
    heading(heading_name);
  }
  for (const StepRecord& rec : t_.steps) step(rec);
  return std::move(out_);
}

std::string Renderer::named_step(const StepRecord& rec, std::string_view name) {
  step(rec, name);
  return std::move(out_);
}

void Renderer::decode_section() {
  const DecodeRecord& d = *t_.decode;
  const std::vector<std::string>& tokens = p_.tokens[0];
  const std::size_t N = d.plan.prompt;
  line("");
  heading("decode");
  const std::string prompt =
      N == 0 ? "no prompt: every token is decoded one at a time, the first against a cache of itself alone"
             : fmt::format("prompt {} ({}), run as one causal pass (prefill) whose keys and values fill the cache",
                           token_list(std::vector<std::string>(tokens.begin(), tokens.begin() + static_cast<long>(N))),
                           plural(N, "token", "tokens"));
  para(fmt::format("{}; then {} decoded one at a time, each one row of attention against every key so far.", prompt,
                   plural(p_.n - N, "token", "tokens")),
       "");
  if (d.plan.split > 1)
    para(fmt::format("--split-kv {}: flash-decoding. The cache is cut into {} chunks; each chunk's softmax and "
                     "weighted sum are done on their own (on a GPU, in parallel), keeping the chunk's log-sum-exp, "
                     "and the chunks merge exactly: lse = log Σ exp(lse_s), o = Σ exp(lse_s − lse)·o_s.",
                     d.plan.split, d.plan.split),
         "");
  if (d.plan.page_size > 0)
    para(fmt::format("--page-size {}: a paged cache, as vLLM keeps it. Keys and values live in pages of {} drawn "
                     "from one pool{} in a seeded order (seed {}); a block table maps each sequence's logical page "
                     "to its physical one.",
                     d.plan.page_size, plural(d.plan.page_size, "token", "tokens"),
                     p_.batched ? fmt::format(" that the {} sequences share", p_.B) : "", d.plan.page_seed),
         "");
  cache_cost_lines(d);

  if (d.prefill) {
    out_ += Renderer(*d.prefill, o_).steps_only(fmt::format("prefill: {}", plural(N, "token", "tokens")));
    line("");
    para(
        "The prompt's keys and values, as the scores read them (k_rot with RoPE, else k_heads, and v_heads), are "
        "the cache's first rows.",
        "", /*faint=*/true);
  }
  // Past 2·decode_ends steps the terminal shows the first and last few: the check below lists every one.
  const std::size_t count = d.steps.size();
  const auto shown = [count](std::size_t k) {
    return count <= 2 * decode_ends || k < decode_ends || k >= count - decode_ends;
  };
  for (std::size_t k = 0; k < count; ++k) {
    if (!shown(k)) {
      if (k == decode_ends) {
        line("");
        para(
            fmt::format("… {} more decode steps, not printed: the check below has every one; --json OUT keeps them all",
                        count - 2 * decode_ends),
            "");
      }
      continue;
    }
    decode_step(d.steps[k]);
  }
  decode_check(d);
}

void Renderer::cache_cost_lines(const DecodeRecord& d) {
  const CacheCost c = cache_cost(p_, t_.dtype);
  line("");
  const std::string formula = p_.d_k == p_.d_v
                                  ? fmt::format("2 · {} · {} · {}", p_.g, p_.d_k, c.value_bytes)
                                  : fmt::format("{} · ({} + {}) · {}", p_.g, p_.d_k, p_.d_v, c.value_bytes);
  para(fmt::format("cache: {} per token and layer = {} ({} key/value head{} of d_k = {}, {} bytes a value in {})",
                   describe_bytes(c.per_token), formula, p_.g, p_.g == 1 ? "" : "s", p_.d_k, c.value_bytes,
                   name_of(t_.dtype)),
       "    ");
  if (p_.g < p_.h)
    para(fmt::format("{} keeps {} key/value head{} for {} query heads: {} per token where {} heads would keep {}, "
                     "{} less",
                     p_.g == 1 ? "multi-query attention" : "grouped-query attention", p_.g, p_.g == 1 ? "" : "s", p_.h,
                     describe_bytes(c.per_token), p_.h, describe_bytes(c.per_token_mha),
                     fmt::format("{}×", p_.h / p_.g)),
         "    ");
  const std::uint64_t whole = static_cast<std::uint64_t>(c.per_token) * p_.n * p_.B;
  const std::string sequences = p_.batched ? fmt::format(" in each of {} sequences", p_.B) : "";
  if (d.layers) {
    const std::uint64_t per_token = static_cast<std::uint64_t>(c.per_token) * *d.layers;
    para(fmt::format("the whole model, {} layers: {} per token; {} tokens{} need {}", *d.layers,
                     describe_bytes(per_token), p_.n, sequences, describe_bytes(whole * *d.layers)),
         "    ");
    if (d.context_length)
      para(fmt::format("at its context length of {} tokens{}: {}", *d.context_length, sequences,
                       describe_bytes(per_token * *d.context_length * p_.B)),
           "    ");
  } else
    para(fmt::format("{} tokens{} fill {} in this layer (--layers N: the whole model)", p_.n,
                     p_.batched ? fmt::format(" in each of {} sequences", p_.B) : "", describe_bytes(whole)),
         "    ", /*faint=*/true);
}

void Renderer::decode_step(const DecodeStepRecord& s) {
  const std::string token = label(p_.tokens[0][s.position]);
  out_ += Renderer(s.token, o_)
              .steps_only(fmt::format("decode step: {} (position {}, cache {} → {})", token, s.position,
                                      s.cache_length - 1, s.cache_length));
  // The cache, as the row's scores and weighted sum read it: a step of the row's problem, named as the trace names it.
  const Trace& a = s.attend;
  const Step keys = p_.rope ? Step::k_rot : Step::k_heads;
  const StepRecord k_cache{keys, fmt::format("K_cache = [K_cache; {}]", p_.rope ? "k_rot" : "k_heads"),
                           fmt::format("every key so far, {} of them: the cache after {}'s key was appended{}",
                                       s.cache_length, token, p_.rope ? " (each turned at its own position)" : ""),
                           s.k_cache};
  const StepRecord v_cache{Step::v_heads, "V_cache = [V_cache; v_heads]",
                           fmt::format("every value so far: the cache after {}'s value was appended", token),
                           s.v_cache};
  out_ += Renderer(a, o_).named_step(k_cache, "k_cache");
  out_ += Renderer(a, o_).named_step(v_cache, "v_cache");
  // With a split, the chunks and their merge stand where the weights would: after the masked scores.
  Trace before = a, after = a;
  std::erase_if(before.steps, [](const StepRecord& r) { return r.step >= Step::weights; });
  std::erase_if(after.steps, [](const StepRecord& r) { return r.step < Step::weights; });
  out_ += Renderer(before, o_).steps_only("");
  if (s.split) split_lines(s);
  out_ += Renderer(after, o_).steps_only("");
  if (s.pages) page_lines(s);
  line("");
  const CacheCost c = cache_cost(p_, t_.dtype);
  const std::string same = s.bit_exact
                               ? "bit for bit: the same sums in the same order (the keys after it are −∞ there and "
                                 "add exactly 0)"
                               : fmt::format(
                                     "max |Δ| = {}: the merge sums in another order, so the last bits may "
                                     "differ (the verdict below)",
                                     sci(s.max_abs));
  para(fmt::format("{}'s output row = run's causal pass's row, {}. The cache now holds {} = {}.", token, same,
                   plural(s.cache_length, "token", "tokens"),
                   describe_bytes(static_cast<std::uint64_t>(c.per_token) * s.cache_length * p_.B)),
       "  ");
}

void Renderer::split_lines(const DecodeStepRecord& s) {
  const SplitRecord& sp = *s.split;
  const std::size_t S = sp.chunks.size(), d_v = p_.d_v;
  line("");
  heading("split");
  std::vector<std::string> ranges;
  for (const auto& [b0, b1] : sp.chunks)
    ranges.push_back(b0 == b1       ? "(empty)"
                     : b1 - b0 == 1 ? label(p_.tokens[0][b0])
                                    : fmt::format("{}…{}", label(p_.tokens[0][b0]), label(p_.tokens[0][b1 - 1])));
  para(fmt::format("the cache of {} cut into {} chunks: {}. Each chunk s gives its own output o_s (its softmax "
                   "and weighted sum alone) and lse_s = log Σ exp(its scores); the merge weighs each by "
                   "exp(lse_s − lse), lse = log Σ_s exp(lse_s)",
                   s.cache_length, S, fmt::join(ranges, " | ")),
       "");
  const std::size_t B = p_.B;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < p_.h; ++hd) {
      std::vector<double> values;
      std::vector<std::string> rows, cols;
      for (std::size_t k = 0; k < S; ++k) {
        rows.push_back(fmt::format("chunk {}", k));
        const std::size_t at = (b * p_.h + hd) * S + k;
        for (std::size_t c = 0; c < d_v; ++c) values.push_back(sp.o.values()[at * d_v + c]);
        values.push_back(sp.lse.values()[at]);
        values.push_back(sp.share.values()[at]);
      }
      rows.emplace_back("merged");
      // the merged row: the head's output as the merge made it (head_outputs), its lse, and the shares' sum
      const StepRecord* merged = find_step(s.attend, Step::head_outputs);
      double shares = 0;
      for (std::size_t k = 0; k < S; ++k) shares += sp.share.values()[(b * p_.h + hd) * S + k];
      for (std::size_t c = 0; c < d_v; ++c)
        values.push_back(merged != nullptr ? merged->value.values()[(b * p_.h + hd) * d_v + c] : 0.0);
      values.push_back(sp.merged_lse.values()[b * p_.h + hd]);
      values.push_back(shares);
      for (std::size_t c = 0; c < d_v; ++c) cols.push_back(fmt::format("o {}", c));
      cols.emplace_back("lse");
      cols.emplace_back("share");
      const std::string caption = p_.batched ? fmt::format("batch {}, head {}", b, hd) : fmt::format("head {}", hd);
      table(TableData{values, S + 1, d_v + 2, rows, cols, caption});
    }
  para(p_.sinks.empty() ? "An empty chunk has lse = −∞ and no share. The merged row is head_outputs below."
                        : "The sink is one more chunk, of output 0: the shares sum to 1 minus its share "
                          "(sink_weights below). The merged row is head_outputs below.",
       "  ", /*faint=*/true);
}

void Renderer::page_lines(const DecodeStepRecord& s) {
  const PageRecord& pg = *s.pages;
  const CacheCost c = cache_cost(p_, t_.dtype);
  line("");
  heading("pages");
  for (std::size_t b = 0; b < pg.tables.size(); ++b) {
    std::vector<std::string> entries;
    for (std::size_t k = 0; k < pg.tables[b].size(); ++k) entries.push_back(fmt::format("{}→{}", k, pg.tables[b][k]));
    para(fmt::format("{}block table (logical page → physical page): {}", p_.batched ? fmt::format("batch {}: ", b) : "",
                     fmt::join(entries, ", ")),
         "    ");
  }
  const std::size_t j = s.position;  // the key just appended
  const std::size_t page = pg.tables[0][j / pg.page_size];
  para(fmt::format("{}'s key and value (key {}) live in logical page {} = ⌊{} / {}⌋, slot {} = {} mod {}: physical "
                   "page {} of the pool.",
                   label(p_.tokens[0][j]), j, j / pg.page_size, j, pg.page_size, j % pg.page_size, j, pg.page_size,
                   page),
       "    ");
  const std::uint64_t per_page = static_cast<std::uint64_t>(c.per_token) * pg.page_size;
  const std::uint64_t reserved = per_page * pg.pages_in_use;
  const std::uint64_t used = static_cast<std::uint64_t>(c.per_token) * s.cache_length * p_.B;
  para(fmt::format("pool: {} of {} pages in use; reserved {}, used {}, {} waiting in the last page{} to be filled",
                   pg.pages_in_use, pg.pool_pages, describe_bytes(reserved), describe_bytes(used),
                   describe_bytes(reserved - used), p_.batched ? "s" : ""),
       "    ");
}

void Renderer::decode_check(const DecodeRecord& d) {
  const CompareRecord& c = d.check;
  line("");
  heading("check");
  para(fmt::format("each decoded row against the same row of run's causal pass on the whole input, in {}; and the "
                   "whole output against a reference, naive attention in {} on the same inputs, by compare's rule "
                   "with decode in flash's place",
                   name_of(t_.dtype), reference_name(t_.dtype)),
       "");
  line("");
  const CacheCost cost = cache_cost(p_, t_.dtype);
  line("  {}  {:>8}  {:>12}  {}", pad_right("token", label_width), "cache", "cache bytes", "output row vs run");
  for (std::size_t i = 0; i < d.plan.prompt; ++i)
    line("  {}  {:>8}  {:>12}  {}", pad_right(label(p_.tokens[0][i]), label_width), "prefill", "", "the same pass");
  for (const DecodeStepRecord& s : d.steps)
    line("  {}  {:>8}  {:>12}  {}", pad_right(label(p_.tokens[0][s.position]), label_width), s.cache_length,
         describe_bytes(static_cast<std::uint64_t>(cost.per_token) * s.cache_length * p_.B),
         s.bit_exact ? "bit for bit" : fmt::format("max |Δ| = {}", sci(s.max_abs)));
  line("");
  const auto stats_row = [&](std::string_view name, const ErrorStats& e) {
    line("  {}  {:>11}  {:>11}  {:>8}", pad_right(name, 15), sci(e.max_abs), sci(e.max_rel), e.max_ulp);
  };
  line("  {}  {:>11}  {:>11}  {:>8}", pad_right("", 15), "max |error|", "max rel", "max ULP");
  stats_row("run vs ref", c.naive_vs_ref);
  stats_row("decode vs ref", c.flash_vs_ref);
  stats_row("decode vs run", c.flash_vs_naive);
  line("");
  const std::string rule_text =
      fmt::format("max|decode − ref| = {} {} 2·max|run − ref| + noise = 2·{} + {} = {}", sci(c.flash_vs_ref.max_abs),
                  c.pass ? "<=" : ">", sci(c.naive_vs_ref.max_abs), sci(c.noise), sci(c.bound));
  para(fmt::format("  {}  {}", c.pass ? style_.title("verdict: PASS") : style_.warning("verdict: FAIL"), rule_text),
       "    ");
}

}  // namespace attn::render_detail
