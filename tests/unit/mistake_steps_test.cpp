// The catalogue's word on what each mistake overrides (changed_steps, lessons/mistaken_forward.hpp) against what the
// mistaken forward pass does: on every bundled example where a forward mistake changes something, the
// first step whose value differs from the plain pass is one the catalogue names. A backward mistake changes no forward
// step, and names none. (A mistake the input refuses, or one that leaves every step as it is, is skipped there.)

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "io/load.hpp"
#include "lessons/catalogue.hpp"
#include "lessons/mistaken_forward.hpp"
#include "lessons/mistakes.hpp"
#include "observe/steps.hpp"

namespace attn {

namespace {

// Every element equal, NaN equal to NaN.
bool same(const Tensor<double>& a, const Tensor<double>& b) {
  if (a.shape() != b.shape()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double x = a.values()[k], y = b.values()[k];
    if (x != y && !(std::isnan(x) && std::isnan(y))) return false;
  }
  return true;
}

// Every mistake but none, forward and backward.
std::vector<Mistake> every_mistake() {
  std::vector<Mistake> out;
  for (int k = 1; k <= static_cast<int>(Mistake::dq_transposed); ++k) out.push_back(static_cast<Mistake>(k));
  return out;
}

}  // namespace

TEST_CASE("Each forward mistake changes first a step the catalogue names", "[mistakes]") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ATTN_SOURCE_DIR) + "/data"))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, Problem>> problems;
  for (const std::string& file : files) problems.emplace_back(file, load_problem_file(file));
  // no bundled example's mask empties a row, which is where minus-1e9 changes something: "The cat sat"
  // with a custom mask whose middle row allows nothing
  problems.emplace_back("The cat sat with an emptied row", load_problem(R"({"tokens": ["The", "cat", "sat"],
      "X": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]], "W_q": [[1, 0], [0, 1], [1, 0], [0, 1]],
      "W_k": [[0, 1], [1, 0], [0, 1], [1, 0]], "W_v": [[1, 0], [0, 1], [0, 1], [1, 0]],
      "mask": {"type": "custom", "allow": [[true, false, false], [false, false, false], [true, true, true]]}})",
                                                                        "emptied_row.json"));
  std::vector<std::size_t> tried(static_cast<std::size_t>(Mistake::dq_transposed) + 1, 0);
  for (const auto& [file, p] : problems) {
    const ForwardRun<double> plain = forward<double>(p, Mistake::none, DType::float64);
    for (const Mistake m : every_mistake()) {
      const auto named = changed_steps(m);
      INFO(file << ", the mistake " << mistake_info(m).name);
      if (mistake_info(m).backward) {
        CHECK(named.empty());
        continue;
      }
      if (!changes_something(m, p) || mistake_refused(m, p)) continue;
      REQUIRE_FALSE(named.empty());
      const ForwardRun<double> mistaken = forward<double>(p, m, DType::float64);
      // a weight that is its own transpose (bert_bias.json's W_o) passes a transposing mistake unchanged
      const auto steps = steps_of(p);
      if (std::all_of(steps.begin(), steps.end(), [&](Step s) {
            return same(plain.computed[static_cast<std::size_t>(s)], mistaken.computed[static_cast<std::size_t>(s)]);
          }))
        continue;
      const auto names = [&named](Step s) {
        return std::any_of(named.begin(), named.end(), [s](const auto& n) { return n.first == s; });
      };
      // the first step that differs is one the catalogue names
      for (const Step s : steps_of(p)) {
        if (same(plain.computed[static_cast<std::size_t>(s)], mistaken.computed[static_cast<std::size_t>(s)])) continue;
        INFO("the first step that differs: " << step_info(s).name);
        CHECK(names(s));
        break;
      }
      // and of the steps it names that the input has, one at least differs (a split into one key/value
      // head is the same with or without the transpose, so wrong-reshape leaves k_heads and v_heads of MQA)
      bool some = false;
      for (const auto& [s, formula] : named) {
        INFO(step_info(s).name << ": " << formula);
        CHECK_FALSE(formula.empty());
        if (step_applies(s, p))
          some = some ||
                 !same(plain.computed[static_cast<std::size_t>(s)], mistaken.computed[static_cast<std::size_t>(s)]);
      }
      CHECK(some);
      ++tried[static_cast<std::size_t>(m)];
    }
  }
  // every forward mistake was tried on some example
  for (const Mistake m : every_mistake()) {
    if (mistake_info(m).backward) continue;
    INFO(mistake_info(m).name);
    CHECK(tried[static_cast<std::size_t>(m)] > 0);
  }
}

}  // namespace attn
