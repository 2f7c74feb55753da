// `attn-trace new`'s inputs (src/io/new_input.hpp): whatever sizes are asked, the text loads with
// load_problem and has those sizes; its numbers are in the documented ranges; a seed gives one text.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "io/load.hpp"
#include "io/new_input.hpp"

using namespace attn;

namespace {

NewInputRequest request(std::size_t n_tokens, std::size_t d_model, std::size_t heads, std::size_t kv_heads,
                        std::size_t d_k) {
  NewInputRequest r;
  for (std::size_t i = 0; i < n_tokens; ++i) r.tokens.push_back(fmt::format("t{}", i));
  r.d_model = d_model;
  r.heads = heads;
  r.kv_heads = kv_heads;
  r.d_k = d_k;
  return r;
}

bool whole(double x) { return x == std::round(x); }
// A decimal with two places, as the text wrote it ("-0.35" reads back as the double nearest -0.35).
bool hundredths(double x) { return std::abs(x * 100 - std::round(x * 100)) < 1e-9; }

std::vector<const Tensor<double>*> weights(const Problem& p) {
  std::vector<const Tensor<double>*> out = {&p.W_q, &p.W_k, &p.W_v};
  if (p.has_output_projection()) out.push_back(&p.W_o);
  return out;
}

}  // namespace

TEST_CASE("SplitMix64 gives the reference outputs", "[new]") {
  // The first outputs for seeds 0 and 7, computed with Python's unbounded integers from the algorithm
  // as published (Vigna's splitmix64.c), masking to 64 bits after each step. Seed 0's first output,
  // 0xe220a8397b1dcdaf, is the one the reference C code prints.
  SplitMix64 zero(0);
  CHECK(zero.next() == 0xe220a8397b1dcdafULL);
  CHECK(zero.next() == 0x6e789e6aa1b965f4ULL);
  CHECK(zero.next() == 0x06c45d188009454fULL);
  SplitMix64 seven(7);
  CHECK(seven.next() == 0x63cbe1e459320dd7ULL);
  CHECK(seven.next() == 0x044c3cd7f43c661cULL);
  CHECK(seven.next() == 0xe6984080bab12a02ULL);
  // between(lo, hi) is lo + ((next() >> 32) · (hi - lo + 1)) >> 32: 0xe220a839 = 3793791033, and
  // 3793791033 · 201 / 2^32 = 177.5…, so -100 + 177.
  CHECK(SplitMix64(0).between(-100, 100) == 77);
}

TEST_CASE("new writes an input that loads with the sizes asked, for a sweep of options", "[new]") {
  int made = 0;
  for (const std::size_t n : {1, 3, 5})
    for (const std::size_t d_model : {1, 4, 6})
      for (const std::size_t heads : {1, 2, 3})
        for (const std::size_t kv_heads : {1, 3})
          for (const int variant : {0, 1, 2, 3}) {
            if (heads % kv_heads != 0) continue;
            // d_model / heads where it divides, else a d_k given on purpose.
            const std::size_t d_k = d_model % heads == 0 ? d_model / heads : 2;
            NewInputRequest r = request(n, d_model, heads, kv_heads, d_k);
            r.mask = variant == 1 ? MaskKind::causal : variant == 2 ? MaskKind::sliding_window : MaskKind::none;
            r.window = 2;
            r.output_projection = variant % 2 == 1;
            r.integers = variant >= 2;
            if (variant == 3) r.context_tokens = {"c0", "c1", "c2", "c3"};
            r.seed = static_cast<std::uint64_t>(made);
            INFO(new_input_description(r));

            const Problem p = load_problem(make_new_input(r), "new");
            ++made;
            const std::size_t m = r.context_tokens.empty() ? n : r.context_tokens.size();
            CHECK(p.description == new_input_description(r));
            CHECK(p.tokens == std::vector<std::vector<std::string>>{r.tokens});
            CHECK(p.n == n);
            CHECK(p.m == m);
            CHECK(p.cross == !r.context_tokens.empty());
            if (p.cross) CHECK(p.context_tokens == std::vector<std::vector<std::string>>{r.context_tokens});
            CHECK(p.d_model == d_model);
            CHECK(p.d_context == d_model);
            CHECK(p.h == heads);
            CHECK(p.g == kv_heads);
            CHECK(p.d_k == d_k);
            CHECK(p.d_v == d_k);
            CHECK(p.has_output_projection() == r.output_projection);
            CHECK(p.d_out == (r.output_projection ? d_model : heads * d_k));
            CHECK(p.mask.kind == r.mask);
            if (r.mask == MaskKind::sliding_window) CHECK(p.mask.window == 2);
            CHECK_FALSE(p.scale_given);
          }
  CHECK(made == 144);  // 3 · 3 · (1 + 1 + 2 head pairs) · 4
}

TEST_CASE("new's numbers are in the stated ranges: whole with --integers, hundredths without", "[new]") {
  for (const std::uint64_t seed : {0, 1, 2, 3}) {
    NewInputRequest r = request(6, 9, 3, 1, 3);
    r.context_tokens = {"a", "b"};
    r.output_projection = true;
    r.seed = seed;

    r.integers = true;
    const Problem whole_numbers = load_problem(make_new_input(r), "new");
    for (const double x : whole_numbers.X.values()) CHECK((whole(x) && x >= 0 && x <= 1));
    for (const double x : whole_numbers.C.values()) CHECK((whole(x) && x >= 0 && x <= 1));
    for (const auto* w : weights(whole_numbers))
      for (const double x : w->values()) CHECK((whole(x) && x >= -1 && x <= 1));

    r.integers = false;
    const Problem decimals = load_problem(make_new_input(r), "new");
    for (const double x : decimals.X.values()) CHECK((hundredths(x) && x >= -1 && x <= 1));
    // W_v, W_o: [-1, 1]/√9 = [-1/3, 1/3], rounded to two places: at most 0.33; W_q, W_k: [-3, 3]/√9 = [-1, 1].
    for (const auto* w : {&decimals.W_v, &decimals.W_o})
      for (const double x : w->values()) CHECK((hundredths(x) && x >= -0.33 && x <= 0.33));
    for (const auto* w : {&decimals.W_q, &decimals.W_k})
      for (const double x : w->values()) CHECK((hundredths(x) && x >= -1 && x <= 1));
  }
}

TEST_CASE("new writes the same text for the same seed and another for another seed", "[new]") {
  NewInputRequest r = request(4, 4, 2, 2, 2);
  r.mask = MaskKind::causal;
  const std::string first = make_new_input(r);
  CHECK(make_new_input(r) == first);
  r.seed = 1;
  const std::string other = make_new_input(r);
  CHECK(other != first);
  CHECK(make_new_input(r) == other);
}

TEST_CASE("new writes one matrix row per line and says what was asked", "[new]") {
  NewInputRequest r = request(2, 2, 1, 1, 2);
  r.integers = true;
  r.mask = MaskKind::sliding_window;
  r.window = 3;
  const std::string text = make_new_input(r);
  CHECK(text.find("\"description\": \"made by attn-trace new: 2 tokens, d_model 2, 1 head of d_k 2, "
                  "sliding_window mask of 3, no W_o, whole numbers, seed 0\"") != std::string::npos);
  CHECK(text.find("\"mask\": {\"type\": \"sliding_window\", \"window\": 3}") != std::string::npos);
  CHECK(text.find("  \"X\":   [[") != std::string::npos);
  CHECK(text.find("]],\n  \"W_q\": [[") != std::string::npos);
  CHECK(text.find("],\n          [") != std::string::npos);  // the second row of X under the first
}

TEST_CASE("new's memory estimate grows with the sizes and saturates instead of overflowing", "[new]") {
  const std::size_t small = new_input_bytes(request(3, 4, 1, 1, 4));
  CHECK(small >= make_new_input(request(3, 4, 1, 1, 4)).size());
  CHECK(new_input_bytes(request(3, 400, 1, 1, 400)) > small);
  const std::size_t most = std::numeric_limits<std::size_t>::max();
  CHECK(new_input_bytes(request(3, most / 2, 4, 1, most / 2)) == most);
}

namespace {

// The mean over rows of the entropy (in nats) of softmax(X·W_q · (X·W_k)ᵀ / √d_k), for one head of
// self-attention, computed here by hand from the loaded numbers (an implementation independent of the
// engines); with `causal`, row i sees keys 0..i. Also the mean of what uniform rows would have:
// log n, or log(i + 1) under the causal mask.
struct Entropy {
  double mean = 0, uniform = 0;
};

Entropy mean_row_entropy(const Problem& p, bool causal) {
  const std::size_t n = p.n, d = p.d_model, dk = p.d_k;
  const auto X = p.X.values(), Wq = p.W_q.values(), Wk = p.W_k.values();
  std::vector<double> Q(n * dk, 0), K(n * dk, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < dk; ++c)
      for (std::size_t j = 0; j < d; ++j) {
        Q[i * dk + c] += X[i * d + j] * Wq[j * dk + c];
        K[i * dk + c] += X[i * d + j] * Wk[j * dk + c];
      }
  Entropy e;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t keys = causal ? i + 1 : n;
    std::vector<double> s(keys, 0);
    for (std::size_t j = 0; j < keys; ++j) {
      for (std::size_t c = 0; c < dk; ++c) s[j] += Q[i * dk + c] * K[j * dk + c];
      s[j] /= std::sqrt(static_cast<double>(dk));
    }
    const double top = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - top));
    double h = 0;
    for (const double x : s) h -= x / sum * std::log(x / sum);
    e.mean += h / static_cast<double>(n);
    e.uniform += std::log(static_cast<double>(keys)) / static_cast<double>(n);
  }
  return e;
}

}  // namespace

TEST_CASE("new's default numbers give weights with structure: rows clearly less spread than uniform ones", "[new]") {
  // Before W_q and W_k were widened the scaled scores spread about 1/9 and every case below was within
  // 0.01 nats of uniform; a spread about 1 takes about 1/2 nat off (log n − σ²/2 for small σ).
  for (const std::size_t n : {16, 64}) {
    for (const bool causal : {false, true}) {
      NewInputRequest r = request(n, 4, 1, 1, 4);
      r.mask = causal ? MaskKind::causal : MaskKind::none;
      const Problem p = load_problem(make_new_input(r), "new");
      const Entropy e = mean_row_entropy(p, causal);
      INFO(fmt::format("n = {}, {}: mean row entropy {:.3f} nats, uniform {:.3f}", n, causal ? "causal" : "no mask",
                       e.mean, e.uniform));
      CHECK(e.mean < e.uniform - 0.2);
      if (!causal) CHECK(e.mean < std::log(static_cast<double>(n)) - 0.2);
    }
  }
}
