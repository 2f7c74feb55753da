// compare's verdict can fail: a flash pass that leaves out the rescale (the one line that makes the
// online softmax right) is judged FAIL, printed as "verdict: FAIL" and saved with tolerance.pass false.
// The wrong engine lives here, in the tests: the library's math has no switch that breaks it.

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/compare.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "render/pages/trace/terminal.hpp"
#include "trace/collector.hpp"

using namespace attn;

namespace {

// FlashAttention-2's forward pass with one mistake: when a key tile raises a row's max, the output
// accumulated so far is not multiplied by alpha = exp(m_prev - m_new). The running sum l still is,
// so rows whose max never rises are right, and rows whose max rises are not. The head outputs
// (B, h, n, d_v), from the heads the scores read in v.
template <class T>
Tensor<T> heads_without_rescale(const Problem& p, const ForwardValues<T>& v, TileSize tiles) {
  const Tensor<T>& Q = v[slot(rows::queries_read(p))];
  const Tensor<T>& K = v[slot(rows::keys_read(p))];
  const Tensor<T>& V = v[slot(Step::v_heads)];
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  Tensor<T> O_h({p.B, p.h, p.n, p.d_v});
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd) {
      const std::size_t kv = kv_head_of(hd, p.h, p.g);
      for (std::size_t r = 0; r < p.n; ++r) {
        T m = minus_inf, l = 0;
        std::vector<T> o(p.d_v, T{0});
        for (std::size_t c0 = 0; c0 < p.m; c0 += tiles.Bc) {
          const std::size_t c1 = std::min(p.m, c0 + tiles.Bc);
          std::vector<T> s(c1 - c0, minus_inf);
          T m_new = m;
          for (std::size_t c = c0; c < c1; ++c) {
            if (!p.mask.allows(b, r, c)) continue;
            T dot = 0;
            for (std::size_t e = 0; e < p.d_k; ++e) dot += Q(b, hd, r, e) * K(b, kv, c, e);
            s[c - c0] = dot * static_cast<T>(p.scale);
            m_new = std::max(m_new, s[c - c0]);
          }
          if (m_new == minus_inf) continue;
          l = std::exp(m - m_new) * l;  // the sum is rescaled ...
          for (std::size_t c = c0; c < c1; ++c) {
            const T w = std::exp(s[c - c0] - m_new);
            l += w;
            for (std::size_t e = 0; e < p.d_v; ++e) o[e] += w * V(b, kv, c, e);  // ... the output is not
          }
          m = m_new;
        }
        for (std::size_t e = 0; e < p.d_v; ++e) O_h(b, hd, r, e) = l == 0 ? T{0} : o[e] / l;
      }
    }
  return O_h;
}

// That pass with the rows around it, as flash has them.
template <class T>
AttentionResult<T> flash_without_rescale(const Problem& p, TileSize tiles) {
  NullObserver none;
  const Inputs<T> in(p);
  const ForwardValues<T> x =
      walk_around_attention(p, in, Keeper<T>(none, DType::float32), [&](const ForwardValues<T>& v) {
        return AttentionOut<T>{heads_without_rescale(p, v, tiles), Tensor<T>()};
      });
  return {x[slot(Step::output)], find_empty_rows(p), 0, Tensor<T>()};
}

std::shared_ptr<const Problem> cat_sat() {
  return std::make_shared<const Problem>(load_problem_file(ATTN_SOURCE_DIR "/data/the_cat_sat.json"));
}

}  // namespace

TEST_CASE("A flash without the rescale fails the verdict on the worked example, in both dtypes", "[compare][broken]") {
  // Tiles of 2 x 1: "The" meets its best key, "cat" (score 4/√2), after "The" (0): its max rises.
  const auto p = cat_sat();
  const TileSize tiles{2, 1};
  NullObserver none;
  const CompareRecord wrong32 =
      judge_flash<float>(*p, tiles, run_naive<float>(*p, none), flash_without_rescale<float>(*p, tiles));
  const CompareRecord wrong64 =
      judge_flash<double>(*p, tiles, run_naive<double>(*p, none), flash_without_rescale<double>(*p, tiles));
  CHECK_FALSE(wrong32.pass);
  CHECK_FALSE(wrong64.pass);
  // By hand: every V row of the worked example is [1, 1], so the right output is [1, 1] for every
  // token. "The" meets its keys in the order The (score 0), cat (2√2), sat (√2): without the rescale
  // its output is (1 + 1 + e^(-√2)) / (e^(-2√2) + 1 + e^(-√2)) = 2.2431 / 1.3022 = 1.7225 per column.
  CHECK(wrong64.flash.values()[0] == Approx(1.7225).margin(1e-4));  // (B, n, d_out): "The", column 0
  CHECK(wrong64.flash.values()[1] == Approx(1.7225).margin(1e-4));
  CHECK(wrong64.flash_vs_ref.max_abs == Approx(0.7225).margin(1e-4));
  CHECK(wrong32.flash_vs_ref.max_abs == Approx(0.7225).margin(1e-4));
  // The right flash, judged the same way, passes.
  CHECK(compare_engines<double>(*p, tiles, none, none).pass);
}

TEST_CASE("A verdict of FAIL is printed as such and saved with tolerance.pass false", "[compare][broken]") {
  const auto p = cat_sat();
  const TileSize tiles{2, 1};
  TraceCollector naive(p, DType::float32);
  const AttentionResult<float> naive_result = run_naive<float>(*p, naive);
  Trace trace = std::move(naive).finish(naive_result.empty_rows);
  trace.compare = judge_flash<float>(*p, tiles, naive_result, flash_without_rescale<float>(*p, tiles));
  trace.engine = Engine::both;

  RenderOptions options;
  options.compare_only = true;
  const std::string text = render_trace(trace, options);
  CHECK(text.find("verdict: FAIL") != std::string::npos);
  CHECK(text.find("verdict: PASS") == std::string::npos);

  const nlohmann::json saved = nlohmann::json::parse(trace_to_json(trace, "test"));
  CHECK(saved.at("compare").at("tolerance").at("pass") == false);
}

TEST_CASE("A flash without the rescale fails the verdict on the input with the largest noise floor of the tests",
          "[compare][broken]") {
  // tests/data/compare/float64_tiles_3x2.json: outputs up to about 105, where the noise floor is largest.
  const auto p = std::make_shared<const Problem>(
      load_problem_file(std::string(ATTN_SOURCE_DIR) + "/tests/data/compare/float64_tiles_3x2.json"));
  NullObserver none;
  for (const TileSize tiles : {TileSize{3, 2}, TileSize{1, 1}}) {
    INFO("tiles " << tiles.Br << " x " << tiles.Bc);
    CHECK_FALSE(
        judge_flash<double>(*p, tiles, run_naive<double>(*p, none), flash_without_rescale<double>(*p, tiles)).pass);
    CHECK_FALSE(
        judge_flash<float>(*p, tiles, run_naive<float>(*p, none), flash_without_rescale<float>(*p, tiles)).pass);
    // and the right flash passes
    CHECK(compare_engines<double>(*p, tiles, none, none).pass);
    CHECK(compare_engines<float>(*p, tiles, none, none).pass);
  }
}
