// The fast path's decode step (engine/fast_decode.hpp) against the traced decode (engine/decoder.hpp, itself
// checked bit for bit against the plain causal pass and against PyTorch): the same head outputs, on every
// instruction set this machine runs, on 1 and 2 threads, unsplit and split into chunks, for GQA, MQA, RoPE,
// softcap, a sliding window with sinks and a batch.

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/decoder.hpp"
#include "engine/fast_decode.hpp"
#include "io/examples.hpp"
#include "io/load.hpp"
#include "support.hpp"

using namespace attn;

namespace {

// Each decode step's query heads (as the scores read them), cache and head outputs, as the traced decode made them.
template <class T>
class Steps final : public DecodeObserver, public Observer {
 public:
  struct Step_ {
    std::size_t position = 0;
    Tensor<T> q, k_cache, v_cache, head_outputs;
  };
  Observer& prefill(const Problem&) override { return none_; }
  Observer& step(std::size_t position, const Problem&, const Problem&) override {
    steps.push_back({position, {}, {}, {}, {}});
    return *this;
  }
  bool wants(Step s) const override { return s == Step::q_heads || s == Step::q_rot || s == Step::head_outputs; }
  void on(Step s, const Tensor<float>& value) override { keep(s, value); }
  void on(Step s, const Tensor<double>& value) override { keep(s, value); }
  void on_step(const DecodeStepEvent<float>& e) override { cache(e); }
  void on_step(const DecodeStepEvent<double>& e) override { cache(e); }
  std::vector<Step_> steps;

 private:
  template <class U>
  void keep(Step s, const Tensor<U>& value) {
    if constexpr (std::is_same_v<T, U>) {
      if (s == Step::head_outputs) steps.back().head_outputs = value;
      else steps.back().q = value;  // q_rot follows q_heads when there is RoPE: the turned one stays
    }
  }
  template <class U>
  void cache(const DecodeStepEvent<U>& e) {
    if constexpr (std::is_same_v<T, U>) {
      steps.back().k_cache = e.k_cache;
      steps.back().v_cache = e.v_cache;
    }
  }
  NullObserver none_;
};

Problem example(const std::string& name) {
  const Example* e = find_example(name);
  REQUIRE(e != nullptr);
  return load_problem(std::string(e->text), name + ".json");
}

template <class T>
void check_fast(const std::string& name, const Problem& p, double tol) {
  Steps<T> traced;
  (void)run_decode<T>(p, {.prompt = 0}, traced);
  const std::size_t B = p.B, h = p.h, g = p.g, d_k = p.d_k, d_v = p.d_v;
  for (const kernel::Isa isa : kernel::runnable_isas())
    for (const std::size_t threads : {1, 2})
      for (const std::size_t split : {1, 2, 3}) {
        INFO(fmt::format("{}: {} {}, {} thread(s), split {}", name, kernel::name_of(isa),
                         sizeof(T) == 4 ? "float32" : "float64", threads, split));
        FastKvCache<T> cache(B, g, d_k, d_v, p.n, isa, 2);  // tiles of a few keys: many tiles, several a chunk
        for (const auto& s : traced.steps) {
          // the new token's key and value, the last row of the traced cache: (B, g·d)
          std::vector<T> k(B * g * d_k), v(B * g * d_v);
          for (std::size_t b = 0; b < B; ++b)
            for (std::size_t kv = 0; kv < g; ++kv) {
              for (std::size_t e = 0; e < d_k; ++e) k[(b * g + kv) * d_k + e] = s.k_cache(b, kv, s.position, e);
              for (std::size_t e = 0; e < d_v; ++e) v[(b * g + kv) * d_v + e] = s.v_cache(b, kv, s.position, e);
            }
          cache.append(k.data(), v.data());
          std::vector<T> o(B * h * d_v);
          fast_decode_step(p, s.position, cache, s.q.values().data(), o.data(),
                           {.threads = threads, .split = split, .isa = isa});
          double worst = 0;
          for (std::size_t at = 0; at < o.size(); ++at)
            worst = std::max(worst,
                             std::abs(static_cast<double>(o[at]) - static_cast<double>(s.head_outputs.values()[at])));
          INFO(fmt::format("position {}: max |fast - traced| = {}", s.position, worst));
          CHECK(worst <= tol);
        }
      }
}

}  // namespace

TEST_CASE("the fast decode step gives the traced decode's head outputs, split or not, on every instruction set",
          "[decode][fast]") {
  const std::vector<std::string> names = {"gpt-causal", "gqa",   "mqa",           "llama-layer",
                                          "softcap",    "sinks", "sliding-window"};
  for (const std::string& name : names) {
    const Problem p = example(name);
    REQUIRE_FALSE(fast_decode_refusal(p));
    // float64: the tile kernel and the traced rows sum in other orders (~1e-16 relative); float32: its
    // exps and sums in float32 over a few keys of values below 2 (a few 1e-7).
    check_fast<double>(name, p, 1e-12);
    check_fast<float>(name, p, 2e-6);
  }
  const Problem batch = load_problem(R"({"mask": "causal", "n_heads": 4, "n_kv_heads": 2,
      "X": [[[1, 0, 0.5, 0], [0, 1, 0, 0.5], [0.5, 0, 1, 0]], [[0, 0.5, 0, 1], [1, 1, 0, 0], [0.25, 0, 0, 1]]],
      "W_q": [[1, 0, 0, 0.5, 1, 0, 0, 1], [0, 1, 0.5, 0, 0, 1, 1, 0], [0.5, 0, 1, 0, 1, 1, 0, 0], [0, 0.5, 0, 1, 0, 0, 1, 1]],
      "W_k": [[0, 1, 1, 0], [1, 0, 0, 1], [0, 0.5, 0.5, 0], [0.5, 0, 0, 0.5]],
      "W_v": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]]})",
                                     "batch.json");
  check_fast<double>("batch", batch, 1e-12);
  check_fast<float>("batch", batch, 2e-6);
  CHECK(fast_decode_refusal(load_problem(R"({"mask": "causal", "alibi": true, "X": [[1, 0]], "W_q": [[1], [0]],
      "W_k": [[1], [0]], "W_v": [[1], [0]]})",
                                         "alibi.json")));
}
