#include "render/pages/explain_page.hpp"

#include <algorithm>
#include <cmath>
#include <array>
#include <cstddef>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "render/draw/page.hpp"
#include "render/pages/explain_text.hpp"
#include "render/draw/text.hpp"
#include "text/visible.hpp"
#include "text/number.hpp"

namespace attn {

namespace explain_text {

namespace {

// ------------------------------------------------------------------ the sections of one weight

void inputs(Page& page, const Explanation& e, const Numbers& num) {
  const std::string source = e.cross ? "C" : "X";
  page.heading("1. the inputs");
  page.pieces({fmt::format("x = X[{}], the query {}:", e.query, token_in_quotes(e.query_token)), num.vector(e.x)});
  page.pieces({fmt::format("c = {}[{}], the {} {}:", source, e.key, e.cross ? "context token" : "key",
                           token_in_quotes(e.key_tokens[e.key])),
               num.vector(e.c)});
  const std::size_t q0 = e.head * e.d_k, k0 = e.kv_head * e.d_k, v0 = e.kv_head * e.d_v;
  paragraph(page,
            fmt::format("Head {} projects with columns {} of W_q; its key/value head {} with columns {} of W_k and {} "
                        "of W_v.",
                        e.head, range_text(q0, q0 + e.d_k - 1), e.kv_head, range_text(k0, k0 + e.d_k - 1),
                        range_text(v0, v0 + e.d_v - 1)));
  if (e.g < e.h) {
    const std::size_t share = e.h / e.g, first = e.kv_head * share;
    paragraph(page, fmt::format("{}: query heads {} share key/value head {} ({} query heads, {} key/value head{}).",
                                e.g == 1 ? "Multi-query attention" : "Grouped-query attention",
                                range_text(first, first + share - 1), e.kv_head, e.h, e.g, e.g == 1 ? "" : "s"));
  }
  page.line();
}

void projections(Page& page, const Explanation& e, const Numbers& num) {
  const bool q_bias = !e.q.empty() && e.q.front().bias, k_bias = !e.k.empty() && e.k.front().bias;
  page.heading(fmt::format("2. the query: q = x·W_q{}", q_bias ? " + b_q" : ""));
  components(page, e.q, num, [&](std::size_t c) {
    const std::size_t col = e.head * e.d_k + c;
    return fmt::format("q[{}] = x·W_q[:,{}]{} =", c, col, q_bias ? fmt::format(" + b_q[{}]", col) : "");
  });
  page.pieces({"q =", num.vector(values_of(e.q))});
  page.line();
  page.heading(fmt::format("3. the key: k = c·W_k{}", k_bias ? " + b_k" : ""));
  components(page, e.k, num, [&](std::size_t c) {
    const std::size_t col = e.kv_head * e.d_k + c;
    return fmt::format("k[{}] = c·W_k[:,{}]{} =", c, col, k_bias ? fmt::format(" + b_k[{}]", col) : "");
  });
  page.pieces({"k =", num.vector(values_of(e.k))});
  page.line();
}

void score(Page& page, const Explanation& e, const Numbers& num) {
  if (!e.q_rot.empty()) {
    page.heading("the positions: RoPE turns q and k");
    paragraph(page, fmt::format("Each pair of features {} turns by the angle pos·θ_i, θ_i = {:.4g}: the query at "
                                "position {}, the key at position {}. The score below reads the turned vectors, so "
                                "it depends on how far apart the two tokens are ({}), not on where they are.",
                                e.rope_pairs, fmt::join(e.theta, ", "), e.pos_q, e.pos_k, e.pos_q - e.pos_k));
    page.pieces({"q_rot =", num.vector(e.q_rot)});
    page.pieces({"k_rot =", num.vector(e.k_rot)});
    page.line();
  }
  page.heading(e.q_rot.empty() ? "4. the score: q·k" : "4. the score: q_rot·k_rot (written q·k below)");
  page.pieces(sum_pieces("q·k =", e.dot, num));
  page.line();
  page.heading("5. the scale");
  if (e.scale_given)
    page.pieces({"s = q·k · scale =", fmt::format("{}·{}", num.factor(e.dot.value), num.factor(e.scale)),
                 fmt::format("= {}", num(e.scaled))});
  else
    page.pieces({fmt::format("s = q·k / √{} =", e.d_k),
                 fmt::format("{}·{}", num.factor(e.dot.value), num.factor(e.scale)),
                 fmt::format("= {}", num(e.scaled))});
  paragraph(page, e.scale_given
                      ? "The input sets the scale."
                      : "Dividing by √d_k keeps the scores' spread near 1 whatever d_k, so that softmax does not "
                        "saturate (attn-trace scaling measures it).");
  // each stage between the scale and the mask, in the chain's order: the cap and ALiBi in words of their
  // own, any other by its step's formula; each reads the score the one before it left
  double before = e.scaled;
  for (const StageValue& s : e.stages) {
    if (s.stage == Stage::softcap && e.softcap) {
      page.pieces({"soft cap: c·tanh(s/c) =",
                   fmt::format("{}·tanh({}/{})", num.factor(*e.softcap), num.factor(before), num.factor(*e.softcap)),
                   fmt::format("= {}", num(s.value))});
      paragraph(page, fmt::format("The cap keeps every score within ±{}: about s while |s| is small, bent towards ±c "
                                  "as it grows (Gemma 2's logit soft-capping); from here on s means the capped score.",
                                  num(*e.softcap)));
    } else if (s.stage == Stage::alibi && e.alibi) {
      page.pieces({fmt::format("ALiBi: s + b, b = -{}·({} - {}) =", num.factor(e.slope), e.alibi_pos_q, e.alibi_pos_k),
                   fmt::format("{} + {}", num.factor(before), num.factor(*e.alibi)),
                   fmt::format("= {}", num(s.value))});
      paragraph(page, fmt::format("Head {}'s slope {} lowers a score in proportion to how far the key lies behind the "
                                  "query; from here on s means s + b.",
                                  e.head, num(e.slope)));
    } else {
      page.pieces(
          {fmt::format("{}: {}, from s =", s.step, s.formula), num.factor(before), fmt::format("= {}", num(s.value))});
      paragraph(page, fmt::format("From here on s means the {} score.", s.step));
    }
    before = s.value;
  }
  page.line();
}

void mask(Page& page, const Explanation& e, const Numbers& num) {
  page.heading("6. the mask");
  if (e.empty_row) {
    paragraph(page,
              fmt::format("The mask ({}) leaves query {} no key at all: every weight of its row is 0 and its head "
                          "output is 0, the one policy for rows with nothing to attend.",
                          e.mask, e.query));
  } else if (!e.allowed) {
    paragraph(page, fmt::format("The mask ({}) forbids this pair: {}. So s becomes -∞, and exp(-∞) = 0: a = 0 whatever "
                                "q·k is. The row below still shows how the keys it allows share query {}'s attention.",
                                e.mask, e.mask_reason, e.query));
  } else if (e.mask == "none") {
    paragraph(page,
              fmt::format("No mask: query {} may attend to every key, so s stays {}.", e.query, num(e.mask_input())));
  } else {
    paragraph(page, fmt::format("The mask ({}) allows query {} to see key {}, so s stays {}.", e.mask, e.query, e.key,
                                num(e.mask_input())));
  }
  page.line();
}

// The row's max, the sum of its exponentials and the key's weight, each as the terms that make it.
void softmax_sum(Page& page, const Explanation& e, const Numbers& num) {
  const std::size_t m = e.row.size();
  if (e.max_is_sink) page.pieces({fmt::format("max = {}, the sink", num(e.row_max))});
  else
    page.pieces(
        {fmt::format("max = {}, key {} {}", num(e.row_max), e.argmax, token_in_quotes(e.key_tokens[e.argmax]))});
  std::vector<std::string> parts = {"sum ="};
  std::vector<double> exps;
  if (e.sink) exps.push_back(e.sink_exp);  // the sink's term comes first, as the pass folds it in first
  for (const SoftmaxEntry& x : e.row)
    if (x.allowed) exps.push_back(x.exp);
  for (std::size_t t = 0; t < exps.size(); ++t) {
    if (exps.size() > most_terms && t == 4) {
      parts.push_back(fmt::format("+ …({} terms)…", exps.size() - 7));
      t = exps.size() - 3;
    }
    parts.push_back(fmt::format("{}{}", t == 0 ? "" : "+ ", num(exps[t])));
  }
  parts.push_back(fmt::format("= {}", num(e.row_sum)));
  if (exps.size() == 1) parts = {"sum =", num(e.row_sum)};
  page.pieces(parts);
  if (e.sink) paragraph(page, fmt::format("(the first term is the sink's, exp({} − max))", num(*e.sink)));
  if (exps.size() < m + (e.sink ? 1 : 0)) paragraph(page, "(masked keys add exp(-∞) = 0)");
  if (e.allowed)
    page.pieces({"a = exp(s − max) / sum =", fmt::format("{} / {}", num(e.row[e.key].exp), num(e.row_sum)),
                 fmt::format("= {}", num(e.weight))});
  else page.pieces({"a = 0 / sum =", fmt::format("0 / {}", num(e.row_sum)), fmt::format("= {}", num(e.weight))});
}

void softmax(Page& page, const Explanation& e, const Numbers& num, const RenderOptions& o) {
  page.heading(fmt::format("7. the softmax of row {} ({})", e.query, token_in_quotes(e.query_token)));
  if (e.sink)
    paragraph(page, fmt::format("a_j = exp(s_j − max) / (exp(sink − max) + Σ exp(s − max)): the head's sink ({}) is "
                                "one more logit in the max and the sum, of no value, so the row's weights sum to 1 − "
                                "a_sink; the row max is subtracted so exp never overflows.",
                                num(*e.sink)));
  else
    paragraph(page,
              "a_j = exp(s_j − max) / Σ exp(s − max): the row max is subtracted so exp never overflows, and the "
              "weights of the row sum to 1.");
  const std::string mark = o.unicode ? "←" : "<-";
  const std::size_t m = e.row.size();
  const std::vector<std::size_t> rows = rows_to_show(m, {e.key, e.argmax}, most_rows);
  // the table's cells: key, s, s − max, exp(s − max), a
  std::vector<std::array<std::string, 5>> cells;
  for (const std::size_t k : rows) {
    if (k == m) {
      cells.push_back({"…", "", "", "", ""});
      continue;
    }
    const SoftmaxEntry& x = e.row[k];
    cells.push_back({fmt::format("{} {}", k, cell_label(e.key_tokens[k], o)), num(x.scaled),
                     x.allowed ? num(x.shifted) : "masked", num(x.exp), num(x.weight)});
  }
  if (e.sink)  // the sink's row last: its logit, shifted, exp and share
    cells.push_back({"sink", num(*e.sink), num(*e.sink - e.row_max), num(e.sink_exp), num(e.sink_weight)});
  const std::array<std::string, 5> head = {"key", "s", "s − max", "exp(s − max)", "a"};
  std::array<std::size_t, 5> w{};
  for (std::size_t c = 0; c < 5; ++c) {
    w[c] = display_width(o.unicode ? head[c] : to_ascii(head[c]));
    for (const auto& row : cells) w[c] = std::max(w[c], display_width(o.unicode ? row[c] : to_ascii(row[c])));
  }
  const std::size_t total = 2 + w[0] + w[1] + w[2] + w[3] + w[4] + 8 + 3;
  const auto pad = [&](const std::string& text, std::size_t width, bool left) {
    const std::size_t used = display_width(o.unicode ? text : to_ascii(text));
    const std::string gap(width > used ? width - used : 0, ' ');
    return left ? text + gap : gap + text;
  };
  if (total <= o.width) {
    const auto table_row = [&](const std::array<std::string, 5>& row, bool marked) {
      page.line(fmt::format("  {}  {}  {}  {}  {}{}", pad(row[0], w[0], true), pad(row[1], w[1], false),
                            pad(row[2], w[2], false), pad(row[3], w[3], false), pad(row[4], w[4], false),
                            marked ? " " + mark : ""));
    };
    table_row(head, false);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (rows[r] == m) page.line("  …");
      else table_row(cells[r], rows[r] == e.key);
    }
    if (e.sink) table_row(cells.back(), false);
  } else {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (rows[r] == m) {
        page.line("  …");
        continue;
      }
      const auto& c = cells[r];
      paragraph(page,
                fmt::format("  {}: s = {}, s − max = {}, exp = {}, a = {}{}", c[0], c[1], c[2], c[3], c[4],
                            rows[r] == e.key ? " " + mark : ""),
                "      ");
    }
    if (e.sink) {
      const auto& c = cells.back();
      paragraph(page, fmt::format("  {}: s = {}, s − max = {}, exp = {}, a = {}", c[0], c[1], c[2], c[3], c[4]),
                "      ");
    }
  }
  if (const auto gaps = static_cast<std::size_t>(std::count(rows.begin(), rows.end(), m)); gaps != 0)
    page.line(fmt::format("  ({} of {} keys shown)", rows.size() - gaps, m));
  if (e.empty_row) {
    paragraph(page, "No key is allowed: there is no max, nothing to sum, and every weight is 0.");
    page.line();
    return;
  }
  softmax_sum(page, e, num);
  page.line();
}

// With dropout, what the keep mask does to the explained weight: kept and scaled, or dropped.
void dropped(Page& page, const Explanation& e, const Numbers& num) {
  if (!e.dropout) return;
  const double p = *e.dropout;
  if (e.kept)
    page.pieces({"dropout keeps it: a_drop = a / (1 − p) =",
                 fmt::format("{} / (1 − {})", num(e.flash ? e.flash->weight : e.weight), num.factor(p)),
                 fmt::format("= {}", num(e.dropped))});
  else page.pieces({"dropout drops it: a_drop =", "0"});
  paragraph(page, fmt::format(
                      "The keep mask is drawn from the seed and the place (batch {}, head {}, query {}, key {}) alone, "
                      "by Philox4x32-10, so every engine and the backward draw the same; each weight is kept with "
                      "probability {}. The head output below sums the dropped weights.",
                      e.batch, e.head, e.query, e.key, num.factor(1 - p)));
  page.line();
}

// The key's weight as the pass makes it: its p, rescaled by every later tile's alpha, over the final l;
// and how far that is from naive's.
void flash_weight(Page& page, const FlashExplanation& f, const Numbers& num) {
  std::vector<std::string> parts = {"this key's p times the later alphas:", num(f.p)};
  for (const double alpha : f.later_alphas) parts.push_back("· " + num.factor(alpha));
  parts.push_back(fmt::format("= {}", num(f.p * f.alpha_product)));
  if (f.later_alphas.size() > most_terms)
    parts = {"this key's p times the later alphas:", num(f.p), fmt::format("· …({} alphas)…", f.later_alphas.size()),
             fmt::format("= {}", num(f.p * f.alpha_product))};
  page.pieces(parts);
  page.pieces({"a = p·(later alphas) / l =", fmt::format("{} / {}", num(f.p * f.alpha_product), num(f.l)),
               fmt::format("= {}", num(f.weight))});
  paragraph(page,
            "Flash never forms a: it divides its running output O by l once at the end, which gives v_j this same "
            "factor.");
  const double gap = std::fabs(f.weight - f.naive_weight);
  paragraph(page, fmt::format("Naive's a = {}; |flash − naive| = {}, {} {} (what rounding alone allows here).",
                              num(f.naive_weight), gap == 0 ? "0" : significant_value(gap, 3),
                              f.within ? "within" : "NOT within", significant_value(f.tolerance, 3)));
}

void flash(Page& page, const Explanation& e, const Numbers& num) {
  const FlashExplanation& f = *e.flash;
  page.heading("7. the flash pass, tile by tile");
  const std::size_t k0 = f.key_tile * f.tile_size.Bc, k1 = std::min(e.row.size(), k0 + f.tile_size.Bc) - 1;
  paragraph(page,
            fmt::format("Tiles of {} × {} (queries × keys): query {} is in query tile {} ({} {}); key {} {} is in "
                        "key tile {} ({} {}). The pass never forms the whole row: per key tile it updates row {}'s "
                        "running max m and sum l.",
                        f.tile_size.Br, f.tile_size.Bc, e.query, f.query_tile,
                        f.row_end - f.row_begin == 1 ? "query" : "queries", range_text(f.row_begin, f.row_end - 1),
                        e.key, token_in_quotes(e.key_tokens[e.key]), f.key_tile, k0 == k1 ? "key" : "keys",
                        range_text(k0, k1), e.query));
  paragraph(page,
            "m_new = max(m_prev, the tile's scores); alpha = exp(m_prev − m_new), since the earlier tiles were summed "
            "against a smaller max; p = exp(s − m_new); l_new = alpha·l_prev + Σ p.");
  std::vector<std::size_t> keep;
  for (std::size_t t = 0; t < f.steps.size(); ++t)
    if (f.steps[t].tile == f.key_tile) keep = {t, t + 1 < f.steps.size() ? t + 1 : t};
  const std::vector<std::size_t> shown = rows_to_show(f.steps.size(), keep, most_rows);
  for (const std::size_t t : shown) {
    if (t == f.steps.size()) {
      page.line("  … (the tiles between rescale the same way)");
      continue;
    }
    const FlashTileStep& s = f.steps[t];
    const std::string keys = s.col_end - s.col_begin == 1
                                 ? fmt::format("key {} {}", s.col_begin, token_in_quotes(e.key_tokens[s.col_begin]))
                                 : fmt::format("keys {} to {}", s.col_begin, s.col_end - 1);
    if (s.skipped) {
      paragraph(page, fmt::format("key tile {}, {}: skipped, the mask leaves queries {} nothing there", s.tile, keys,
                                  range_text(f.row_begin, f.row_end - 1)));
      continue;
    }
    const bool here = s.tile == f.key_tile;
    paragraph(page, fmt::format("key tile {}, {}{}", s.tile, keys, here ? ": this key enters" : ""));
    page.pieces({"  s =", num.vector(s.s)}, "      ");
    double tile_max = -std::numeric_limits<double>::infinity();
    for (const double x : s.s) tile_max = std::max(tile_max, x);
    page.pieces({"  m =", fmt::format("max({}, {})", num(s.m_prev), num(tile_max)), fmt::format("= {}", num(s.m_new))},
                "      ");
    if (std::isinf(s.m_new))  // the row has seen only masked keys so far
      page.pieces({"  alpha = 1: no key allowed yet, nothing to rescale"}, "      ");
    else
      page.pieces(
          {"  alpha =", fmt::format("exp({} − {})", num(s.m_prev), num(s.m_new)),
           fmt::format("= {}{}", num(s.alpha), std::isinf(s.m_prev) ? ": nothing summed before to rescale" : "")},
          "      ");
    page.pieces({"  p = exp(s − m) =", num.vector(s.p)}, "      ");
    std::vector<std::string> l_parts = {"  l =", fmt::format("{}·{}", num.factor(s.alpha), num.factor(s.l_prev))};
    if (s.p.size() > most_terms) {
      double tile_sum = 0;
      for (const double p : s.p) tile_sum += p;
      l_parts.push_back(fmt::format("+ {} (Σ p of {} keys)", num(tile_sum), s.p.size()));
    } else {
      for (const double p : s.p) l_parts.push_back(fmt::format("+ {}", num(p)));
    }
    l_parts.push_back(fmt::format("= {}", num(s.l_new)));
    page.pieces(l_parts, "      ");
    if (here)
      page.pieces(
          {"  this key: p =", fmt::format("exp({} − {})", num(f.s), num(s.m_new)), fmt::format("= {}", num(f.p))},
          "      ");
    else if (s.tile > f.key_tile)
      page.pieces({"  this key so far:", fmt::format("{}·{}", num.factor(f.steps[t - 1].share), num.factor(s.alpha)),
                   fmt::format("= {}", num(s.share))},
                  "      ");
  }
  flash_weight(page, f, num);
  page.line();
}

void output(Page& page, const Explanation& e, const Numbers& num) {
  page.heading(fmt::format("8. the output of head {}: o = Σ_j {}·v_j", e.head, e.dropout ? "a_drop,j" : "a_j"));
  page.pieces({fmt::format("v_{} = v of {} =", e.key, token_in_quotes(e.key_tokens[e.key])), num.vector(e.v)});
  // the keys the mask forbids have weight 0 exactly: left out of the sums, said once
  std::vector<bool> allowed;
  allowed.reserve(e.row.size());
  for (const SoftmaxEntry& x : e.row) allowed.push_back(x.allowed);
  std::vector<ProductSum> sums;
  sums.reserve(e.o.size());
  for (const ProductSum& o : e.o) sums.push_back(only_terms(o, allowed));
  components(page, sums, num, [&](std::size_t c) { return fmt::format("o[{}] =", c); });
  if (std::find(allowed.begin(), allowed.end(), false) != allowed.end())
    paragraph(page, "(the keys the mask forbids have a = 0 and add nothing: left out)");
  page.pieces({"o =", num.vector(values_of(e.o))});
  const double a = e.dropout ? e.dropped : (e.flash ? e.flash->weight : e.weight);
  std::vector<double> share;
  share.reserve(e.v.size());
  for (const double v : e.v) share.push_back(a * v);
  std::vector<std::string> parts = {fmt::format("this key's share, a·v_{} =", e.key), num.vector(share) + ":"};
  if (a == 0) parts.emplace_back("(nothing)");
  else
    for (std::size_t c = 0; c < std::min<std::size_t>(share.size(), most_components); ++c)
      if (const std::string pct = num.percent(share[c], e.o[c].value); !pct.empty())
        parts.push_back(fmt::format("{} of o[{}]{}", pct, c,
                                    c + 1 < std::min<std::size_t>(share.size(), most_components) ? "," : ""));
  page.pieces(parts);
  const std::size_t first = e.head * e.d_v;
  const std::string place =
      e.h == 1 ? std::string("the only head") : fmt::format("head {}'s place among the {} heads", e.head, e.h);
  if (e.output_projection)
    paragraph(page,
              fmt::format("o is features {} of concat[{}], {}; the output projection Y[{}] = concat[{}]·W_o mixes "
                          "every feature of concat (--output C explains one number of it).",
                          range_text(first, first + e.d_v - 1), e.query, place, e.query, e.query));
  else
    paragraph(page, fmt::format("The input has no W_o: the output is concat itself, and o is Y[{}][{}].", e.query,
                                range_text(first, first + e.d_v - 1)));
}

}  // namespace

std::string explanation_page(const Explanation& e, std::string_view title, const RenderOptions& o) {
  Page page(o);
  const Numbers num(o.precision);
  page.heading(fmt::format("explain: how {} attends to {}", token_in_quotes(e.query_token),
                           token_in_quotes(e.key_tokens[e.key])));
  paragraph(page, visible(title));
  paragraph(page, fmt::format("query {} {}, key {} {}, {}", e.query, token_in_quotes(e.query_token), e.key,
                              token_in_quotes(e.key_tokens[e.key]), where(e)));
  const double a = e.flash ? e.flash->weight : e.weight;
  if (e.empty_row) paragraph(page, "a = 0: the mask leaves this query no key at all.");
  else if (!e.allowed) paragraph(page, fmt::format("a = 0: the mask forbids it ({}).", e.mask_reason));
  else
    paragraph(page,
              fmt::format("a = {}: {} gives {} of its attention in this head to {}.", num(a),
                          token_in_quotes(e.query_token), num.percent(a, 1), token_in_quotes(e.key_tokens[e.key])));
  page.line();
  inputs(page, e, num);
  projections(page, e, num);
  score(page, e, num);
  mask(page, e, num);
  if (e.flash) flash(page, e, num);
  else softmax(page, e, num, o);
  dropped(page, e, num);
  output(page, e, num);
  return page.take();
}

std::string output_explanation_page(const OutputExplanation& e, std::string_view title, const RenderOptions& o) {
  Page page(o);
  const Numbers num(o.precision);
  page.heading(fmt::format("explain: Y[{}][{}], the output of {}", e.query, e.column, token_in_quotes(e.query_token)));
  paragraph(page, visible(title));
  paragraph(page, fmt::format("query {} {}, output column {}{}", e.query, token_in_quotes(e.query_token), e.column,
                              e.batched ? fmt::format(", batch item {}", e.batch) : ""));
  page.line();
  if (!e.output_projection) {
    paragraph(page,
              fmt::format("The input has no W_o: the output is concat itself, so Y[{}][{}] is feature {} of head {}'s "
                          "output, o[{}] = Σ_j a_j·v_j[{}].",
                          e.query, e.column, e.feature, e.head, e.feature, e.feature));
    std::vector<bool> weighted;
    weighted.reserve(e.y.a.size());
    for (const double a : e.y.a) weighted.push_back(a != 0);
    page.pieces(sum_pieces(fmt::format("Y[{}][{}] =", e.query, e.column), only_terms(e.y, weighted), num));
    if (std::find(weighted.begin(), weighted.end(), false) != weighted.end())
      paragraph(page, "(the keys with weight 0 add nothing: left out)");
    std::vector<std::size_t> order(e.y.terms.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return std::fabs(e.y.terms[x]) > std::fabs(e.y.terms[y]); });
    page.line();
    page.heading("the largest terms, a_j·v_j");
    for (std::size_t t = 0; t < std::min<std::size_t>(order.size(), 5); ++t) {
      const std::size_t j = order[t];
      if (e.y.terms[j] == 0) {
        paragraph(page, "  (the other terms are 0)");
        break;
      }
      std::string pct = num.percent(e.y.terms[j], e.y.value);
      paragraph(page,
                fmt::format("  key {} {}: {}·{} = {}{}", j, token_in_quotes(e.key_tokens[j]), num.factor(e.y.a[j]),
                            num.factor(e.y.b[j]), num(e.y.terms[j]), pct.empty() ? "" : fmt::format(" ({})", pct)),
                "      ");
    }
    return page.take();
  }
  paragraph(page,
            fmt::format("Y[{}] = concat[{}]·W_o{}: column {} sums the {} features of concat, where head hd's output "
                        "o fills features hd·{} to hd·{} + {}.",
                        e.query, e.query, e.y.bias ? " + b_o" : "", e.column, e.h * e.d_v, e.d_v, e.d_v, e.d_v - 1));
  page.pieces(sum_pieces(fmt::format("Y[{}][{}] = concat·W_o[:,{}]{} =", e.query, e.column, e.column,
                                     e.y.bias ? fmt::format(" + b_o[{}]", e.column) : ""),
                         e.y, num));
  page.line();
  page.heading("each head's share");
  for (std::size_t hd = 0; hd < e.h; ++hd) {
    if (e.h > most_rows && hd == 4) {
      page.line(fmt::format("  … {} more heads …", e.h - 7));
      hd = e.h - 3;
    }
    const std::string pct = num.percent(e.head_sums[hd], e.y.value);
    paragraph(page,
              fmt::format("  head {} (features {}): {}{}", hd, range_text(hd * e.d_v, hd * e.d_v + e.d_v - 1),
                          num(e.head_sums[hd]), pct.empty() ? "" : fmt::format(", {}", pct)),
              "      ");
  }
  if (e.y.bias) paragraph(page, fmt::format("  the bias b_o[{}]: {}", e.column, num(*e.y.bias)), "      ");
  page.line();
  page.heading("the largest terms");
  for (const std::size_t k : e.top) {
    if (e.y.terms[k] == 0) {
      paragraph(page, "  (the other terms are 0)");
      break;
    }
    const std::string pct = num.percent(e.y.terms[k], e.y.value);
    paragraph(page,
              fmt::format("  concat[{}][{}]·W_o[{}][{}] = {}·{} = {}: head {}, its o[{}]{}", e.query, k, k, e.column,
                          num.factor(e.y.a[k]), num.factor(e.y.b[k]), num(e.y.terms[k]), k / e.d_v, k % e.d_v,
                          pct.empty() ? "" : fmt::format(", {}", pct)),
              "      ");
  }
  paragraph(page, fmt::format("Each o comes from its head's weights: --query {} --key K --head H explains one of them.",
                              e.query));
  return page.take();
}

}  // namespace explain_text

std::string render_explanation(const Explanation& e, std::string_view title, const RenderOptions& o) {
  return explain_text::explanation_page(e, title, o);
}

std::string render_output_explanation(const OutputExplanation& e, std::string_view title, const RenderOptions& o) {
  return explain_text::output_explanation_page(e, title, o);
}

std::string render_explained(const ExplainedNumber& e, std::string_view title, const RenderOptions& options) {
  if (const auto* weight = std::get_if<Explanation>(&e)) return render_explanation(*weight, title, options);
  if (const auto* output = std::get_if<OutputExplanation>(&e))
    return render_output_explanation(*output, title, options);
  return render_gradient_explanation(std::get<GradientExplanation>(e), title, options);
}

}  // namespace attn
