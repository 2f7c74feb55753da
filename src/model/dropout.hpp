#pragma once
// Dropout's keep mask, a pure function of (seed, batch, head, query, key): Philox4x32-10, the counter-based
// generator PyTorch's CUDA dropout and flash-attention use. A counter-based generator has no state to
// carry from one number to the next, so the mask of any entry is computed where it is needed: the naive
// pass, a flash tile of any size, the backward pass and every thread draw the same mask without storing
// it. ref: Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC 2011).

#include <array>
#include <cstddef>
#include <cstdint>

namespace attn {

// Dropout on the attention weights (`dropout`): each weight kept with probability 1 − p and then scaled
// by 1/(1 − p), or set to 0. Which ones is a pure function of (seed, batch, head, query, key): the keep
// mask below, so every engine, tiling and thread count drops the same weights.
struct Dropout {
  double p = 0;            // in (0, 1): an input with p = 0 has no dropout at all
  std::uint64_t seed = 0;  // 0 … 2^64 − 1
};

using Philox4x32 = std::array<std::uint32_t, 4>;

// Philox4x32 with 10 rounds of the counter `ctr` under the key (k0, k1): each round multiplies two words
// by the round constants and mixes the halves of the 64-bit products with the other words and the key;
// the key walks by the Weyl constants between rounds (the golden ratio and sqrt(3) - 1, in 32 bits).
constexpr Philox4x32 philox4x32_10(Philox4x32 ctr, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint64_t m0 = 0xD2511F53, m1 = 0xCD9E8D57;
  constexpr std::uint32_t w0 = 0x9E3779B9, w1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += w0;
      k1 += w1;
    }
    const std::uint64_t p0 = m0 * ctr[0], p1 = m1 * ctr[2];
    ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ k0, static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ k1, static_cast<std::uint32_t>(p0)};
  }
  return ctr;
}

// The keep mask of one dropout: entry (b, head, i, j) is kept iff the first word of
// Philox4x32-10(counter (j, i, head, b), key (seed's low 32 bits, its high 32 bits)) >= floor(p · 2^32),
// which happens with probability 1 - p to within 2^-32. A kept weight is scaled by 1/(1 - p), so that
// every weight keeps its expected value.
class DropoutMask {
 public:
  explicit DropoutMask(const Dropout& d)
      : k0_(static_cast<std::uint32_t>(d.seed)),
        k1_(static_cast<std::uint32_t>(d.seed >> 32)),
        // p < 1, so p · 2^32 < 2^32 is exact in a double and its floor fits 32 bits
        threshold_(static_cast<std::uint32_t>(d.p * 4294967296.0)),
        p_(d.p) {}

  bool keeps(std::size_t b, std::size_t head, std::size_t i, std::size_t j) const {
    const Philox4x32 x = philox4x32_10({static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(i),
                                        static_cast<std::uint32_t>(head), static_cast<std::uint32_t>(b)},
                                       k0_, k1_);
    return x[0] >= threshold_;
  }

  // 1/(1 - p) where kept, 0 where dropped: what a weight is multiplied by. The factor is formed in double
  // and rounded once to T, so that every type holds the nearest factor to the same number, and a wider
  // reference differs from a float32 run by that one rounding, never by a rounded p.
  template <class T>
  T factor(std::size_t b, std::size_t head, std::size_t i, std::size_t j) const {
    return keeps(b, head, i, j) ? static_cast<T>(1 / (1 - p_)) : T{0};
  }

  double p() const { return p_; }

 private:
  std::uint32_t k0_, k1_, threshold_;
  double p_;
};

}  // namespace attn
