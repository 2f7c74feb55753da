#pragma once
// What both engines share: the inputs in the run's scalar type, how a step is kept, the rows with nothing
// to attend, and the result.
//
// Storage: every engine function takes the dtype its values are stored in (`storage`). A half type
// (float16, bfloat16) is computed with T = float: the inputs and every stored intermediate are rounded
// to it, to nearest with ties to even, while products and sums run in float32, as GPU kernels do
// (docs/precision.md). Any other storage keeps T as computed; that is the default.

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "model/problem.hpp"
#include "model/run.hpp"
#include "ops/attention.hpp"
#include "model/score_chain.hpp"
#include "tensor/tensor.hpp"
#include "observe/observer.hpp"
#include "observe/records.hpp"

namespace attn {

template <class T>
struct AttentionResult {
  Tensor<T> output;                  // (B, n, d_out)
  std::vector<EmptyRow> empty_rows;  // rows with nothing to attend, in order
  std::size_t peak_score_bytes = 0;  // most bytes held at once for scores and weights, as counted
  Tensor<T> lse;                     // (B, h, n) log-sum-exp of each row: flash only
};

// Counts the bytes an engine holds for score-sized buffers, and the most it held at once.
class ByteMeter {
 public:
  void hold(std::size_t bytes) { peak_ = std::max(peak_, now_ += bytes); }
  void release(std::size_t bytes) { now_ -= bytes; }
  std::size_t peak() const { return peak_; }

 private:
  std::size_t now_ = 0;
  std::size_t peak_ = 0;
};

template <class T>
std::size_t bytes_of(const Tensor<T>& t) {
  return t.size() * sizeof(T);
}

// The rows that the mask leaves without a single key (the same for every head). With sinks there are
// none: such a row gives all its weight to its head's sink, which is what sinks are for.
inline std::vector<EmptyRow> find_empty_rows(const Problem& p) {
  std::vector<EmptyRow> rows;
  if (!p.sinks.empty()) return rows;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      const auto [first, last] = p.mask.band(i);
      bool any = false;
      for (std::size_t j = first; j < last && !any; ++j) any = p.mask.allows(b, i, j);
      if (!any) rows.push_back({b, i});
    }
  return rows;
}

// A half type is stored from a float32 computation only: the precondition of every engine.
template <class T>
void require_storage(const char* who, DType storage) {
  if (is_half(storage) && !std::is_same_v<T, float>)
    throw std::invalid_argument(fmt::format("{}: {} is stored from float32 arithmetic, not from {}-byte values", who,
                                            name_of(storage), sizeof(T)));
}

// Rounds every value of `t` to what a run in `storage` keeps (model/run.hpp, stored): nothing to do
// unless it is a half type.
template <class T>
void round_stored(Tensor<T>& t, DType storage) {
  if (!is_half(storage)) return;
  for (T& x : t.values()) x = stored(storage, x);
}

// How an engine keeps each step it computes, so that the math reads one equation a line: the step is
// rounded to the storage type as it is stored, and reported to the observer.
template <class T>
class Keeper {
 public:
  Keeper(Observer& observer, DType storage) : observer_(observer), storage_(storage) {}

  // A stored step: rounded, reported, returned.
  Tensor<T> operator()(Step step, Tensor<T> t) const {
    round_stored(t, storage_);
    report(observer_, step, t);
    return t;
  }

 private:
  Observer& observer_;
  DType storage_;
};

// The problem's inputs as the run holds them: rounded to T, or to the half type it stores in.
template <class T>
struct Inputs {
  Tensor<T> X, C, W_q, W_k, W_v, W_o;
  std::vector<T> b_q, b_k, b_v, b_o;
  // RoPE's table (empty without rope): a precomputed input like a weight, so held as one.
  Tensor<T> cos_q, sin_q;  // (n, dims/2)
  Tensor<T> cos_k, sin_k;  // (m, dims/2)
  // The stages between the scores and the weights, with what they read (ALiBi's slopes, the sinks, held
  // as inputs), model/score_chain.hpp.
  ScoreChain<T> chain;

  explicit Inputs(const Problem& p, DType storage = DType::float32)
      : X(held(p.X, storage)),
        C(held(p.C, storage)),
        W_q(held(p.W_q, storage)),
        W_k(held(p.W_k, storage)),
        W_v(held(p.W_v, storage)),
        W_o(held(p.W_o, storage)),
        b_q(held(p.b_q, storage)),
        b_k(held(p.b_k, storage)),
        b_v(held(p.b_v, storage)),
        b_o(held(p.b_o, storage)),
        chain(p, storage) {
    if (p.rope) {
      cos_q = held(p.rope->cos_q, storage);
      sin_q = held(p.rope->sin_q, storage);
      cos_k = held(p.rope->cos_k, storage);
      sin_k = held(p.rope->sin_k, storage);
    }
  }

 private:
  static Tensor<T> held(const Tensor<double>& t, DType storage) {
    if (!is_half(storage)) return cast<T>(t);
    std::vector<T> values(t.size());
    for (std::size_t k = 0; k < values.size(); ++k) values[k] = stored_input<T>(storage, t.values()[k]);
    return Tensor<T>(t.shape(), std::move(values));
  }
  static std::vector<T> held(const std::vector<double>& b, DType storage) {
    std::vector<T> values(b.size());
    for (std::size_t k = 0; k < values.size(); ++k) values[k] = stored_input<T>(storage, b[k]);
    return values;
  }
};

}  // namespace attn
