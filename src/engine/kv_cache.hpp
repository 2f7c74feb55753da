#pragma once
// The key/value cache of decoding: every earlier token's keys and values, kept so that a new token is one
// row of attention instead of a whole pass. Contiguous (one growing array per sequence), or paged as vLLM's
// PagedAttention keeps it: fixed pages of P tokens drawn from one pool that every sequence of a batch shares,
// and a block table per sequence that says which physical page holds its logical page k.
// ref: Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention"
// (arXiv:2309.06180), section 4.1.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ops/random.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// Where one cached token lives in a paged cache: its page of the pool and its slot in that page.
struct PageSlot {
  std::size_t page = 0;  // physical page
  std::size_t slot = 0;  // 0 … P - 1
};

// The cache of `sequences` sequences of g key/value heads: keys d_k wide, values d_v wide. With a page size
// P > 0 the rows live in a pool of `pool_pages` pages of P tokens, each page taken from the pool's free list
// when a sequence needs one: the list is shuffled by `seed`, so a sequence's pages are not contiguous, as
// they are not in a server whose sequences come and go. P = 0: each sequence's rows in one growing array.
template <class T>
class KvCache {
 public:
  KvCache(std::size_t sequences, std::size_t g, std::size_t d_k, std::size_t d_v, std::size_t page_size = 0,
          std::size_t pool_pages = 0, std::uint64_t seed = 0)
      : g_(g),
        d_k_(d_k),
        d_v_(d_v),
        page_size_(page_size),
        pool_pages_(page_size > 0 ? pool_pages : 0),
        lengths_(sequences, 0),
        tables_(sequences),
        rows_k_(sequences),
        rows_v_(sequences) {
    if (page_size_ == 0) return;
    // A page holds P tokens, each with every head's row: (pool_pages, P, g, d).
    pool_k_.assign(pool_pages * page_size_ * g_ * d_k_, T(0));
    pool_v_.assign(pool_pages * page_size_ * g_ * d_v_, T(0));
    // Fisher–Yates with SplitMix64: the order in which the pool hands its pages out.
    free_.resize(pool_pages);
    for (std::size_t k = 0; k < pool_pages; ++k) free_[k] = pool_pages - 1 - k;  // popped from the back: 0 first
    SplitMix64 rng(seed);
    for (std::size_t k = pool_pages; k > 1; --k)
      std::swap(free_[k - 1], free_[static_cast<std::size_t>(rng.between(0, static_cast<long long>(k - 1)))]);
  }

  // Appends the keys K (g, t, d_k) and values V (g, t, d_v) of t new tokens to sequence `s`.
  void append(std::size_t s, const Tensor<T>& K, const Tensor<T>& V) {
    if (K.rank() != 3 || V.rank() != 3 || K.dim(0) != g_ || V.dim(0) != g_ || K.dim(2) != d_k_ || V.dim(2) != d_v_ ||
        K.dim(1) != V.dim(1))
      throw std::invalid_argument(fmt::format("KvCache::append: keys {} and values {} for {} heads of {} and {}",
                                              K.shape(), V.shape(), g_, d_k_, d_v_));
    for (std::size_t i = 0; i < K.dim(1); ++i) {
      const std::size_t j = lengths_[s]++;
      if (page_size_ > 0 && j % page_size_ == 0) tables_[s].push_back(take_page());
      for (std::size_t kv = 0; kv < g_; ++kv) {
        std::copy_n(&K(kv, i, 0), d_k_, key_row(s, j, kv));
        std::copy_n(&V(kv, i, 0), d_v_, value_row(s, j, kv));
      }
    }
  }

  // Every cached key of sequence `s`, gathered in order through the block table: (g, L, d_k); and values.
  Tensor<T> keys(std::size_t s) const { return gathered(s, true); }
  Tensor<T> values(std::size_t s) const { return gathered(s, false); }

  std::size_t length(std::size_t s) const { return lengths_[s]; }
  std::size_t page_size() const { return page_size_; }
  bool paged() const { return page_size_ > 0; }
  // Sequence s's block table: its logical page k is physical page table(s)[k].
  const std::vector<std::size_t>& table(std::size_t s) const { return tables_[s]; }
  // Where token j of sequence s lives.
  PageSlot where(std::size_t s, std::size_t j) const { return {tables_[s][j / page_size_], j % page_size_}; }
  std::size_t pool_pages() const { return pool_pages_; }
  std::size_t pages_in_use() const { return pool_pages() - free_.size(); }

 private:
  std::size_t take_page() {
    if (free_.empty()) throw std::length_error("KvCache: the pool has no free page left");
    const std::size_t page = free_.back();
    free_.pop_back();
    return page;
  }
  T* key_row(std::size_t s, std::size_t j, std::size_t kv) {
    if (page_size_ == 0) return grown(rows_k_[s], j, kv, d_k_);
    const PageSlot at = where(s, j);
    return &pool_k_[((at.page * page_size_ + at.slot) * g_ + kv) * d_k_];
  }
  T* value_row(std::size_t s, std::size_t j, std::size_t kv) {
    if (page_size_ == 0) return grown(rows_v_[s], j, kv, d_v_);
    const PageSlot at = where(s, j);
    return &pool_v_[((at.page * page_size_ + at.slot) * g_ + kv) * d_v_];
  }
  // Row j of head kv in a contiguous (L, g, d) array, grown to hold it.
  T* grown(std::vector<T>& rows, std::size_t j, std::size_t kv, std::size_t d) {
    if (rows.size() < (j + 1) * g_ * d) rows.resize((j + 1) * g_ * d, T(0));
    return &rows[(j * g_ + kv) * d];
  }
  const T* row(std::size_t s, std::size_t j, std::size_t kv, bool keys) const {
    const std::size_t d = keys ? d_k_ : d_v_;
    if (page_size_ == 0) return &(keys ? rows_k_ : rows_v_)[s][(j * g_ + kv) * d];
    const PageSlot at = where(s, j);
    return &(keys ? pool_k_ : pool_v_)[((at.page * page_size_ + at.slot) * g_ + kv) * d];
  }
  Tensor<T> gathered(std::size_t s, bool keys) const {
    const std::size_t d = keys ? d_k_ : d_v_, L = lengths_[s];
    Tensor<T> out({g_, L, d});
    for (std::size_t kv = 0; kv < g_; ++kv)
      for (std::size_t j = 0; j < L; ++j) std::copy_n(row(s, j, kv, keys), d, &out(kv, j, 0));
    return out;
  }

  std::size_t g_, d_k_, d_v_, page_size_, pool_pages_;
  std::vector<std::size_t> lengths_;              // (sequences) tokens cached
  std::vector<std::vector<std::size_t>> tables_;  // (sequences) block tables
  std::vector<std::vector<T>> rows_k_, rows_v_;   // contiguous: (sequences) (L, g, d)
  std::vector<T> pool_k_, pool_v_;                // paged: (pool_pages, P, g, d)
  std::vector<std::size_t> free_;                 // the pool's free pages, handed out from the back
};

}  // namespace attn
