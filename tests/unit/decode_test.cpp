// Decoding (engine/decoder.hpp): the prefill and the decode steps give every token's output row. Unsplit, each
// row is the plain causal pass's row bit for bit (the same sums in the same order; the keys after a token are
// -inf there and add exactly 0); split into chunks and merged (flash-decoding), within rounding of it; paged,
// the same bits as contiguous. The plain pass (run_naive) is the independent computation; the merge and the
// pool are also checked by hand.

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/decoder.hpp"
#include "engine/naive.hpp"
#include "io/examples.hpp"
#include "io/load.hpp"
#include "support.hpp"

using namespace attn;

namespace {

// Records what a decode reports: the steps' names in order, each step's cache length and its split.
class Watch final : public DecodeObserver {
 public:
  Observer& prefill(const Problem& prompt) override {
    prompt_n = prompt.n;
    return null_;
  }
  Observer& step(std::size_t position, const Problem& token, const Problem& attend) override {
    positions.push_back(position);
    token_m.push_back(token.m);
    attend_m.push_back(attend.m);
    return steps_;
  }
  void on_step(const DecodeStepEvent<float>& e) override { seen(e); }
  void on_step(const DecodeStepEvent<double>& e) override { seen(e); }

  std::size_t prompt_n = 0;
  std::vector<std::size_t> positions, token_m, attend_m, cache_lengths, chunks;
  test::StepRecorder steps_;

 private:
  template <class T>
  void seen(const DecodeStepEvent<T>& e) {
    cache_lengths.push_back(e.k_cache.dim(2));
    chunks.push_back(e.split ? e.split->chunks.size() : 0);
  }
  NullObserver null_;
};

Problem example(const std::string& name, const std::string& extra = "") {
  const Example* e = find_example(name);
  REQUIRE(e != nullptr);
  std::string text(e->text);
  if (!extra.empty()) text = text.substr(0, text.rfind('}')) + "," + extra + "}";
  return load_problem(text, name + ".json");
}

// Causal inputs that cover what a decode step must carry: heads, GQA/MQA, W_o, RoPE, a sliding window with
// sinks, softcap, ALiBi, a batch.
std::vector<std::pair<std::string, Problem>> inputs() {
  return {
      {"gpt-causal", example("gpt-causal")},
      {"gqa", example("gqa")},
      {"mqa", example("mqa")},
      {"llama-layer", example("llama-layer")},
      {"sinks", example("sinks")},
      {"softcap", example("softcap")},
      {"gpt2-layer", example("gpt2-layer")},
      {"sliding-window", example("sliding-window")},
      {"gpt-causal + alibi", example("gpt-causal", "\"alibi\": true")},
      {"batch", load_problem(R"({"mask": "causal", "n_heads": 2, "n_kv_heads": 1,
          "X": [[[1, 0, 0.5, 0], [0, 1, 0, 0.5], [0.5, 0, 1, 0]], [[0, 0.5, 0, 1], [1, 1, 0, 0], [0.25, 0, 0, 1]]],
          "W_q": [[1, 0, 0, 0.5], [0, 1, 0.5, 0], [0.5, 0, 1, 0], [0, 0.5, 0, 1]],
          "W_k": [[0, 1], [1, 0], [0, 0.5], [0.5, 0]], "W_v": [[1, 0], [0, 1], [1, 1], [0, 0]],
          "rope": {"theta": 100}})",
                             "batch.json")},
  };
}

template <class T>
Tensor<double> decoded(const Problem& p, const DecodePlan& plan, DType storage = DType::float32) {
  Watch watch;
  return cast<double>(run_decode<T>(p, plan, watch, storage).output);
}

template <class T>
Tensor<double> plain(const Problem& p, DType storage = DType::float32) {
  NullObserver none;
  return cast<double>(run_naive<T>(p, none, storage).output);
}

// A cache row of one head and one feature.
Tensor<double> one(double x) { return Tensor<double>({1, 1, 1}, std::vector<double>{x}); }

// Bit for bit: the same doubles (a float32 value widens exactly), -0 and +0 told apart.
bool same_bits(const Tensor<double>& a, const Tensor<double>& b) {
  if (a.shape() != b.shape()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (std::memcmp(&a.values()[k], &b.values()[k], sizeof(double)) != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("unsplit decoding gives the plain causal pass's rows bit for bit, whatever the prompt", "[decode]") {
  for (const auto& [name, p] : inputs())
    for (std::size_t prompt = 0; prompt < p.n; ++prompt) {
      INFO(fmt::format("{}, prompt {}", name, prompt));
      CHECK(same_bits(decoded<float>(p, {.prompt = prompt}), plain<float>(p)));
      CHECK(same_bits(decoded<double>(p, {.prompt = prompt}), plain<double>(p)));
      CHECK(same_bits(decoded<float>(p, {.prompt = prompt}, DType::float16), plain<float>(p, DType::float16)));
    }
}

TEST_CASE("a paged cache gives the same bits as a contiguous one, in any page size and pool order", "[decode]") {
  for (const auto& [name, p] : inputs())
    for (const std::size_t page : {1, 2, 3, 5})
      for (const std::uint64_t seed : {0, 7}) {
        INFO(fmt::format("{}, pages of {}, seed {}", name, page, seed));
        const DecodePlan plan{.prompt = default_prompt(p.n), .page_size = page, .page_seed = seed};
        CHECK(same_bits(decoded<float>(p, plan), plain<float>(p)));
        CHECK(same_bits(decoded<float>(p, {.prompt = 1, .split = 2, .page_size = page, .page_seed = seed}),
                        decoded<float>(p, {.prompt = 1, .split = 2})));
      }
}

TEST_CASE("split into chunks and merged, decoding agrees with the plain pass to rounding", "[decode][split]") {
  for (const auto& [name, p] : inputs())
    for (const std::size_t S : {2, 3, 4, 7}) {
      INFO(fmt::format("{}, split {}", name, S));
      const DecodePlan plan{.prompt = 1, .split = S};
      // float64: the merge reorders a handful of sums of numbers below 10 (relative error ~1e-16 each).
      test::check_close("float64", decoded<double>(p, plan), plain<double>(p), 1e-13);
      test::check_close("float32", decoded<float>(p, plan), plain<double>(p), 1e-5);
    }
}

TEST_CASE("a decode reports the prefill, then each token with its growing cache and its chunks", "[decode]") {
  const Problem p = example("gpt-causal");  // 4 tokens
  Watch watch;
  (void)run_decode<float>(p, {.prompt = 1, .split = 3}, watch);
  CHECK(watch.prompt_n == 1);
  CHECK(watch.positions == std::vector<std::size_t>{1, 2, 3});
  CHECK(watch.token_m == std::vector<std::size_t>{1, 1, 1});
  CHECK(watch.attend_m == std::vector<std::size_t>{2, 3, 4});
  CHECK(watch.cache_lengths == std::vector<std::size_t>{2, 3, 4});
  CHECK(watch.chunks == std::vector<std::size_t>{3, 3, 3});
  // the last step's row: one query against all four keys, 2 heads; the split never forms the weights
  CHECK(watch.steps_.at(Step::scores).shape() == Shape{1, 2, 1, 4});
  CHECK(watch.steps_.at(Step::k).shape() == Shape{1, 1, 4});
  CHECK(watch.steps_.at(Step::output).shape() == Shape{1, 1, 4});
  CHECK_THROWS(watch.steps_.at(Step::weights));
}

TEST_CASE("chunks of a cache are as even as whole keys allow", "[decode][split]") {
  CHECK(chunk_of(0, 3, 4) == std::pair<std::size_t, std::size_t>{0, 1});
  CHECK(chunk_of(1, 3, 4) == std::pair<std::size_t, std::size_t>{1, 2});
  CHECK(chunk_of(2, 3, 4) == std::pair<std::size_t, std::size_t>{2, 4});
  CHECK(chunk_of(0, 3, 2) == std::pair<std::size_t, std::size_t>{0, 0});  // fewer keys than chunks: one empty
  CHECK(default_prompt(4) == 1);
  CHECK(default_prompt(3) == 0);
}

TEST_CASE("merging two chunks by their log-sum-exps gives the whole row's softmax (by hand)", "[decode][split]") {
  // Row scores [0, 0 | log 2]: chunk 1 has lse = log 2, o = (v0 + v1)/2; chunk 2 lse = log 2, o = v2.
  // Whole row: Σ exp = 1 + 1 + 2 = 4, lse = log 4, weights 1/4, 1/4, 1/2.
  const std::vector<double> lse = {std::log(2.0), std::log(2.0)};
  const Tensor<double> o({2, 2}, {0.5, 1.5, 4.0, -2.0});  // v0 = (1, 1), v1 = (0, 2), v2 = (4, -2)
  const MergedRow<double> row = merge_chunks<double>(lse, o);
  CHECK(row.lse == Approx(std::log(4.0)));
  CHECK(row.share[0] == Approx(0.5));
  CHECK(row.share[1] == Approx(0.5));
  CHECK(row.o[0] == Approx(0.25 * 1 + 0.25 * 0 + 0.5 * 4));
  CHECK(row.o[1] == Approx(0.25 * 1 + 0.25 * 2 + 0.5 * -2));
  // An empty chunk (lse = -inf) has no share; a sink of logit log 4 takes half of a row whose lse is log 4.
  const std::vector<double> with_empty = {std::log(4.0), -std::numeric_limits<double>::infinity()};
  const MergedRow<double> sunk = merge_chunks<double>(with_empty, o, std::log(4.0));
  CHECK(sunk.lse == Approx(std::log(8.0)));
  CHECK(sunk.share[0] == Approx(0.5));
  CHECK(sunk.share[1] == 0);
  CHECK(sunk.sink_share == Approx(0.5));
  CHECK(sunk.o[0] == Approx(0.25));
}

TEST_CASE("sequences of different lengths share one pool of pages, each reading back what it wrote",
          "[decode][pages]") {
  // 3 sequences of 1, 5 and 3 tokens in pages of 2: 1 + 3 + 2 = 6 pages of a pool of 7.
  KvCache<double> cache(3, 1, 1, 1, 2, 7, 42);
  const std::vector<std::size_t> lengths = {1, 5, 3};
  for (std::size_t step = 0; step < 5; ++step)  // interleaved, one token at a time, as a server's batch grows
    for (std::size_t s = 0; s < 3; ++s)
      if (step < lengths[s]) {
        const double x = 10.0 * static_cast<double>(s) + static_cast<double>(step);
        cache.append(s, one(x), one(-x));
      }
  std::set<std::size_t> pages;
  for (std::size_t s = 0; s < 3; ++s) {
    CHECK(cache.length(s) == lengths[s]);
    CHECK(cache.table(s).size() == (lengths[s] + 1) / 2);
    pages.insert(cache.table(s).begin(), cache.table(s).end());
    const Tensor<double> K = cache.keys(s), V = cache.values(s);
    for (std::size_t j = 0; j < lengths[s]; ++j) {
      CHECK(K(0, j, 0) == 10.0 * static_cast<double>(s) + static_cast<double>(j));
      CHECK(V(0, j, 0) == -K(0, j, 0));
      CHECK(cache.where(s, j).page == cache.table(s)[j / 2]);
      CHECK(cache.where(s, j).slot == j % 2);
    }
  }
  CHECK(pages.size() == 6);  // no page is given twice
  CHECK(cache.pages_in_use() == 6);
  CHECK(cache.pool_pages() == 7);
  // The pool hands pages out in a seeded order: not 0, 1, 2, … and not the same for another seed.
  const std::vector<std::size_t> first = cache.table(1);
  CHECK(first != std::vector<std::size_t>{1, 4, 5});
  KvCache<double> other(3, 1, 1, 1, 2, 7, 43);
  for (std::size_t j = 0; j < 5; ++j) other.append(1, one(0.0), one(0.0));
  CHECK(other.table(1) != first);
  // A full pool says so.
  KvCache<double> small(1, 1, 1, 1, 1, 1, 0);
  small.append(0, one(0.0), one(0.0));
  CHECK_THROWS_AS(small.append(0, one(0.0), one(0.0)), std::length_error);
}

TEST_CASE("decoding refuses what is not causal self-attention, and a prompt with nothing after it", "[decode]") {
  CHECK(decode_refusal(example("gpt-causal")) == std::nullopt);
  CHECK(decode_refusal(example("the-cat-sat"))->find("causal mask") != std::string::npos);
  CHECK(decode_refusal(example("cross-attention"))->find("self-attention") != std::string::npos);
  CHECK(decode_refusal(example("kv-cache"))->find("self-attention") != std::string::npos);
  CHECK(decode_refusal(example("explainer-dropout"))->find("dropout") != std::string::npos);
  CHECK(decode_refusal(example("padded-batch"))->find("causal mask") != std::string::npos);
  Watch watch;
  CHECK_THROWS_AS(run_decode<float>(example("gpt-causal"), {.prompt = 4}, watch), std::invalid_argument);
}
