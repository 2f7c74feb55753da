// attn-trace properties: the checks on hand-made weights (which can break them) and on the bundled
// examples (which must not).

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "io/load.hpp"
#include "io/properties_json.hpp"
#include "lessons/properties.hpp"

using namespace attn;

namespace {

std::shared_ptr<const Problem> example(const std::string& name) {
  return std::make_shared<const Problem>(load_problem_file(std::string(ATTN_SOURCE_DIR) + "/data/" + name));
}

const PropertyCheck& find(const std::vector<PropertyCheck>& checks, const std::string& name) {
  const auto it = std::find_if(checks.begin(), checks.end(), [&](const PropertyCheck& c) { return c.name == name; });
  REQUIRE(it != checks.end());
  return *it;
}

// One batch item, one head: (1, 1, n, m) from the rows written out.
Tensor<double> weights(std::size_t n, std::size_t m, std::vector<double> rows) {
  return Tensor<double>({1, 1, n, m}, std::move(rows));
}

Mask causal(std::size_t n) {
  Mask mask;
  mask.kind = MaskKind::causal;
  mask.n = mask.m = n;
  return mask;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the worked example's rows sum to 1, its columns to 1.1466, 1.1466 and 0.7067", "[properties]") {
  const std::vector<PropertyCheck> checks = check_properties(example("the_cat_sat.json"), {});
  REQUIRE(checks.size() == 5);
  const PropertyCheck& rows = find(checks, "rows sum to 1");
  CHECK(rows.holds);
  CHECK(rows.expected);
  CHECK(rows.tolerance == Approx(5 * std::ldexp(1.0, -24)));  // (m + 2)·u, m = 3
  // By hand, the weights are [[0.0454, 0.7679, 0.1867], [0.7679, 0.0454, 0.1867], [1/3, 1/3, 1/3]]: the
  // columns sum to 1.1466, 1.1466 and 0.7067, the furthest from 1 by 0.2933.
  const PropertyCheck& columns = find(checks, "columns sum to 1");
  CHECK_FALSE(columns.expected);
  CHECK_FALSE(columns.holds);
  CHECK(columns.figure == Approx(0.2933).margin(1e-4));
  const PropertyCheck& equivariance = find(checks, "permutation equivariance");
  CHECK(equivariance.expected);  // no mask
  CHECK(equivariance.holds);
  CHECK(equivariance.figure <= equivariance.tolerance);
  const PropertyCheck& masked = find(checks, "masked keys get weight 0");
  CHECK(masked.holds);
  CHECK(contains(masked.reason, "forbids no key"));
  CHECK(find(checks, "flash equals naive").holds);
  CHECK(all_expected_hold(checks));
}

TEST_CASE("with a causal mask equivariance is not expected, and masked keys get exactly 0", "[properties]") {
  for (const DType dtype : {DType::float32, DType::float64}) {
    const std::vector<PropertyCheck> checks = check_properties(example("gpt_causal.json"), {.dtype = dtype});
    const PropertyCheck& equivariance = find(checks, "permutation equivariance");
    CHECK_FALSE(equivariance.expected);
    CHECK_FALSE(equivariance.holds);  // the shuffled tokens see other keys
    CHECK(contains(equivariance.reason, "depends on positions"));
    const PropertyCheck& masked = find(checks, "masked keys get weight 0");
    CHECK(masked.holds);
    CHECK(masked.figure == 0);
    CHECK(find(checks, "rows sum to 1").holds);
    CHECK(all_expected_hold(checks));
  }
}

TEST_CASE("every bundled example has every property it is expected to have, with any seed", "[properties]") {
  for (const std::string name :
       {"bert_bias.json", "cross_attention.json", "gpt_causal.json", "gqa.json", "kv_cache.json", "padded_batch.json",
        "pytorch_layout.json", "sliding_window.json", "the_cat_sat.json"})
    for (const DType dtype : {DType::float32, DType::float64})
      for (const std::uint64_t seed : {0ULL, 1ULL, 12345ULL}) {
        INFO(name << " " << name_of(dtype) << " seed " << seed);
        const std::shared_ptr<const Problem> p = example(name);
        const std::vector<PropertyCheck> checks = check_properties(p, {.dtype = dtype, .seed = seed});
        for (const PropertyCheck& c : checks) {
          INFO(c.name << ": figure " << c.figure << ", tolerance " << c.tolerance << ": " << c.reason);
          CHECK((c.holds || !c.expected));
        }
        const bool by_position = p->mask.kind == MaskKind::causal || p->mask.kind == MaskKind::sliding_window;
        CHECK(find(checks, "permutation equivariance").expected == !by_position);
      }
}

TEST_CASE("rows that do not sum to 1 fail the check, and an emptied row must sum to 0", "[properties]") {
  // rows [0.5, 0.6] and [1, 0]: the first is off by 0.1
  const Tensor<double> A = weights(2, 2, {0.5, 0.6, 1, 0});
  const PropertyCheck bad = rows_sum_to_one(A, {}, DType::float32);
  CHECK_FALSE(bad.holds);
  CHECK(bad.figure == Approx(0.1));
  CHECK(bad.tolerance == Approx(4 * std::ldexp(1.0, -24)));

  // the mask emptied the first row, which still has weight: that breaks the one policy
  const std::vector<EmptyRow> first{{0, 0}};
  CHECK_FALSE(rows_sum_to_one(A, first, DType::float32).holds);
  const PropertyCheck fine = rows_sum_to_one(weights(2, 2, {0, 0, 0.25, 0.75}), first, DType::float32);
  CHECK(fine.holds);
  CHECK(fine.figure == 0);
  CHECK(contains(fine.reason, "the 1 row the mask empties sum to 0"));
}

TEST_CASE("columns sum to 1 is an observation: it can hold, but is never expected", "[properties]") {
  const PropertyCheck identity = columns_sum_to_one(weights(2, 2, {1, 0, 0, 1}), DType::float64);
  CHECK(identity.holds);
  CHECK_FALSE(identity.expected);
  const PropertyCheck both_on_one = columns_sum_to_one(weights(2, 2, {1, 0, 1, 0}), DType::float64);
  CHECK_FALSE(both_on_one.holds);
  CHECK(both_on_one.figure == 1);  // columns 2 and 0
}

TEST_CASE("weight on a key the mask forbids fails the check, with the largest such weight", "[properties]") {
  // causal, 3 × 3: the forbidden keys are above the diagonal, (0, 1), (0, 2) and (1, 2)
  const Tensor<double> A = weights(3, 3, {0.9, 0.1, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5});
  const PropertyCheck bad = masked_keys_get_zero(A, causal(3));
  CHECK_FALSE(bad.holds);
  CHECK(bad.figure == 0.1);
  CHECK(contains(bad.reason, "3 (query, key) pairs are forbidden"));
  const PropertyCheck good = masked_keys_get_zero(weights(3, 3, {1, 0, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5}), causal(3));
  CHECK(good.holds);
  CHECK(good.figure == 0);
}

TEST_CASE("the seeded permutation is a permutation, the same for a seed, and never the identity", "[properties]") {
  for (const std::size_t n : {2, 3, 5, 17})
    for (const std::uint64_t seed : {0ULL, 1ULL, 42ULL}) {
      const std::vector<std::size_t> pi = seeded_permutation(n, seed);
      std::vector<std::size_t> sorted = pi, identity(n);
      std::sort(sorted.begin(), sorted.end());
      std::iota(identity.begin(), identity.end(), std::size_t{0});
      CHECK(sorted == identity);
      CHECK(pi != identity);
      CHECK(seeded_permutation(n, seed) == pi);
    }
  CHECK(seeded_permutation(1, 0) == std::vector<std::size_t>{0});
  CHECK(seeded_permutation(0, 0).empty());
  CHECK(seeded_permutation(17, 0) != seeded_permutation(17, 1));
}

TEST_CASE("permuting the tokens moves X, the tokens and a padding mask, but not a causal mask", "[properties]") {
  const std::shared_ptr<const Problem> padded = example("padded_batch.json");
  const std::vector<std::size_t> pi = seeded_permutation(padded->n, 3);
  const Problem q = permute_tokens(*padded, pi);
  for (std::size_t b = 0; b < padded->B; ++b)
    for (std::size_t i = 0; i < padded->n; ++i) {
      CHECK(q.tokens[b][i] == padded->tokens[b][pi[i]]);
      CHECK(q.X(b, i, 0) == padded->X(b, pi[i], 0));
      CHECK(q.C(b, i, 0) == padded->C(b, pi[i], 0));
      for (std::size_t j = 0; j < padded->m; ++j) CHECK(q.mask.allows(b, i, j) == padded->mask.allows(b, pi[i], pi[j]));
    }
  const std::shared_ptr<const Problem> gpt = example("gpt_causal.json");
  const Problem g = permute_tokens(*gpt, seeded_permutation(gpt->n, 0));
  CHECK(g.mask.kind == MaskKind::causal);
  CHECK(g.mask.band(0) == gpt->mask.band(0));
}

TEST_CASE("outputs that do not follow the permutation fail equivariance, beyond the tolerance", "[properties]") {
  const std::shared_ptr<const Problem> cat = example("the_cat_sat.json");
  const std::vector<std::size_t> pi{2, 0, 1};
  // Y (1, 3, 1) = [1, 2, 3]; permuted correctly it is [3, 1, 2]
  const Tensor<double> Y({1, 3, 1}, {1, 2, 3});
  CHECK(permutation_equivariance(*cat, Y, Tensor<double>({1, 3, 1}, {3, 1, 2}), pi, 1e-6).holds);
  const PropertyCheck bad = permutation_equivariance(*cat, Y, Tensor<double>({1, 3, 1}, {1, 2, 3}), pi, 1e-6);
  CHECK_FALSE(bad.holds);
  CHECK(bad.expected);
  CHECK(bad.figure == 2);  // |Y[2] - Y'[0]| = |3 - 1|
  CHECK(contains(bad.reason, "π = [2,0,1]"));
}

TEST_CASE("flash equals naive follows compare's verdict, with max|flash - ref| against its bound", "[properties]") {
  CompareRecord c;
  c.flash_vs_ref.max_abs = 3e-6;
  c.bound = 1e-6;
  c.pass = false;
  const PropertyCheck bad = flash_equals_naive(c);
  CHECK_FALSE(bad.holds);
  CHECK(bad.figure == 3e-6);
  CHECK(bad.tolerance == 1e-6);
  const std::vector<PropertyCheck> checks{bad};
  CHECK_FALSE(all_expected_hold(checks));
}

TEST_CASE("properties --json writes a figure that is not finite as the plain strings inf and nan", "[properties]") {
  const std::vector<PropertyCheck> checks = {
      {.name = "a", .figure = std::numeric_limits<double>::infinity(), .tolerance = 1},
      {.name = "b", .figure = std::numeric_limits<double>::quiet_NaN(), .tolerance = 1}};
  const std::string text = properties_to_json(checks, DType::float32, 0, "attn-trace test");
  CHECK(text.find(R"("figure": "inf")") != std::string::npos);
  CHECK(text.find(R"("figure": "nan")") != std::string::npos);
  CHECK(text.find(R"(\"inf\")") == std::string::npos);
}
