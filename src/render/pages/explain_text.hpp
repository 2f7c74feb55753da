#pragma once
// The pieces the explain pages (render/pages/explain_page.cpp) write with: numbers as the page writes
// them, tokens in prose and in cells, sums term by term, the rows of a long table to show.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lessons/explain.hpp"
#include "render/draw/options.hpp"
#include "render/draw/page.hpp"
#include "render/draw/text.hpp"
#include "text/visible.hpp"

namespace attn::explain_text {

constexpr std::size_t most_terms = 8;       // longer sums show their first and last terms
constexpr std::size_t most_components = 8;  // longer vectors of sums show their first and last ones
constexpr std::size_t most_rows = 12;       // longer softmax rows and tile walks show a selection
constexpr std::size_t token_columns = 12;   // token labels in tables are cut to this

// A paragraph of the page, its lines after the first indented by two spaces unless `indent` says otherwise.
inline void paragraph(Page& page, std::string_view text, std::string_view indent = "  ") {
  page.paragraph(text, indent);
}

// Numbers as the page writes them: whole numbers as they are, others with --precision digits after
// the point, very large or very small ones in scientific notation.
class Numbers {
 public:
  explicit Numbers(int precision) : p_(std::clamp(precision, 0, 17)) {}

  std::string operator()(double x) const {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x < 0 ? "-∞" : "∞";
    if (x == 0) return "0";
    const double size = std::fabs(x);
    if (size < 1e15 && x == std::round(x)) return fmt::format("{:.0f}", x);
    if (size >= 1e6 || size < 0.5 * std::pow(10.0, -p_)) return fmt::format("{:.{}e}", x, std::max(p_ - 1, 1));
    return fmt::format("{:.{}f}", x, p_);
  }
  // A factor in a product: negative ones in parentheses, so "0.5·(-1)" reads as one term.
  std::string factor(double x) const { return x < 0 || std::signbit(x) ? fmt::format("({})", (*this)(x)) : (*this)(x); }
  std::string percent(double part, double whole) const {
    if (whole == 0 || !std::isfinite(part / whole)) return "";
    return fmt::format("{:.1f}%", 100 * part / whole);
  }
  // "[0, 1, 0, 1]"; past 10 entries the first and last 4 with how many were hidden.
  std::string vector(const std::vector<double>& v) const {
    std::string out = "[";
    for (std::size_t k = 0; k < v.size(); ++k) {
      if (v.size() > 10 && k == 4) {
        out += fmt::format("… {} more …, ", v.size() - 8);
        k = v.size() - 4;
      }
      out += (*this)(v[k]) + (k + 1 < v.size() ? ", " : "");
    }
    return out + "]";
  }

 private:
  int p_;
};

// A token for prose: control characters written out, in quotes.
inline std::string token_in_quotes(std::string_view token) { return fmt::format("\"{}\"", visible(token)); }
// A token for a table cell: made visible and cut.
inline std::string cell_label(std::string_view token, const RenderOptions& o) {
  const std::string text = o.unicode ? visible(token) : to_ascii(visible(token));
  return truncate_to(text, token_columns, o.unicode ? "…" : "...");
}

inline std::string range_text(std::size_t first, std::size_t last) {  // [first, last]
  return first == last ? fmt::format("{}", first) : fmt::format("{} to {}", first, last);
}

// The pieces of "LHS t_0 + t_1 + … = value": past `most_terms` terms the first four and the last three,
// with how many were hidden; the bias last; `value` (the engine's) always.
inline std::vector<std::string> sum_pieces(const std::string& lhs, const ProductSum& s, const Numbers& num) {
  std::vector<std::string> parts = {lhs};
  const std::size_t count = s.terms.size();
  for (std::size_t t = 0; t < count; ++t) {
    if (count > most_terms && t == 4) {
      parts.push_back(fmt::format("+ …({} terms)…", count - 7));
      t = count - 3;
    }
    parts.push_back(fmt::format("{}{}·{}", t == 0 ? "" : "+ ", num.factor(s.a[t]), num.factor(s.b[t])));
  }
  if (count == 0 && !s.bias) return {lhs, fmt::format("{} (no terms)", num(s.value))};
  if (s.bias) parts.push_back(fmt::format("+ {}", num.factor(*s.bias)));
  parts.push_back(fmt::format("= {}", num(s.value)));
  return parts;
}

// `s` with only the terms that `keep` marks; its value unchanged.
inline ProductSum only_terms(const ProductSum& s, const std::vector<bool>& keep) {
  ProductSum kept{{}, {}, {}, s.bias, s.value};
  for (std::size_t t = 0; t < s.terms.size(); ++t) {
    if (!keep[t]) continue;
    kept.a.push_back(s.a[t]);
    kept.b.push_back(s.b[t]);
    kept.terms.push_back(s.terms[t]);
  }
  return kept;
}

// Which of `count` rows to show when at most `limit` fit: the first and last ones and those in `keep`;
// a gap is marked by `count`.
inline std::vector<std::size_t> rows_to_show(std::size_t count, std::vector<std::size_t> keep, std::size_t limit) {
  std::vector<std::size_t> rows;
  if (count <= limit) {
    rows.resize(count);
    std::iota(rows.begin(), rows.end(), std::size_t{0});
    return rows;
  }
  for (std::size_t k = 0; k < 4; ++k) keep.push_back(k);
  for (std::size_t k = count - 3; k < count; ++k) keep.push_back(k);
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  for (std::size_t k = 0; k < keep.size(); ++k) {
    if (k > 0 && keep[k] != keep[k - 1] + 1) rows.push_back(count);
    rows.push_back(keep[k]);
  }
  return rows;
}

// Component sums q[0], q[1], …: all of them up to `most_components`, else the first and last three.
template <class Label>
inline void components(Page& page, const std::vector<ProductSum>& sums, const Numbers& num, const Label& lhs) {
  const std::size_t count = sums.size();
  for (std::size_t c = 0; c < count; ++c) {
    if (count > most_components && c == 3) {
      page.line(fmt::format("  … {} more, each the same way …", count - 6));
      c = count - 3;
    }
    page.pieces(sum_pieces(lhs(c), sums[c], num));
  }
}

inline std::vector<double> values_of(const std::vector<ProductSum>& sums) {
  std::vector<double> v;
  v.reserve(sums.size());
  for (const ProductSum& s : sums) v.push_back(s.value);
  return v;
}

inline std::string where(const Explanation& e) {
  std::string at = fmt::format("head {}", e.head);
  if (e.batched) at += fmt::format(", batch item {}", e.batch);
  return at;
}

}  // namespace attn::explain_text
