#include "model/slice.hpp"

#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace attn {

std::optional<std::string> decode_refusal(const Problem& p) {
  if (p.cross)
    return "decode needs self-attention: the keys and values are the tokens' own, but this input has a `context` "
           "(cross-attention)";
  if (p.mask.kind != MaskKind::causal && p.mask.kind != MaskKind::sliding_window)
    return fmt::format(
        "decode needs a causal mask (\"mask\": \"causal\", or a sliding window), so that no token sees a later one; "
        "this input's mask is {}",
        to_string(p.mask.kind));
  if (p.mask.offset() != 0) return "decode needs the causal mask's diagonal where each token sees itself (offset 0)";
  if (p.dropout) return "decode traces inference, which applies no dropout: remove the input's `dropout`";
  return std::nullopt;
}

namespace {

// Rows [begin, end) of axis 1 of a (B, rows, d) tensor.
Tensor<double> rows_of(const Tensor<double>& t, std::size_t begin, std::size_t end) {
  const std::size_t B = t.dim(0), d = t.dim(2);
  Tensor<double> out({B, end - begin, d});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = begin; i < end; ++i)
      for (std::size_t c = 0; c < d; ++c) out(b, i - begin, c) = t(b, i, c);
  return out;
}

// Rows [begin, end) of a (rows, d) table.
Tensor<double> table_rows(const Tensor<double>& t, std::size_t begin, std::size_t end) {
  const std::size_t d = t.dim(1);
  std::vector<double> values(t.values().begin() + static_cast<std::ptrdiff_t>(begin * d),
                             t.values().begin() + static_cast<std::ptrdiff_t>(end * d));
  return Tensor<double>({end - begin, d}, std::move(values));
}

template <class V>
V cut(const V& v, std::size_t begin, std::size_t end) {
  return V(v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(end));
}

}  // namespace

Problem slice_problem(const Problem& p, std::size_t q_begin, std::size_t q_end, std::size_t k_begin) {
  if (decode_refusal(p) || !(k_begin <= q_begin && q_begin < q_end && q_end <= p.n))
    throw std::invalid_argument(
        fmt::format("slice_problem: queries [{}, {}) and keys from {} of {} tokens", q_begin, q_end, k_begin, p.n));
  Problem s = p;
  // Keys that are not the queries themselves (a decode step's cache) come from another sequence, as a
  // context's do: what reads C for the keys of self-attention from X must not take X for them.
  s.cross = k_begin != q_begin;
  s.n = q_end - q_begin;
  s.m = q_end - k_begin;
  s.X = rows_of(p.X, q_begin, q_end);
  s.C = rows_of(p.X, k_begin, q_end);
  for (std::size_t b = 0; b < p.B; ++b) {
    s.tokens[b] = cut(p.tokens[b], q_begin, q_end);
    s.context_tokens[b] = cut(p.tokens[b], k_begin, q_end);
  }
  // Query i of the part is query q_begin + i of p, key j is key k_begin + j: p's band j <= i (and within the
  // window) becomes j <= i + (q_begin - k_begin), which is the bottom-right alignment's offset m - n.
  s.mask.align = Align::bottom_right;
  s.mask.n = s.n;
  s.mask.m = s.m;
  if (p.rope) {
    Rope& r = *s.rope;
    r.positions = cut(p.rope->positions, q_begin, q_end);
    r.context_positions = cut(p.rope->positions, k_begin, q_end);
    r.cos_q = table_rows(p.rope->cos_q, q_begin, q_end);
    r.sin_q = table_rows(p.rope->sin_q, q_begin, q_end);
    r.cos_k = table_rows(p.rope->cos_q, k_begin, q_end);
    r.sin_k = table_rows(p.rope->sin_q, k_begin, q_end);
  }
  if (p.alibi) {
    s.alibi->query_positions = cut(p.alibi->query_positions, q_begin, q_end);
    s.alibi->key_positions = cut(p.alibi->query_positions, k_begin, q_end);
  }
  s.dY = Tensor<double>();
  s.upstream = Upstream::ones;
  return s;
}

}  // namespace attn
