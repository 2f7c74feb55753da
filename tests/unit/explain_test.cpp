// attn-trace explain: the worked example by hand, every term sum against the engine's own numbers on the
// bundled examples, the flash walk against naive, the output numbers, the mask, and naming tokens.

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "io/load.hpp"
#include "lessons/explain.hpp"
#include "support.hpp"

using namespace attn;

namespace {

std::shared_ptr<const Problem> example(const std::string& name) {
  return std::make_shared<const Problem>(load_problem_file(std::string(ATTN_SOURCE_DIR) + "/data/" + name));
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double roundoff_of(DType dtype) { return dtype == DType::float32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53); }

// How far a sum of `count` terms (and a bias) computed in `dtype` may be from the same sum in double:
// count + 1 roundings of at most u times the magnitudes summed, twice over for safety.
double sum_tolerance(const ProductSum& s, DType dtype) {
  double magnitude = s.bias ? std::fabs(*s.bias) : 0.0;
  for (const double t : s.terms) magnitude += std::fabs(t);
  return 2 * static_cast<double>(s.terms.size() + 1) * roundoff_of(dtype) * magnitude + 1e-300;
}

// How far flash's head output O / l may be from Σ_j a_j·v_j formed in double from the same p and alphas:
// each term went through its product, at most T_c rescales and m + T_c additions in the dtype, then the
// division by l; twice over for safety.
double flash_sum_tolerance(const ProductSum& o, std::size_t m, std::size_t key_tiles, DType dtype) {
  double magnitude = std::fabs(o.value);
  for (const double t : o.terms) magnitude += std::fabs(t);
  return 2 * static_cast<double>(m + 2 * key_tiles + 4) * roundoff_of(dtype) * magnitude + 1e-300;
}

void check_sum(const std::string& what, const ProductSum& s, double engine, DType dtype) {
  INFO(what << ": engine " << engine << ", explanation " << s.value << ", terms sum to " << s.recomputed());
  CHECK(s.value == engine);  // the number shown is the engine's
  CHECK(std::fabs(s.recomputed() - s.value) <= sum_tolerance(s, dtype));
  CHECK(s.terms.size() == s.a.size());
  for (std::size_t t = 0; t < s.terms.size(); ++t) CHECK(s.terms[t] == s.a[t] * s.b[t]);
}

// Every (batch, head, query, key) of `name`, explained in T and checked against an independent run of
// the naive engine in T.
template <class T>
void check_every_weight(const std::string& name, DType dtype) {
  const auto p = example(name);
  const test::Run<T> run = test::run_recorded<T>(*p);
  const Tensor<double>& Q = run.steps.at(Step::q_heads);       // (B, h, n, d_k)
  const Tensor<double>& K = run.steps.at(Step::k_heads);       // (B, g, m, d_k)
  const Tensor<double>& S = run.steps.at(Step::scores);        // (B, h, n, m)
  const Tensor<double>& S1 = run.steps.at(Step::scaled);       // (B, h, n, m)
  const Tensor<double>& A = run.steps.at(Step::weights);       // (B, h, n, m)
  const Tensor<double>& O = run.steps.at(Step::head_outputs);  // (B, h, n, d_v)
  for (std::size_t b = 0; b < p->B; ++b)
    for (std::size_t hd = 0; hd < p->h; ++hd)
      for (std::size_t i = 0; i < p->n; ++i)
        for (std::size_t j = 0; j < p->m; ++j) {
          INFO(name << " batch " << b << ", head " << hd << ", query " << i << ", key " << j);
          const Explanation e = explain_weight(p, {.batch = b, .head = hd, .query = i, .key = j, .dtype = dtype});
          const std::size_t kv = e.kv_head;
          CHECK(kv == hd / (p->h / p->g));
          for (std::size_t c = 0; c < p->d_k; ++c) {
            check_sum("q", e.q[c], Q(b, hd, i, c), dtype);
            check_sum("k", e.k[c], K(b, kv, j, c), dtype);
          }
          check_sum("q·k", e.dot, S(b, hd, i, j), dtype);
          CHECK(e.scaled == S1(b, hd, i, j));
          CHECK(e.weight == A(b, hd, i, j));
          CHECK(e.allowed == p->mask.allows(b, i, j));
          // the recomputed exps and sum give the engine's weight, key by key
          for (std::size_t k = 0; k < p->m; ++k) {
            CHECK(e.row[k].weight == A(b, hd, i, k));
            if (!e.empty_row)
              CHECK(static_cast<T>(e.row[k].exp) / static_cast<T>(e.row_sum) == static_cast<T>(A(b, hd, i, k)));
          }
          for (std::size_t c = 0; c < p->d_v; ++c) check_sum("o", e.o[c], O(b, hd, i, c), dtype);
        }
}

}  // namespace

TEST_CASE("the worked example: cat attends to The with weight 0.7679, every operation as by hand", "[explain]") {
  const Explanation e = explain_weight(example("the_cat_sat.json"), {.query = 1, .key = 0});
  // float32 keeps about 7 significant digits; every number here is below 4, so a few roundings stay
  // far below 1e-6.
  constexpr double tol = 1e-6;
  REQUIRE(e.q.size() == 2);
  REQUIRE(e.k.size() == 2);
  // q = x_cat·W_q = [0,1,0,1]·W_q = [0, 2]; k = x_The·W_k = [1,0,1,0]·W_k = [0, 2]
  CHECK(e.x == std::vector<double>{0, 1, 0, 1});
  CHECK(e.c == std::vector<double>{1, 0, 1, 0});
  CHECK(e.q[0].value == 0);
  CHECK(e.q[1].value == 2);
  CHECK(e.q[1].terms == std::vector<double>{0, 1, 0, 1});
  CHECK(e.k[0].value == 0);
  CHECK(e.k[1].value == 2);
  // q·k = 0·0 + 2·2 = 4
  CHECK(e.dot.terms == std::vector<double>{0, 4});
  CHECK(e.dot.recomputed() == 4);
  CHECK(e.dot.value == 4);
  // s = 4/√2; the row of cat: [4/√2, 0, 2/√2], max 4/√2
  const double s0 = 4 / std::sqrt(2.0), s2 = 2 / std::sqrt(2.0);
  CHECK(e.scaled == Approx(2.8284).margin(1e-4));
  CHECK(std::fabs(e.scaled - s0) <= tol);
  CHECK(e.allowed);
  CHECK(e.mask == "none");
  REQUIRE(e.row.size() == 3);
  CHECK(e.argmax == 0);
  CHECK(std::fabs(e.row_max - s0) <= tol);
  // exp(s − max) = [1, e^(−2.8284) = 0.05911, e^(−1.4142) = 0.24312], sum 1.30223, a = 1/1.30223
  const double e0 = 1, e1 = std::exp(0 - s0), e2 = std::exp(s2 - s0);
  CHECK(std::fabs(e.row[0].exp - e0) <= tol);
  CHECK(std::fabs(e.row[1].exp - e1) <= tol);
  CHECK(std::fabs(e.row[2].exp - e2) <= tol);
  CHECK(e1 == Approx(0.05911).margin(1e-5));
  CHECK(e2 == Approx(0.24312).margin(1e-5));
  CHECK(std::fabs(e.row_sum - (e0 + e1 + e2)) <= tol);
  CHECK(e.row_sum == Approx(1.30223).margin(1e-5));
  CHECK(std::fabs(e.weight - 1 / (e0 + e1 + e2)) <= tol);
  CHECK(e.weight == Approx(0.76791).margin(1e-5));
  // o_cat = Σ_j a_j·v_j, and The's share a·v_The
  REQUIRE(e.o.size() == 2);
  CHECK(e.v == std::vector<double>{1, 1});  // x_The·W_v = [1,0,1,0]·W_v
  CHECK(std::fabs(e.o[0].recomputed() - e.o[0].value) <= tol);
  CHECK(e.o[0].terms[0] == e.weight * e.v[0]);
}

TEST_CASE("every term sum agrees with the engine's recorded values on the bundled examples", "[explain]") {
  for (const std::string name :
       {"the_cat_sat.json", "gqa.json", "mqa.json", "gpt_causal.json", "bert_bias.json", "cross_attention.json",
        "padded_batch.json", "kv_cache.json", "sliding_window.json", "pytorch_layout.json"})
    check_every_weight<float>(name, DType::float32);
  check_every_weight<double>("gqa.json", DType::float64);
  check_every_weight<double>("bert_bias.json", DType::float64);
}

TEST_CASE("flash: p times the later alphas over l is the weight, within the rule of naive's", "[explain][flash]") {
  for (const std::string name : {"the_cat_sat.json", "gqa.json", "sliding_window.json", "padded_batch.json"})
    for (const DType dtype : {DType::float32, DType::float64}) {
      const auto p = example(name);
      for (const TileSize tiles : {TileSize{2, 1}, TileSize{1, 2}, TileSize{3, 3}})
        for (std::size_t b = 0; b < p->B; ++b)
          for (std::size_t hd = 0; hd < p->h; ++hd)
            for (std::size_t i = 0; i < p->n; ++i)
              for (std::size_t j = 0; j < p->m; ++j) {
                INFO(name << " " << name_of(dtype) << ", tiles " << tiles.Br << "x" << tiles.Bc << ", batch " << b
                          << ", head " << hd << ", query " << i << ", key " << j);
                const Explanation e = explain_weight(p, {.batch = b,
                                                         .head = hd,
                                                         .query = i,
                                                         .key = j,
                                                         .engine = Engine::flash,
                                                         .dtype = dtype,
                                                         .tile_size = tiles});
                REQUIRE(e.flash);
                const FlashExplanation& f = *e.flash;
                double product = 1;
                for (const double alpha : f.later_alphas) product *= alpha;
                const double weight = f.l == 0 ? 0 : f.p * product / f.l;
                CHECK(f.weight == weight);
                CHECK(f.naive_weight == e.weight);
                CHECK(std::fabs(weight - e.weight) <= f.tolerance);
                CHECK(f.within);
                CHECK(f.steps.size() == (p->m + tiles.Bc - 1) / tiles.Bc);
                CHECK(f.weights.at(j) == Approx(weight).epsilon(1e-12).margin(1e-300));
                if (!e.allowed) CHECK(weight == 0);
                // the head output is flash's O / l, and Σ_j a_j·v_j with flash's weights gives it
                for (const ProductSum& o : e.o)
                  CHECK(std::fabs(o.recomputed() - o.value) <= flash_sum_tolerance(o, p->m, f.steps.size(), dtype));
              }
    }
}

TEST_CASE("flash on the worked example: a later tile raises the max and rescales the key by alpha",
          "[explain][flash]") {
  // Query The (row 0): scaled scores [0, 4/√2, 2/√2], tiles of 2 × 1. Key 0 enters tile 0 with m = 0,
  // p = 1; tile 1 raises m to 4/√2, so alpha = exp(0 − 4/√2) = 0.05911; tile 2 leaves m: alpha = 1.
  const Explanation e =
      explain_weight(example("the_cat_sat.json"), {.query = 0, .key = 0, .engine = Engine::flash, .tile_size = {2, 1}});
  REQUIRE(e.flash);
  const FlashExplanation& f = *e.flash;
  const double s1 = 4 / std::sqrt(2.0), s2 = 2 / std::sqrt(2.0);
  CHECK(f.key_tile == 0);
  CHECK(f.p == 1);
  REQUIRE(f.later_alphas.size() == 2);
  CHECK(std::fabs(f.later_alphas[0] - std::exp(-s1)) <= 1e-6);
  CHECK(f.later_alphas[1] == 1);
  const double sum = std::exp(-s1) + 1 + std::exp(s2 - s1);
  CHECK(std::fabs(f.l - sum) <= 1e-6);
  CHECK(std::fabs(f.weight - std::exp(-s1) / sum) <= 1e-6);
  CHECK(f.weight == Approx(0.0454).margin(1e-4));
  CHECK(f.steps[1].m_prev == 0);
  CHECK(std::fabs(f.steps[1].m_new - s1) <= 1e-6);
  CHECK(f.steps[2].share == Approx(std::exp(-s1)).margin(1e-6));
}

TEST_CASE("one output number: its terms sum to the engine's output, head by head", "[explain][output]") {
  for (const std::string name :
       {"gpt_causal.json", "bert_bias.json", "gqa.json", "the_cat_sat.json", "padded_batch.json"})
    for (const Engine engine : {Engine::naive, Engine::flash}) {
      const auto p = example(name);
      const test::Run<float> run = test::run_recorded<float>(*p);
      const Tensor<double>& Y = run.steps.at(Step::output);  // (B, n, d_out)
      for (std::size_t b = 0; b < p->B; ++b)
        for (std::size_t i = 0; i < p->n; ++i)
          for (std::size_t c = 0; c < p->d_out; ++c) {
            INFO(name << " " << name_of(engine) << ", batch " << b << ", query " << i << ", column " << c);
            const OutputExplanation e =
                explain_output(p, {.batch = b, .query = i, .column = c, .engine = engine, .tile_size = {2, 2}});
            CHECK(e.output_projection == p->has_output_projection());
            // flash's output is within rounding of naive's; naive's is the very same number
            if (engine == Engine::naive) CHECK(e.y.value == Y(b, i, c));
            else CHECK(e.y.value == Approx(Y(b, i, c)).margin(1e-5));
            CHECK(std::fabs(e.y.recomputed() - e.y.value) <= sum_tolerance(e.y, DType::float32) + 1e-6);
            if (e.output_projection) {
              double heads = e.y.bias ? *e.y.bias : 0.0;
              for (const double s : e.head_sums) heads += s;
              CHECK(heads == Approx(e.y.recomputed()).margin(1e-12));
              REQUIRE_FALSE(e.top.empty());
              for (const std::size_t k : e.top) CHECK(std::fabs(e.y.terms[k]) <= std::fabs(e.y.terms[e.top.front()]));
            } else {
              CHECK(e.head == c / p->d_v);
              CHECK(e.y.terms.size() == p->m);
            }
          }
    }
}

TEST_CASE("a masked pair in a causal example has weight 0 and says why, with its row still shown", "[explain]") {
  // gpt_causal: query 0 ("The") may see key 0 only
  const Explanation e = explain_weight(example("gpt_causal.json"), {.head = 1, .query = 0, .key = 2});
  CHECK_FALSE(e.allowed);
  CHECK(e.weight == 0);
  CHECK(contains(e.mask_reason, "causal"));
  CHECK(contains(e.mask_reason, "key 2"));
  REQUIRE(e.row.size() == 4);
  CHECK(e.row[0].allowed);
  CHECK(e.row[0].weight == 1);
  CHECK(std::isinf(e.row[2].shifted));
  CHECK(e.row[2].exp == 0);
  CHECK(e.o[0].terms[2] == 0);

  const Explanation flash = explain_weight(
      example("gpt_causal.json"), {.head = 1, .query = 0, .key = 2, .engine = Engine::flash, .tile_size = {1, 1}});
  REQUIRE(flash.flash);
  CHECK(flash.flash->weight == 0);
  CHECK(flash.flash->steps[2].skipped);  // the whole tile is masked for the query tile
}

TEST_CASE("tokens are found by name first, by index when no token has that name", "[explain]") {
  const std::vector<std::string> tokens = {"a", "1", "b", "a"};
  CHECK(find_token(tokens, "b", "query").index == 2u);
  CHECK(find_token(tokens, "1", "query").index == 1u);  // the name wins over the index
  CHECK(find_token(tokens, "2", "query").index == 2u);
  const TokenLookup ambiguous = find_token(tokens, "a", "query");
  CHECK_FALSE(ambiguous.index);
  CHECK(contains(ambiguous.error, "0, 3"));
  const TokenLookup unknown = find_token(tokens, "dog", "key");
  CHECK_FALSE(unknown.index);
  CHECK(contains(unknown.error, "\"dog\""));
  CHECK(contains(unknown.error, "\"a\", \"1\", \"b\", \"a\""));
  CHECK(contains(unknown.error, "0 to 3"));
  const TokenLookup far = find_token(tokens, "4", "key");
  CHECK_FALSE(far.index);
  CHECK(contains(far.error, "0 to 3"));
  std::vector<std::string> many;
  for (int k = 0; k < 20; ++k) many.push_back(fmt::format("w{}", k));
  CHECK(contains(find_token(many, "x", "query").error, "(12 more)"));
}

TEST_CASE("explain refuses indices out of range as a precondition", "[explain]") {
  const auto p = example("the_cat_sat.json");
  CHECK_THROWS_AS(explain_weight(p, {.head = 1}), std::out_of_range);
  CHECK_THROWS_AS(explain_weight(p, {.key = 3}), std::out_of_range);
  CHECK_THROWS_AS(explain_output(p, {.column = 2}), std::out_of_range);
}
