#pragma once
// Masks for the unit tests' random problems: one drawn at random and installed in a Problem, and the
// decisions it was made from, to check the engines against without asking the Mask.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "model/mask.hpp"
#include "model/problem.hpp"
#include "support.hpp"

namespace attn::test {

// docs/input-format.md, "Masks", written out independently of Mask::allows:
//   causal: j <= i + o;  sliding_window: i + o - w < j <= i + o;  o = 0 (top_left) or m - n (bottom_right)
inline bool spec_band_allows(MaskKind kind, Align align, long long w, long long n, long long m, long long i,
                             long long j) {
  const long long o = align == Align::bottom_right ? m - n : 0;
  switch (kind) {
    case MaskKind::causal: return j <= i + o;
    case MaskKind::sliding_window: return i + o - w < j && j <= i + o;
    default: return true;
  }
}

// A mask and, kept apart from it, the decisions it was made from, so that a test can say which keys
// are allowed without asking the Mask. padding: key j of item b is real (keep[b][j]); custom:
// allow[b][i][j].
struct MaskSpec {
  MaskKind kind = MaskKind::none;
  Align align = Align::top_left;
  long long window = 0;
  std::vector<std::vector<int>> keep;                // [b][j]
  std::vector<std::vector<std::vector<int>>> allow;  // [b][i][j]

  bool allows(const Problem& p, std::size_t b, std::size_t i, std::size_t j) const {
    switch (kind) {
      case MaskKind::none: return true;
      case MaskKind::causal:
      case MaskKind::sliding_window:
        return spec_band_allows(kind, align, window, static_cast<long long>(p.n), static_cast<long long>(p.m),
                                static_cast<long long>(i), static_cast<long long>(j));
      case MaskKind::padding: return keep[b][j] == 1;
      case MaskKind::custom: return allow[b][i][j] == 1;
    }
    return true;
  }
  bool row_has_key(const Problem& p, std::size_t b, std::size_t i) const {
    for (std::size_t j = 0; j < p.m; ++j)
      if (allows(p, b, i, j)) return true;
    return false;
  }
  // Does the mask leave rows [r0, r1) nothing among keys [c0, c1)?
  bool rules_out(const Problem& p, std::size_t b, std::size_t r0, std::size_t r1, std::size_t c0,
                 std::size_t c1) const {
    for (std::size_t i = r0; i < r1; ++i)
      for (std::size_t j = c0; j < c1; ++j)
        if (allows(p, b, i, j)) return false;
    return true;
  }
};

// Installs a mask of `kind` in p.mask, drawn at random, and returns the decisions it was made from.
// Padding and custom flags are drawn per item or shared by the batch (a first axis of 1), with a keep
// probability from sparse to dense; sometimes a whole custom row or a whole padding item is emptied.
inline MaskSpec install_mask(std::mt19937& rng, Problem& p, MaskKind kind, Align align) {
  MaskSpec spec;
  spec.kind = kind;
  spec.align = align;
  spec.window = static_cast<long long>(pick(rng, 1, p.m + 1));
  const double keep_probability = std::vector<double>{0.1, 0.5, 0.9}[pick(rng, 0, 2)];
  std::bernoulli_distribution coin(keep_probability);
  const bool shared = pick(rng, 0, 2) == 0;
  const std::size_t items = shared ? 1 : p.B;

  Mask& mask = p.mask;
  mask = Mask{};
  mask.n = p.n;
  mask.m = p.m;
  mask.kind = kind;
  if (kind == MaskKind::causal || kind == MaskKind::sliding_window) mask.align = align;
  if (kind == MaskKind::sliding_window) mask.window = static_cast<std::size_t>(spec.window);
  if (kind == MaskKind::padding) {
    mask.keep = Tensor<std::uint8_t>({items, p.m});
    const std::size_t empty_item = pick(rng, 0, 4) == 0 ? pick(rng, 0, items - 1) : items;  // maybe none
    for (std::size_t b = 0; b < items; ++b)
      for (std::size_t j = 0; j < p.m; ++j) mask.keep(b, j) = b != empty_item && coin(rng) ? 1 : 0;
    spec.keep.assign(p.B, std::vector<int>(p.m));
    for (std::size_t b = 0; b < p.B; ++b)
      for (std::size_t j = 0; j < p.m; ++j) spec.keep[b][j] = mask.keep(shared ? 0 : b, j);
  }
  if (kind == MaskKind::custom) {
    mask.allow = Tensor<std::uint8_t>({items, p.n, p.m});
    const std::size_t empty_row = pick(rng, 0, 2) == 0 ? pick(rng, 0, p.n - 1) : p.n;  // maybe none
    for (std::size_t b = 0; b < items; ++b)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) mask.allow(b, i, j) = i != empty_row && coin(rng) ? 1 : 0;
    spec.allow.assign(p.B, std::vector<std::vector<int>>(p.n, std::vector<int>(p.m)));
    for (std::size_t b = 0; b < p.B; ++b)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) spec.allow[b][i][j] = mask.allow(shared ? 0 : b, i, j);
  }
  return spec;
}

inline MaskSpec random_mask(std::mt19937& rng, Problem& p) {
  return install_mask(rng, p, static_cast<MaskKind>(pick(rng, 0, 4)),
                      pick(rng, 0, 1) == 0 ? Align::top_left : Align::bottom_right);
}

}  // namespace attn::test
