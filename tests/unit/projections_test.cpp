// The projections around attention on inputs small enough to work out by hand, through the loader
// and both engines: the value bias b_v added exactly once (V value by value, then the output), and an
// out_in W_o that is not square, so that its transpose and a reshape of it give different outputs.
// Expected numbers are worked out by hand in the comments.

#include <vector>

#include <catch2/catch.hpp>

#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "io/load.hpp"
#include "support.hpp"

using namespace attn;
using attn::test::check_close;
using attn::test::StepRecorder;

namespace {

const char* const engine_names[] = {"naive", "flash 1 × 1", "flash 2 × 2"};

// The steps of naive, and of flash with tiles of 1 × 1 and of 2 × 2, for one input.
template <class T>
std::vector<StepRecorder> both_engines(const Problem& p) {
  std::vector<StepRecorder> runs(3);
  run_naive<T>(p, runs[0]);
  run_flash<T>(p, runs[1], {1, 1});
  run_flash<T>(p, runs[2], {2, 2});
  return runs;
}

}  // namespace

TEMPLATE_TEST_CASE("The value bias b_v is added once, to every row of V, and the output follows", "[engine][bias]",
                   float, double) {
  using T = TestType;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  // X = [[1, 0], [0, 1], [1, 1]], W_v = [[1, 2], [3, 4]], b_v = [10, 20]:
  //   V = X·W_v + b_v = [[1, 2] + b_v, [3, 4] + b_v, [4, 6] + b_v] = [[11, 22], [13, 24], [14, 26]]
  //   (with b_v added twice: [[21, 42], [23, 44], [24, 46]])
  // W_q and W_k are zero, so every score is 0 and every query weighs the three keys 1/3 each; without W_o
  // the output of every row is the mean of V: [(11 + 13 + 14) / 3, (22 + 24 + 26) / 3] = [38/3, 24]
  const Problem p = load_problem(R"({"X": [[1, 0], [0, 1], [1, 1]], "W_q": [[0], [0]], "W_k": [[0], [0]],
                                     "W_v": [[1, 2], [3, 4]], "b_v": [10, 20]})",
                                 "b_v.json");
  const std::vector<StepRecorder> runs = both_engines<T>(p);
  for (std::size_t run = 0; run < runs.size(); ++run) {
    INFO(engine_names[run]);
    check_close("v", runs[run].at(Step::v), {1, 3, 2}, {11, 22, 13, 24, 14, 26}, 0);
    check_close("v_heads", runs[run].at(Step::v_heads), {1, 1, 3, 2}, {11, 22, 13, 24, 14, 26}, 0);
    check_close("output", runs[run].at(Step::output), {1, 3, 2}, {38.0 / 3, 24, 38.0 / 3, 24, 38.0 / 3, 24}, tol);
  }
}

TEMPLATE_TEST_CASE("An out_in W_o of 2 × 3 is transposed on the way to the output, not reshaped", "[engine][loader]",
                   float, double) {
  using T = TestType;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  // layout out_in, as PyTorch's nn.Linear stores weights (out × in), y = x·Wᵀ:
  //   W_v stored 3 × 2 = [[1, 0], [0, 1], [1, 1]]: V = [x_0, x_1, x_0 + x_1], so V = [[1, 0, 1], [0, 1, 1]]
  //   for X = [[1, 0], [0, 1]]; W_q, W_k (1 × 2) are zero, so each query weighs both keys 1/2:
  //   concat = [0.5, 0.5, 1] for both rows
  //   W_o stored 2 × 3 = [[1, 2, 3], [4, 5, 6]]: y = [1·0.5 + 2·0.5 + 3·1, 4·0.5 + 5·0.5 + 6·1] = [4.5, 10.5]
  //   (a reshape to 3 × 2, [[1, 2], [3, 4], [5, 6]], would give [0.5 + 1.5 + 5, 1 + 2 + 6] = [7, 9])
  const Problem p = load_problem(R"({"X": [[1, 0], [0, 1]], "layout": "out_in", "W_q": [[0, 0]], "W_k": [[0, 0]],
                                     "W_v": [[1, 0], [0, 1], [1, 1]], "W_o": [[1, 2, 3], [4, 5, 6]]})",
                                 "out_in.json");
  const std::vector<StepRecorder> runs = both_engines<T>(p);
  for (std::size_t run = 0; run < runs.size(); ++run) {
    INFO(engine_names[run]);
    check_close("v", runs[run].at(Step::v), {1, 2, 3}, {1, 0, 1, 0, 1, 1}, 0);
    check_close("concat", runs[run].at(Step::concat), {1, 2, 3}, {0.5, 0.5, 1, 0.5, 0.5, 1}, tol);
    check_close("output", runs[run].at(Step::output), {1, 2, 2}, {4.5, 10.5, 4.5, 10.5}, tol);
  }
}
